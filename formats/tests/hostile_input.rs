//! Untrusted bytes never panic, never allocate beyond what the header allows,
//! and always come back as an error unless they decode to exactly a valid
//! asset (a mutation inside the zstd stream can leave the hashed payload
//! unchanged; the hash guarantees the content is then the original).
//!
//! Over 100 000 inputs: random bytes, mutations of every golden sample
//! (bit flips, byte writes, truncations, extensions, forged length fields),
//! well-formed containers around mutated or random payloads (so the
//! MessagePack decoder and validators see hostile data, not just the hash
//! check), and a zstd bomb of 4 GiB of zeros. A counting allocator measures
//! the peak heap use of every single decode.
#![allow(unsafe_code)] // the counting allocator below, and only it

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;

use pellet_formats::assets::decode_any;
use pellet_formats::container::{
    DecodeLimits, FLAG_ZSTD, FORMAT_VERSION, HEADER_LEN, Header, encode_payload,
};
use pellet_formats::{AssetKind, DecodeError};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Tracks live and peak heap bytes per thread (tests run in parallel threads).
struct CountingAlloc;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    // `try_with`: thread-local storage may already be gone during thread exit.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize));
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Runs `f` and returns its result with the peak extra heap bytes it used.
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get);
    (out, (peak - base).max(0) as usize)
}

/// Any input of at most `len` bytes may need the bytes themselves, a decoded
/// payload bounded by the header, and bookkeeping; 16 MiB is far above what
/// these small inputs can legitimately need and far below a runaway allocation.
const HEAP_BOUND: usize = 16 << 20;

fn decode_checked(bytes: &[u8]) -> Result<(), DecodeError> {
    let (result, peak) = measure(|| decode_any(bytes, &DecodeLimits::default()).map(|_| ()));
    assert!(
        peak < HEAP_BOUND,
        "decoding {} bytes used {peak} bytes of heap",
        bytes.len()
    );
    result
}

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

fn samples() -> Vec<Vec<u8>> {
    common::all()
        .iter()
        .map(|(_, a)| common::encode(a))
        .collect()
}

