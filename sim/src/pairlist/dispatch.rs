//! Runtime choice of the instruction set for [`lanes::pair_forces`]: the
//! one module of the workspace that allows `unsafe` (the workspace denies
//! it), because calling a `#[target_feature]` function is unsafe until the
//! feature is known to be there.
//!
//! Audit: each `unsafe` block below calls a function compiled for a
//! feature only after `is_x86_feature_detected!` has reported that feature
//! on this CPU; the functions themselves contain no unsafe code (they
//! inline the safe [`lanes::pair_forces`]). Without the features, or off
//! x86-64, the portable build of the same function runs. Every build gives
//! bit-identical results (see [`lanes`]).
#![allow(unsafe_code)]

use super::lanes::{self, LANES, LaneIndex, LaneSources, PairLanes, PairResults};

/// The instruction set [`pair_forces`] uses on this machine: `"avx512"`,
/// `"avx2"` or `"portable"`.
pub fn simd_level() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "avx512";
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return "avx2";
        }
    }
    "portable"
}

/// [`lanes::pair_forces`] with the widest instructions this CPU has.
#[inline]
pub fn pair_forces(b: &PairLanes, dt_hist: f32, out: &mut PairResults) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU reports AVX-512F, the only feature `avx512` is
            // compiled for; the call passes plain references.
            unsafe { avx512(b, dt_hist, out) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU reports AVX2, the only feature `avx2` is
            // compiled for; the call passes plain references.
            unsafe { avx2(b, dt_hist, out) };
            return;
        }
    }
    lanes::pair_forces(b, dt_hist, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn avx512(b: &PairLanes, dt_hist: f32, out: &mut PairResults) {
    lanes::pair_forces(b, dt_hist, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn avx2(b: &PairLanes, dt_hist: f32, out: &mut PairResults) {
    lanes::pair_forces(b, dt_hist, out);
}

/// Fills a batch's lanes from `src` at `idx`: AVX-512 or AVX2 gathers
/// where the CPU has them, the portable loop elsewhere; all load the same
/// values.
///
/// # Panics
/// When an index is out of range (never, for indices from the list). The
/// wide builds check every index with vector compares before they gather:
/// that check is what makes the unchecked gathers sound.
#[inline]
pub fn fill_lanes(src: &LaneSources<'_>, idx: &LaneIndex, b: &mut PairLanes) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU reports AVX-512F, the feature `gather512` is
            // compiled for; it checks its indices itself.
            unsafe { gather512(src, idx, b) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above, for AVX2 and `gather256`.
            unsafe { gather256(src, idx, b) };
            return;
        }
    }
    lanes::fill(src, idx, b);
}

/// The portable fill, for tests that compare it with the gathers.
pub fn fill_lanes_portable(src: &LaneSources<'_>, idx: &LaneIndex, b: &mut PairLanes) {
    lanes::fill(src, idx, b);
}

/// The lengths the indices are checked against: particles (all three
/// particle arrays), springs (all three axes), pairs (all five constants).
fn limits(src: &LaneSources<'_>) -> (i32, i32, i32) {
    let particles = src.pos.len().min(src.vel.len()).min(src.angvel.len());
    let springs = src.spring.iter().map(|s| s.len()).min().unwrap_or(0);
    let pairs = [src.kn, src.kt, src.mu, src.damping, src.sign]
        .iter()
        .map(|s| s.len())
        .min()
        .unwrap_or(0);
    // Offsets are 4 * index + 3 in i32: particle counts stay below 2^29.
    let clamp = |n: usize, max: usize| n.min(max) as i32;
    (
        clamp(particles, (i32::MAX as usize - 3) / 4),
        clamp(springs, i32::MAX as usize),
        clamp(pairs, i32::MAX as usize),
    )
}

/// # Safety
/// AVX-512F must be available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gather512(src: &LaneSources<'_>, idx: &LaneIndex, b: &mut PairLanes) {
    use std::arch::x86_64::*;
    let (particles, springs, pairs) = limits(src);
    // SAFETY: the index arrays and lane arrays hold exactly 16 elements
    // (unaligned loads and stores); every gather's offsets are checked below
    // to address elements inside its slice: indices are below the slices'
    // lengths (in `[f32; 4]` records for the particle arrays, so record
    // offset 4 i + a < 4 len).
    unsafe {
        let load = |v: &[u32; LANES]| _mm512_loadu_si512(v.as_ptr().cast());
        let (vi, vj, vl, vp) = (
            load(&idx.i),
            load(&idx.j),
            load(&idx.local),
            load(&idx.pair),
        );
        let over = |v: __m512i, n: i32| _mm512_cmpge_epu32_mask(v, _mm512_set1_epi32(n));
        let bad = over(vi, particles) | over(vj, particles) | over(vl, springs) | over(vp, pairs);
        assert!(bad == 0, "pair lane index out of range");
        let gather = |base: *const f32, offsets: __m512i, out: &mut [f32; LANES]| {
            _mm512_storeu_ps(out.as_mut_ptr(), _mm512_i32gather_ps::<4>(offsets, base));
        };
        let (ri, rj) = (_mm512_slli_epi32::<2>(vi), _mm512_slli_epi32::<2>(vj));
        let (p, v, w) = (
            src.pos.as_ptr().cast::<f32>(),
            src.vel.as_ptr().cast::<f32>(),
            src.angvel.as_ptr().cast::<f32>(),
        );
        for a in 0..4 {
            let add = _mm512_set1_epi32(a as i32);
            let (oi, oj) = (_mm512_add_epi32(ri, add), _mm512_add_epi32(rj, add));
            gather(p, oi, &mut b.pi[a]);
            gather(p, oj, &mut b.pj[a]);
            if a < 3 {
                gather(v, oi, &mut b.vi[a]);
                gather(v, oj, &mut b.vj[a]);
                gather(w, oi, &mut b.wi[a]);
                gather(w, oj, &mut b.wj[a]);
            }
        }
        for a in 0..3 {
            gather(src.spring[a].as_ptr(), vl, &mut b.xi[a]);
        }
        gather(src.kn.as_ptr(), vp, &mut b.kn);
        gather(src.kt.as_ptr(), vp, &mut b.kt);
        gather(src.mu.as_ptr(), vp, &mut b.mu);
        gather(src.damping.as_ptr(), vp, &mut b.c);
        gather(src.sign.as_ptr(), vp, &mut b.sign);
    }
}

/// # Safety
/// AVX2 must be available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gather256(src: &LaneSources<'_>, idx: &LaneIndex, b: &mut PairLanes) {
    use std::arch::x86_64::*;
    let (particles, springs, pairs) = limits(src);
    // SAFETY: as in `gather512`, eight lanes at a time; indices are below
    // 2^31, so the signed compares order them correctly.
    unsafe {
        for h in 0..2 {
            let at = h * 8;
            let load = |v: &[u32; LANES]| _mm256_loadu_si256(v[at..].as_ptr().cast());
            let (vi, vj, vl, vp) = (
                load(&idx.i),
                load(&idx.j),
                load(&idx.local),
                load(&idx.pair),
            );
            let under = |v: __m256i, n: i32| {
                let neg = _mm256_cmpgt_epi32(_mm256_setzero_si256(), v);
                let ok = _mm256_andnot_si256(neg, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), v));
                _mm256_movemask_epi8(ok) == -1
            };
            let good = under(vi, particles)
                && under(vj, particles)
                && under(vl, springs)
                && under(vp, pairs);
            assert!(good, "pair lane index out of range");
            let gather = |base: *const f32, offsets: __m256i, out: &mut [f32; LANES]| {
                _mm256_storeu_ps(
                    out[at..].as_mut_ptr(),
                    _mm256_i32gather_ps::<4>(base, offsets),
                );
            };
            let (ri, rj) = (_mm256_slli_epi32::<2>(vi), _mm256_slli_epi32::<2>(vj));
            let (p, v, w) = (
                src.pos.as_ptr().cast::<f32>(),
                src.vel.as_ptr().cast::<f32>(),
                src.angvel.as_ptr().cast::<f32>(),
            );
            for a in 0..4 {
                let add = _mm256_set1_epi32(a as i32);
                let (oi, oj) = (_mm256_add_epi32(ri, add), _mm256_add_epi32(rj, add));
                gather(p, oi, &mut b.pi[a]);
                gather(p, oj, &mut b.pj[a]);
                if a < 3 {
                    gather(v, oi, &mut b.vi[a]);
                    gather(v, oj, &mut b.vj[a]);
                    gather(w, oi, &mut b.wi[a]);
                    gather(w, oj, &mut b.wj[a]);
                }
            }
            for a in 0..3 {
                gather(src.spring[a].as_ptr(), vl, &mut b.xi[a]);
            }
            gather(src.kn.as_ptr(), vp, &mut b.kn);
            gather(src.kt.as_ptr(), vp, &mut b.kt);
            gather(src.mu.as_ptr(), vp, &mut b.mu);
            gather(src.damping.as_ptr(), vp, &mut b.c);
            gather(src.sign.as_ptr(), vp, &mut b.sign);
        }
    }
}

