//! The fills of a batch's lanes from the list's sources: record loads
//! and transposes (AVX-512 or AVX2) with gathers for the per-pair arrays,
//! or the portable loop; every index
//! checked in range with vector compares before it loads.
//!
//! Part of the one module that allows `unsafe` ([`super`]): its audit
//! covers every `unsafe` block here.
#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
use super::records::{HALF, dist2_256, dist2_512, records256, records512, store_records256};
#[cfg(target_arch = "x86_64")]
use super::{has_avx2, has_avx512};
#[cfg(target_arch = "x86_64")]
use crate::pairlist::lanes::LANES;
use crate::pairlist::lanes::{self, LaneIndex, LaneRecords, LaneSources, PairLanes, PairResults};

/// Fills a batch's lanes from `src` at `idx`: AVX-512 or AVX2 record
/// loads where the CPU has them, the portable loop elsewhere; all load the same
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
        if has_avx512() {
            // SAFETY: the CPU reports AVX-512F, the feature `gather512` is
            // compiled for; it checks its indices itself.
            unsafe { gather512(src, idx, b, true) };
            lanes::fill_roll(src, idx, b);
            return;
        }
        if has_avx2() {
            // SAFETY: as above, for AVX2 and `gather256`.
            unsafe { gather256(src, idx, b, true) };
            lanes::fill_roll(src, idx, b);
            return;
        }
    }
    lanes::fill(src, idx, b);
}

/// [`fill_lanes`] without the positions (the wide prefilter put the same
/// values in the lanes already).
#[inline]
pub fn fill_lanes_but_positions(src: &LaneSources<'_>, idx: &LaneIndex, b: &mut PairLanes) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: as in `fill_lanes`.
            unsafe { gather512(src, idx, b, false) };
            lanes::fill_roll(src, idx, b);
            return;
        }
        if has_avx2() {
            // SAFETY: as in `fill_lanes`.
            unsafe { gather256(src, idx, b, false) };
            lanes::fill_roll(src, idx, b);
            return;
        }
    }
    lanes::fill(src, idx, b);
}

/// [`lanes::lane_records`] with AVX2 transposes where the CPU has them
/// (the same values).
#[inline]
pub fn lane_records(b: &PairLanes, out: &PairResults, rec: &mut LaneRecords) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2() {
            // SAFETY: the CPU reports AVX2, the feature `records256_of` is
            // compiled for; it reads and writes whole arrays.
            unsafe { records256_of(b, out, rec) };
            return;
        }
    }
    lanes::lane_records(b, out, rec);
}

/// # Safety
/// AVX2 must be available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn records256_of(b: &PairLanes, out: &PairResults, rec: &mut LaneRecords) {
    use std::arch::x86_64::*;
    // SAFETY: eight lanes from `at` (0 or 8) of sixteen-lane arrays, and
    // eight records from `at` of sixteen-record arrays.
    unsafe {
        let zero = _mm256_setzero_ps();
        for at in [0, HALF] {
            let lanes = |v: &[f32; LANES]| _mm256_loadu_ps(v[at..].as_ptr());
            let (ri, rj) = (lanes(&b.pi[3]), lanes(&b.pj[3]));
            let f = [lanes(&out.f[0]), lanes(&out.f[1]), lanes(&out.f[2]), zero];
            let tn = [lanes(&out.tn[0]), lanes(&out.tn[1]), lanes(&out.tn[2])];
            let times = |r: __m256| {
                [
                    _mm256_mul_ps(tn[0], r),
                    _mm256_mul_ps(tn[1], r),
                    _mm256_mul_ps(tn[2], r),
                    zero,
                ]
            };
            store_records256(rec.f[at..].as_mut_ptr(), f);
            store_records256(rec.ti[at..].as_mut_ptr(), times(ri));
            store_records256(rec.tj[at..].as_mut_ptr(), times(rj));
        }
    }
}

/// The portable fill, for tests that compare it with the gathers.
pub fn fill_lanes_portable(src: &LaneSources<'_>, idx: &LaneIndex, b: &mut PairLanes) {
    lanes::fill(src, idx, b);
}

/// The lengths the indices are checked against: particles (all three
/// particle arrays), springs (all three axes), pairs (all five constants).
#[cfg(target_arch = "x86_64")]
fn limits(src: &LaneSources<'_>) -> (i32, i32, i32) {
    let particles = src.pos.len().min(src.vel.len()).min(src.angvel.len());
    let springs = src.spring.iter().map(|s| s.len()).min().unwrap_or(0);
    let mut pairs = src.sign.len();
    if src.uniform.is_none() {
        pairs = pairs.min(src.kn.len()).min(src.kt.len()).min(src.mu.len());
    }
    if src.uniform_damping.is_none() {
        pairs = pairs.min(src.damping.len());
    }
    // Offsets are 4 * index + 3 in i32: particle counts stay below 2^29.
    let clamp = |n: usize, max: usize| n.min(max) as i32;
    (
        clamp(particles, (i32::MAX as usize - 3) / 4),
        clamp(springs, i32::MAX as usize),
        clamp(pairs, i32::MAX as usize),
    )
}