#[derive(Debug, Clone)]
enum Mutation {
    FlipBit(usize, u8),
    SetByte(usize, u8),
    Truncate(usize),
    Extend(Vec<u8>),
    SetU64(usize, u64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(i, v)| Mutation::SetByte(i, v)),
        2 => any::<usize>().prop_map(Mutation::Truncate),
        1 => proptest::collection::vec(any::<u8>(), 1..64).prop_map(Mutation::Extend),
        // The two length fields, with small, boundary and huge values.
        2 => (prop_oneof![Just(16usize), Just(24usize)],
              prop_oneof![any::<u64>(), 0u64..4096, Just(u64::MAX), Just(1u64 << 30), Just((1u64 << 30) + 1)])
            .prop_map(|(at, v)| Mutation::SetU64(at, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) -> bool {
    let len = bytes.len();
    let needs = match *m {
        Mutation::SetU64(at, _) => at + 8,
        Mutation::Extend(_) => 0,
        _ => 1,
    };
    if len < needs {
        return false;
    }
    match *m {
        Mutation::FlipBit(i, b) => bytes[i % len] ^= 1 << b,
        Mutation::SetByte(i, v) => {
            let i = i % len;
            if bytes[i] == v {
                return false;
            }
            bytes[i] = v;
        }
        Mutation::Truncate(n) => bytes.truncate(n % len),
        Mutation::Extend(ref extra) => bytes.extend_from_slice(extra),
        Mutation::SetU64(at, v) => {
            if bytes[at..at + 8] == v.to_le_bytes() {
                return false;
            }
            bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
    true
}

#[test]
fn random_bytes_are_rejected() {
    let mut runner = TestRunner::new(config(20_000));
    runner
        .run(&proptest::collection::vec(any::<u8>(), 0..512), |bytes| {
            prop_assert!(decode_checked(&bytes).is_err());
            Ok(())
        })
        .expect("random bytes");
}

#[test]
fn random_bytes_behind_a_valid_magic_are_rejected() {
    let mut runner = TestRunner::new(config(20_000));
    runner
        .run(&proptest::collection::vec(any::<u8>(), 0..256), |tail| {
            let mut bytes = b"\x89PELLET\n\x01\x00".to_vec();
            bytes.extend_from_slice(&tail);
            prop_assert!(decode_checked(&bytes).is_err());
            Ok(())
        })
        .expect("random headers");
}

#[test]
fn mutated_files_are_rejected() {
    let samples = samples();
    let mut runner = TestRunner::new(config(40_000));
    runner
        .run(
            &(
                0..samples.len(),
                proptest::collection::vec(mutation(), 1..4),
            ),
            |(which, mutations)| {
                let mut bytes = samples[which].clone();
                let mut changed = false;
                for m in &mutations {
                    changed |= apply(&mut bytes, m);
                }
                if changed && bytes != samples[which] && decode_checked(&bytes).is_ok() {
                    // The only acceptable success: the flip hit redundancy in
                    // the zstd stream (say, a match offset pointing at another
                    // run of zeros) and the payload, which the BLAKE3 hash
                    // pins, is byte for byte the original.
                    let original =
                        decode_any(&samples[which], &DecodeLimits::default()).expect("sample");
                    let mutated =
                        decode_any(&bytes, &DecodeLimits::default()).expect("decoded once");
                    prop_assert_eq!(
                        original,
                        mutated,
                        "accepted with other content after {:?}",
                        mutations
                    );
                    prop_assert!(
                        bytes.len() > HEADER_LEN
                            && bytes[..HEADER_LEN] == samples[which][..HEADER_LEN]
                    );
                }
                Ok(())
            },
        )
        .expect("mutated files");
}

/// Containers with a correct hash around a mutated payload reach the
/// MessagePack decoder and the validators. They may decode (a flipped bit in a
/// float is still a float), but must never panic, and what decodes must be valid.
#[test]
fn mutated_payloads_with_correct_hashes_never_panic() {
    let payloads: Vec<(AssetKind, Vec<u8>)> = samples()
        .iter()
        .map(|bytes| {
            let header = Header::parse(bytes).expect("sample");
            let payload = zstd::bulk::decompress(&bytes[HEADER_LEN..], header.payload_len as usize)
                .expect("sample");
            (header.kind, payload)
        })
        .collect();
    let mut runner = TestRunner::new(config(20_000));
    runner
        .run(
            &(
                0..payloads.len(),
                proptest::collection::vec(mutation(), 1..4),
                0..6u16,
            ),
            |(which, mutations, kind_shift)| {
                let (kind, mut payload) = payloads[which].clone();
                for m in &mutations {
                    if let Mutation::SetU64(..) = m {
                        continue;
                    }
                    if !payload.is_empty() {
                        apply(&mut payload, m);
                    }
                }
                // Sometimes label the payload as another kind.
                let kind = if kind_shift == 0 {
                    AssetKind::ALL[(kind as usize) % AssetKind::ALL.len()]
                } else {
                    kind
                };
                let bytes = encode_payload(kind, &payload).expect("wrap");
                if let Ok(()) = decode_checked(&bytes) {
                    let (_, asset) =
                        decode_any(&bytes, &DecodeLimits::default()).expect("decoded once");
                    prop_assert_eq!(asset.kind(), kind);
                }
                Ok(())
            },
        )
        .expect("mutated payloads");
}

/// 4 GiB of zeros compress to about 100 KiB of zstd. Whatever the header
/// claims, decoding stops at the declared size and allocates no more.
#[test]
fn a_zstd_bomb_is_stopped_at_the_declared_size() {
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 1).expect("encoder");
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..4096 {
        encoder.write_all(&zeros).expect("compress");
    }
    let bomb = encoder.finish().expect("finish");
    assert!(bomb.len() < 4 << 20, "bomb is {} bytes", bomb.len());
    let wrap = |declared: u64| {
        let header = Header {
            version: FORMAT_VERSION,
            kind: AssetKind::SimState,
            flags: FLAG_ZSTD,
            stored_len: bomb.len() as u64,
            payload_len: declared,
            hash: [0; 32],
        };
        let mut bytes = header.to_bytes().to_vec();
        bytes.extend_from_slice(&bomb);
        bytes
    };
    // Honest header: refused before decompressing anything.
    let bytes = wrap(4 << 30);
    let (err, peak) =
        measure(|| decode_any(&bytes, &DecodeLimits::default()).expect_err("too large"));
    assert!(matches!(err, DecodeError::TooLarge { .. }), "{err}");
    assert!(peak < 1 << 20, "refusal allocated {peak} bytes");
    // Lying header: decompression stops one byte past the declared 8 MiB.
    let limits = DecodeLimits {
        max_payload: 8 << 20,
    };
    let bytes = wrap(8 << 20);
    let (err, peak) = measure(|| decode_any(&bytes, &limits).expect_err("bomb"));
    assert!(
        matches!(err, DecodeError::PayloadOverflow { declared } if declared == 8 << 20),
        "{err}"
    );
    assert!(
        peak < 24 << 20,
        "the bomb made decoding allocate {peak} bytes"
    );
    // Small declared size: stopped almost at once.
    let bytes = wrap(1000);
    let (err, peak) = measure(|| decode_any(&bytes, &DecodeLimits::default()).expect_err("bomb"));
    assert!(matches!(err, DecodeError::PayloadOverflow { .. }), "{err}");
    assert!(peak < HEAP_BOUND, "{peak}");
}
