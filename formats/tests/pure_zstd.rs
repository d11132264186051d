//! The browser's zstd decoder (ruzstd, `container::decompress_bounded_pure`)
//! against the C library's: the same payloads back from every golden asset
//! and from generated ones, and the same refusals (bombs, short streams,
//! garbage, oversized windows).
#![allow(clippy::unwrap_used)]

use pellet_formats::DecodeError;
use pellet_formats::assets::AssetKind;
use pellet_formats::container::{HEADER_LEN, Header, decompress_bounded_pure, encode_payload};

/// Bytes that compress a little and a lot.
fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    (0..len)
        .map(|i| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if i % 7 < 4 {
                (i / 64) as u8
            } else {
                (state >> 56) as u8
            }
        })
        .collect()
}

#[test]
fn the_pure_decoder_reads_what_the_c_library_wrote() {
    for (len, seed) in [(0, 1), (1, 2), (1000, 3), (200_000, 4), (3 << 20, 5)] {
        let p = payload(len, seed);
        let file = encode_payload(AssetKind::SimState, &p).unwrap();
        let header = Header::parse(&file).unwrap();
        let stored = &file[HEADER_LEN..];
        assert_eq!(
            decompress_bounded_pure(stored, header.payload_len).unwrap(),
            p,
            "{len} bytes"
        );
    }
    // Every golden asset: the same payload as the native path's.
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut seen = 0;
    for entry in std::fs::read_dir(golden).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let Ok(header) = Header::parse(&bytes) else {
            continue;
        };
        if !header.is_compressed() {
            continue;
        }
        let (_, native) = pellet_formats::container::open(&bytes, &Default::default()).unwrap();
        let pure = decompress_bounded_pure(&bytes[HEADER_LEN..], header.payload_len).unwrap();
        assert_eq!(pure, native, "{}", path.display());
        seen += 1;
    }
    assert!(seen > 0, "no compressed golden assets");
}

#[test]
fn the_pure_decoder_refuses_what_the_c_library_refuses() {
    let p = payload(100_000, 9);
    let file = encode_payload(AssetKind::SimState, &p).unwrap();
    let stored = &file[HEADER_LEN..];
    // A header that declares less: stopped at the declared size.
    assert!(matches!(
        decompress_bounded_pure(stored, 1000),
        Err(DecodeError::PayloadOverflow { declared: 1000 })
    ));
    // More than the stream holds.
    assert!(matches!(
        decompress_bounded_pure(stored, 200_000),
        Err(DecodeError::PayloadUnderflow { .. })
    ));
    // Not zstd at all, and a stream cut short.
    assert!(matches!(
        decompress_bounded_pure(b"definitely not zstd", 10),
        Err(DecodeError::Decompress(_))
    ));
    assert!(decompress_bounded_pure(&stored[..stored.len() / 2], 100_000).is_err());
    // A frame declaring a 2^30-byte window is refused before decoding.
    let mut big = stored.to_vec();
    big[4] &= !0x20; // not single-segment: a window descriptor follows
    big.insert(5, (30 - 10) << 3);
    match decompress_bounded_pure(&big, 100_000) {
        Err(DecodeError::Decompress(m)) => assert!(m.contains("window"), "{m}"),
        other => panic!("{other:?}"),
    }
}
