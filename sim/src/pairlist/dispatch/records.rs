//! Loads and stores of `[f32; 4]` records as four vectors of components
//! (plain 16-byte loads and in-register transposes: sixteen records with
//! AVX-512, eight with AVX2), the squared distance over the lanes, and
//! AVX2's in-register compress (x86-64 only).
//!
//! Part of the one module that allows `unsafe` ([`super`]): its audit
//! covers every `unsafe` block here.
#![allow(unsafe_code)]

use crate::pairlist::lanes::LANES;

/// The sixteen `[f32; 4]` records `base[index[l]]`, transposed: one
/// vector per component. Sixteen plain 16-byte loads put four records in
/// each 128-bit lane of four vectors, and a 4x4 transpose inside the lanes
/// (eight unpacks) leaves component `a` of record `l` in lane `l` of vector
/// `a`. On AMD Zen 4 this is much cheaper than the gathers (which are
/// microcoded there): the same values, fewer cycles.
///
/// # Safety
/// AVX-512F must be available, and `base` must point to at least
/// `index[l] + 1` records for every lane.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) unsafe fn records512(
    base: *const [f32; 4],
    index: &[u32; LANES],
) -> [std::arch::x86_64::__m512; 4] {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract: every record read is inside the slice.
    transposed512(|l| unsafe { _mm_loadu_ps(base.add(index[l] as usize).cast()) })
}

/// The sixteen 4-float rows `row(0..16)`, one vector per component: four
/// rows per 128-bit lane of four vectors, then [`transpose_lanes512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) fn transposed512(
    row: impl Fn(usize) -> std::arch::x86_64::__m128,
) -> [std::arch::x86_64::__m512; 4] {
    use std::arch::x86_64::*;
    // Vector `o` holds rows o, o + 4, o + 8 and o + 12, one per lane.
    let four = |o: usize| {
        let v = _mm512_castps128_ps512(row(o));
        let v = _mm512_insertf32x4::<1>(v, row(o + 4));
        let v = _mm512_insertf32x4::<2>(v, row(o + 8));
        _mm512_insertf32x4::<3>(v, row(o + 12))
    };
    transpose_lanes512([four(0), four(1), four(2), four(3)])
}

/// A 4x4 transpose inside each 128-bit lane: element `e` of lane `k` of
/// `v[m]` goes to element `m` of lane `k` of the result's vector `e`
/// (interleave pairs, then pairs of pairs). Its own inverse.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) fn transpose_lanes512(
    v: [std::arch::x86_64::__m512; 4],
) -> [std::arch::x86_64::__m512; 4] {
    use std::arch::x86_64::*;
    let ab_lo = _mm512_castps_pd(_mm512_unpacklo_ps(v[0], v[1]));
    let ab_hi = _mm512_castps_pd(_mm512_unpackhi_ps(v[0], v[1]));
    let cd_lo = _mm512_castps_pd(_mm512_unpacklo_ps(v[2], v[3]));
    let cd_hi = _mm512_castps_pd(_mm512_unpackhi_ps(v[2], v[3]));
    [
        _mm512_castpd_ps(_mm512_unpacklo_pd(ab_lo, cd_lo)),
        _mm512_castpd_ps(_mm512_unpackhi_pd(ab_lo, cd_lo)),
        _mm512_castpd_ps(_mm512_unpacklo_pd(ab_hi, cd_hi)),
        _mm512_castpd_ps(_mm512_unpackhi_pd(ab_hi, cd_hi)),
    ]
}

/// Sixteen consecutive `[f32; 4]` records from four vectors of components
/// (the inverse of [`records512`] on consecutive records): a 4x4
/// transpose inside the 128-bit lanes, then two rounds of lane shuffles
/// put records `4k..4k + 4` in vector `k`.
///
/// # Safety
/// AVX-512F must be available, and `base` must point to sixteen writable
/// records.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) unsafe fn store_records512(base: *mut [f32; 4], c: [std::arch::x86_64::__m512; 4]) {
    use std::arch::x86_64::*;
    // Lane k of r[m] is record 4k + m.
    let r = transpose_lanes512(c);
    let (t0, t1) = (
        _mm512_shuffle_f32x4::<0x44>(r[0], r[1]),
        _mm512_shuffle_f32x4::<0x44>(r[2], r[3]),
    );
    let (t2, t3) = (
        _mm512_shuffle_f32x4::<0xEE>(r[0], r[1]),
        _mm512_shuffle_f32x4::<0xEE>(r[2], r[3]),
    );
    let out = [
        _mm512_shuffle_f32x4::<0x88>(t0, t1),
        _mm512_shuffle_f32x4::<0xDD>(t0, t1),
        _mm512_shuffle_f32x4::<0x88>(t2, t3),
        _mm512_shuffle_f32x4::<0xDD>(t2, t3),
    ];
    for (k, v) in out.into_iter().enumerate() {
        // SAFETY: the caller's contract: sixteen records from `base`.
        unsafe { _mm512_storeu_ps(base.add(4 * k).cast(), v) };
    }
}

/// `|pi - pj|^2` over sixteen lanes, unfused and in the order the lanes
/// compute it (`(dx dx + dy dy) + dz dz`), so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) fn dist2_512(
    pi: [std::arch::x86_64::__m512; 3],
    pj: [std::arch::x86_64::__m512; 3],
) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let d: [__m512; 3] = std::array::from_fn(|a| _mm512_sub_ps(pi[a], pj[a]));
    _mm512_add_ps(
        _mm512_add_ps(_mm512_mul_ps(d[0], d[0]), _mm512_mul_ps(d[1], d[1])),
        _mm512_mul_ps(d[2], d[2]),
    )
}