/// `positions`: gather the positions and radii too.
///
/// # Safety
/// AVX-512F must be available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gather512(src: &LaneSources<'_>, idx: &LaneIndex, b: &mut PairLanes, positions: bool) {
    use std::arch::x86_64::*;
    let (particles, springs, pairs) = limits(src);
    // SAFETY: the index arrays and lane arrays hold exactly 16 elements
    // (unaligned loads and stores); every index is checked below to address
    // an element inside its slice: indices are below the slices' lengths
    // (in `[f32; 4]` records for the particle arrays).
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
        // The particles' records by plain loads and a transpose (the
        // indices were checked above): positions only when asked.
        let records = [
            (src.pos.as_ptr(), &idx.i, &mut b.pi[..]),
            (src.pos.as_ptr(), &idx.j, &mut b.pj[..]),
            (src.vel.as_ptr(), &idx.i, &mut b.vi[..]),
            (src.vel.as_ptr(), &idx.j, &mut b.vj[..]),
            (src.angvel.as_ptr(), &idx.i, &mut b.wi[..]),
            (src.angvel.as_ptr(), &idx.j, &mut b.wj[..]),
        ];
        for (base, index, out) in records.into_iter().skip(if positions { 0 } else { 2 }) {
            let r = records512(base, index);
            for (a, out) in out.iter_mut().enumerate() {
                _mm512_storeu_ps(out.as_mut_ptr(), r[a]);
            }
        }
        if positions {
            // (Without them, the wide prefilter put the springs in the lanes.)
            for a in 0..3 {
                gather(src.spring[a].as_ptr(), vl, &mut b.xi[a]);
            }
        }
        if let Some([kn, kt, mu]) = src.uniform {
            (b.kn, b.kt, b.mu) = ([kn; LANES], [kt; LANES], [mu; LANES]);
        } else {
            gather(src.kn.as_ptr(), vp, &mut b.kn);
            gather(src.kt.as_ptr(), vp, &mut b.kt);
            gather(src.mu.as_ptr(), vp, &mut b.mu);
        }
        match src.uniform_damping {
            Some(c) => b.c = [c; LANES],
            None => gather(src.damping.as_ptr(), vp, &mut b.c),
        }
        // The sign is read only where the centres coincide (`dist2` not
        // positive, computed as the lanes compute it); with the positions
        // already in the lanes, a batch with none skips its gather (the
        // lanes' sign is then never read).
        let coincide = if positions {
            true
        } else {
            let lanes =
                |v: &[[f32; LANES]; 4]| std::array::from_fn(|a| _mm512_loadu_ps(v[a].as_ptr()));
            let dist2 = dist2_512(lanes(&b.pi), lanes(&b.pj));
            _mm512_cmp_ps_mask::<_CMP_GT_OQ>(dist2, _mm512_setzero_ps()) != 0xFFFF
        };
        if coincide {
            gather(src.sign.as_ptr(), vp, &mut b.sign);
        }
    }
}

/// `positions`: load the positions and radii too (and the springs),
/// as in [`gather512`], eight lanes at a time.
///
/// # Safety
/// AVX2 must be available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn gather256(
    src: &LaneSources<'_>,
    idx: &LaneIndex,
    b: &mut PairLanes,
    positions: bool,
) {
    use std::arch::x86_64::*;
    let (particles, springs, pairs) = limits(src);
    // SAFETY: as in `gather512`, eight lanes at a time; indices are below
    // 2^31, so the signed compares order them correctly.
    unsafe {
        for h in 0..2 {
            let at = h * HALF;
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
            // The particles' records by plain loads and a transpose (the
            // indices were checked above): positions only when asked.
            let records = [
                (src.pos.as_ptr(), &idx.i, &mut b.pi[..]),
                (src.pos.as_ptr(), &idx.j, &mut b.pj[..]),
                (src.vel.as_ptr(), &idx.i, &mut b.vi[..]),
                (src.vel.as_ptr(), &idx.j, &mut b.vj[..]),
                (src.angvel.as_ptr(), &idx.i, &mut b.wi[..]),
                (src.angvel.as_ptr(), &idx.j, &mut b.wj[..]),
            ];
            for (base, index, out) in records.into_iter().skip(if positions { 0 } else { 2 }) {
                let r = records256(base, &index[at..at + HALF]);
                for (a, out) in out.iter_mut().enumerate() {
                    _mm256_storeu_ps(out[at..].as_mut_ptr(), r[a]);
                }
            }
            if positions {
                // (Without them, the wide prefilter put the springs in the lanes.)
                for a in 0..3 {
                    gather(src.spring[a].as_ptr(), vl, &mut b.xi[a]);
                }
            }
            if let Some([kn, kt, mu]) = src.uniform {
                b.kn[at..at + HALF].fill(kn);
                b.kt[at..at + HALF].fill(kt);
                b.mu[at..at + HALF].fill(mu);
            } else {
                gather(src.kn.as_ptr(), vp, &mut b.kn);
                gather(src.kt.as_ptr(), vp, &mut b.kt);
                gather(src.mu.as_ptr(), vp, &mut b.mu);
            }
            match src.uniform_damping {
                Some(c) => b.c[at..at + HALF].fill(c),
                None => gather(src.damping.as_ptr(), vp, &mut b.c),
            }
            // The sign only where it may be read, as in `gather512`.
            let coincide = positions || {
                let lanes = |v: &[[f32; LANES]; 4]| {
                    std::array::from_fn(|a| _mm256_loadu_ps(v[a][at..].as_ptr()))
                };
                let dist2 = dist2_256(lanes(&b.pi), lanes(&b.pj));
                let apart = _mm256_cmp_ps::<_CMP_GT_OQ>(dist2, _mm256_setzero_ps());
                _mm256_movemask_ps(apart) != 0xFF
            };
            if coincide {
                gather(src.sign.as_ptr(), vp, &mut b.sign);
            }
        }
    }
}