/// The portable build, for tests that compare it with the wide ones.
pub fn pair_forces_portable(b: &PairLanes, dt_hist: f32, out: &mut PairResults) {
    lanes::pair_forces(b, dt_hist, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairlist::lanes::LANES;

    type Records = Vec<[f32; 4]>;

    /// Particle records (positions, velocities, angular velocities) and a per-pair array.
    fn sources(n: usize, pairs: usize) -> (Records, Records, Records, Vec<f32>) {
        let f = |k: usize, a: usize| (k * 7 + a) as f32 * 0.25 - 3.0;
        let rec = |s: usize| {
            (0..n)
                .map(|k| [f(k + s, 0), f(k + s, 1), f(k + s, 2), f(k + s, 3)])
                .collect()
        };
        (
            rec(0),
            rec(1),
            rec(2),
            (0..pairs).map(|k| f(k, 5)).collect(),
        )
    }

    /// The gathers load exactly what the portable fill loads, lane by lane.
    #[test]
    fn gathered_lanes_match_the_portable_fill() {
        let (pos, vel, angvel, per_pair) = sources(300, 500);
        let spring: Vec<Vec<f32>> = (0..3)
            .map(|a| per_pair.iter().map(|x| x + a as f32).collect())
            .collect();
        let src = LaneSources {
            pos: &pos,
            vel: &vel,
            angvel: &angvel,
            spring: [&spring[0], &spring[1], &spring[2]],
            kn: &per_pair,
            kt: &spring[0],
            mu: &spring[1],
            damping: &spring[2],
            sign: &per_pair,
        };
        for round in 0..50u32 {
            let mut idx = LaneIndex::default();
            for l in 0..LANES {
                let x = round * 31 + l as u32 * 17;
                idx.i[l] = x % 300;
                idx.j[l] = (x * 7 + 299) % 300;
                idx.local[l] = (x * 3) % 500;
                idx.pair[l] = (x * 11 + 499) % 500;
            }
            let (mut wide, mut portable) = (PairLanes::default(), PairLanes::default());
            fill_lanes(&src, &idx, &mut wide);
            fill_lanes_portable(&src, &idx, &mut portable);
            let bits = |b: &PairLanes| -> Vec<u32> {
                b.pi.iter()
                    .chain(&b.pj)
                    .chain(&b.vi)
                    .chain(&b.vj)
                    .chain(&b.wi)
                    .chain(&b.wj)
                    .chain(&b.xi)
                    .chain([&b.kn, &b.kt, &b.mu, &b.c, &b.sign])
                    .flat_map(|v| v.map(f32::to_bits))
                    .collect()
            };
            assert_eq!(
                bits(&wide),
                bits(&portable),
                "round {round} ({})",
                simd_level()
            );
        }
    }

    /// An index past its slice panics instead of reading beyond it.
    #[test]
    #[should_panic(expected = "out of")]
    fn an_index_out_of_range_panics() {
        let (pos, vel, angvel, per_pair) = sources(10, 10);
        let src = LaneSources {
            pos: &pos,
            vel: &vel,
            angvel: &angvel,
            spring: [&per_pair, &per_pair, &per_pair],
            kn: &per_pair,
            kt: &per_pair,
            mu: &per_pair,
            damping: &per_pair,
            sign: &per_pair,
        };
        let mut idx = LaneIndex::default();
        idx.j[5] = 10;
        let mut b = PairLanes::default();
        // The wide builds say "out of range", the portable one's slices "out of bounds".
        fill_lanes(&src, &idx, &mut b);
    }

    /// Random batches with touching, grazing, coincident, sliding and
    /// sticking pairs: the wide build and the portable one agree bit for bit.
    #[test]
    fn wide_and_portable_builds_are_bit_identical() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move |lo: f32, hi: f32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            lo + (hi - lo) * ((seed >> 40) as f32 / (1u64 << 24) as f32)
        };
        for round in 0..200 {
            let mut b = PairLanes::default();
            for l in 0..LANES {
                for a in 0..3 {
                    b.pi[a][l] = rnd(-0.02, 0.02);
                    b.pj[a][l] = if round % 7 == 0 {
                        b.pi[a][l]
                    } else {
                        rnd(-0.02, 0.02)
                    };
                    b.vi[a][l] = rnd(-2.0, 2.0);
                    b.vj[a][l] = rnd(-2.0, 2.0);
                    b.wi[a][l] = rnd(-50.0, 50.0);
                    b.wj[a][l] = rnd(-50.0, 50.0);
                    b.xi[a][l] = rnd(-1e-3, 1e-3);
                }
                b.pi[3][l] = rnd(0.005, 0.015);
                b.pj[3][l] = rnd(0.005, 0.015);
                b.kn[l] = rnd(1e3, 1e5);
                b.kt[l] = if l % 5 == 0 { 0.0 } else { rnd(1e2, 1e4) };
                b.mu[l] = rnd(0.0, 1.0);
                b.c[l] = rnd(0.0, 5.0);
                b.sign[l] = if l % 2 == 0 { 1.0 } else { -1.0 };
            }
            let (mut wide, mut portable) = (PairResults::default(), PairResults::default());
            pair_forces(&b, 1e-5, &mut wide);
            pair_forces_portable(&b, 1e-5, &mut portable);
            let bits = |r: &PairResults| -> Vec<u32> {
                r.f.iter()
                    .chain(&r.tn)
                    .chain(&r.xi)
                    .flat_map(|v| v.map(f32::to_bits))
                    .collect()
            };
            assert_eq!(
                bits(&wide),
                bits(&portable),
                "round {round} ({})",
                simd_level()
            );
            assert_eq!(wide.touching, portable.touching);
        }
    }
}