/// Eight lanes: the AVX2 build of the record loads and transposes.
pub(super) const HALF: usize = LANES / 2;

/// The eight `[f32; 4]` records `base[index[l]]`, transposed: one vector
/// per component (AVX2). Eight plain 16-byte loads put two records in each
/// of four vectors (records `o` and `o + 4` in vector `o`), and a 4x4
/// transpose inside the 128-bit lanes leaves component `a` of record `l`
/// in lane `l` of vector `a`: the values the gathers would load, without
/// the gathers (microcoded on AMD Zen 2 and 3, and the largest cost of
/// the AVX2 step there).
///
/// # Safety
/// AVX2 must be available, and `base` must point to at least
/// `index[l] + 1` records for every lane.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn records256(
    base: *const [f32; 4],
    index: &[u32],
) -> [std::arch::x86_64::__m256; 4] {
    use std::arch::x86_64::*;
    debug_assert!(index.len() >= HALF);
    // SAFETY: the caller's contract: every record read is inside the slice.
    transposed256(|l| unsafe { _mm_loadu_ps(base.add(index[l] as usize).cast()) })
}

/// The eight 4-float rows `row(0..8)`, one vector per component: rows `o`
/// and `o + 4` in vector `o`, then [`transpose_lanes256`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn transposed256(
    row: impl Fn(usize) -> std::arch::x86_64::__m128,
) -> [std::arch::x86_64::__m256; 4] {
    use std::arch::x86_64::*;
    let two = |o: usize| _mm256_insertf128_ps::<1>(_mm256_castps128_ps256(row(o)), row(o + 4));
    transpose_lanes256([two(0), two(1), two(2), two(3)])
}

/// A 4x4 transpose inside each 128-bit lane (AVX2's unpacks work within
/// the lanes): element `e` of lane `k` of `v[m]` goes to element `m` of
/// lane `k` of the result's vector `e`. Its own inverse.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn transpose_lanes256(
    v: [std::arch::x86_64::__m256; 4],
) -> [std::arch::x86_64::__m256; 4] {
    use std::arch::x86_64::*;
    let ab_lo = _mm256_castps_pd(_mm256_unpacklo_ps(v[0], v[1]));
    let ab_hi = _mm256_castps_pd(_mm256_unpackhi_ps(v[0], v[1]));
    let cd_lo = _mm256_castps_pd(_mm256_unpacklo_ps(v[2], v[3]));
    let cd_hi = _mm256_castps_pd(_mm256_unpackhi_ps(v[2], v[3]));
    [
        _mm256_castpd_ps(_mm256_unpacklo_pd(ab_lo, cd_lo)),
        _mm256_castpd_ps(_mm256_unpackhi_pd(ab_lo, cd_lo)),
        _mm256_castpd_ps(_mm256_unpacklo_pd(ab_hi, cd_hi)),
        _mm256_castpd_ps(_mm256_unpackhi_pd(ab_hi, cd_hi)),
    ]
}

/// Eight consecutive `[f32; 4]` records from four vectors of components
/// (the inverse of [`records256`] on consecutive records): the in-lane
/// transpose leaves record `4k + m` in lane `k` of vector `m`, and lane
/// swaps pair them up, two records per store.
///
/// # Safety
/// AVX2 must be available, and `base` must point to eight writable records.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn store_records256(base: *mut [f32; 4], c: [std::arch::x86_64::__m256; 4]) {
    use std::arch::x86_64::*;
    let r = transpose_lanes256(c);
    let out = [
        _mm256_permute2f128_ps::<0x20>(r[0], r[1]),
        _mm256_permute2f128_ps::<0x20>(r[2], r[3]),
        _mm256_permute2f128_ps::<0x31>(r[0], r[1]),
        _mm256_permute2f128_ps::<0x31>(r[2], r[3]),
    ];
    for (k, v) in out.into_iter().enumerate() {
        // SAFETY: the caller's contract: eight records from `base`.
        unsafe { _mm256_storeu_ps(base.add(2 * k).cast(), v) };
    }
}

/// `|pi - pj|^2` over eight lanes, unfused and in the lanes' order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn dist2_256(
    pi: [std::arch::x86_64::__m256; 3],
    pj: [std::arch::x86_64::__m256; 3],
) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    let d: [__m256; 3] = std::array::from_fn(|a| _mm256_sub_ps(pi[a], pj[a]));
    _mm256_add_ps(
        _mm256_add_ps(_mm256_mul_ps(d[0], d[0]), _mm256_mul_ps(d[1], d[1])),
        _mm256_mul_ps(d[2], d[2]),
    )
}

/// In-register compress of eight lanes (AVX2 has no compress instruction):
/// the permutation that moves the lanes set in `mask` to the front, in
/// order, for `_mm256_permutevar8x32_*`. The table packs each mask's lane
/// numbers four bits apiece (1 KiB); the lanes past the set ones take
/// lane 0.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn compress_perm256(mask: u32) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    const PACKED: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut m = 0;
        while m < 256 {
            let (mut lane, mut at, mut packed) = (0, 0, 0u32);
            while lane < 8 {
                if m & (1 << lane) != 0 {
                    packed |= (lane as u32) << (4 * at);
                    at += 1;
                }
                lane += 1;
            }
            t[m] = packed;
            m += 1;
        }
        t
    };
    let packed = _mm256_set1_epi32(PACKED[(mask & 0xFF) as usize] as i32);
    let shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    _mm256_and_si256(_mm256_srlv_epi32(packed, shifts), _mm256_set1_epi32(0xF))
}
