//! Runtime choice of the instruction set for [`lanes::pair_forces`]: the
//! one module of the workspace that allows `unsafe` (the workspace denies
//! it), because calling a `#[target_feature]` function is unsafe until the
//! feature is known to be there.
//!
//! Audit: each `unsafe` block below calls a function compiled for a
//! feature only after `is_x86_feature_detected!` has reported that feature
//! on this CPU (read once, in [`has_avx512`] and [`has_avx2`];
//! `PELLET_SIMD` may only lower the level). The pair kernels themselves
//! contain no unsafe code (they inline the safe [`lanes::pair_forces`]);
//! the record loads, gathers and sixteen-particle updates check their
//! indices and lengths before they load. Without the features, or off
//! x86-64, the portable build of the same function runs. Every build gives
//! bit-identical results (see [`lanes`]).
#![allow(unsafe_code)]

use super::lanes::{self, LANES, LaneIndex, LaneSources, PairLanes, PairResults, Pending};
use crate::stages::common::{ROLL_CDT, ROLL_EPSD2, ROLL_NONE};

/// The widest instructions the engine may use: what the CPU reports,
/// lowered by `PELLET_SIMD=avx2` or `PELLET_SIMD=portable` in the
/// environment (to measure or test the narrower builds on a wider CPU).
#[cfg(target_arch = "x86_64")]
fn simd_cap() -> (bool, bool) {
    static CAP: std::sync::OnceLock<(bool, bool)> = std::sync::OnceLock::new();
    *CAP.get_or_init(|| {
        let asked = std::env::var("PELLET_SIMD").unwrap_or_default();
        let avx2 = std::arch::is_x86_feature_detected!("avx2") && asked != "portable";
        let avx512 = std::arch::is_x86_feature_detected!("avx512f") && avx2 && asked != "avx2";
        (avx512, avx2)
    })
}

/// Whether the AVX-512 builds run (the CPU reports AVX-512F, and
/// `PELLET_SIMD` does not lower the level).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx512() -> bool {
    simd_cap().0
}

/// Whether the AVX2 builds run (the CPU reports AVX2, and `PELLET_SIMD` is
/// not `portable`).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx2() -> bool {
    simd_cap().1
}

/// The instruction set [`pair_forces`] uses on this machine: `"avx512"`,
/// `"avx2"` or `"portable"`.
pub fn simd_level() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            return "avx512";
        }
        if has_avx2() {
            return "avx2";
        }
    }
    "portable"
}

/// [`lanes::pair_forces`] with the widest instructions this CPU has
/// (`hertz`: the Hertz-Mindlin lanes; `roll`: the rolling resistance,
/// `ROLL_NONE`, `ROLL_EPSD2` or `ROLL_CDT`).
#[inline]
pub fn pair_forces(b: &PairLanes, dt_hist: f32, hertz: bool, roll: u32, out: &mut PairResults) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the CPU reports AVX-512F, the only feature `avx512` is
            // compiled for; the call passes plain references.
            unsafe { avx512(b, dt_hist, hertz, roll, out) };
            return;
        }
        if has_avx2() {
            // SAFETY: the CPU reports AVX2, the only feature `avx2` is
            // compiled for; the call passes plain references.
            unsafe { avx2(b, dt_hist, hertz, roll, out) };
            return;
        }
    }
    pair_forces_portable(b, dt_hist, hertz, roll, out);
}

/// [`lanes::pair_forces`] for the model chosen at run time (inlined into
/// each instruction set's function).
#[inline(always)]
fn lanes_for(b: &PairLanes, dt_hist: f32, hertz: bool, roll: u32, out: &mut PairResults) {
    match (hertz, roll) {
        (false, ROLL_NONE) => lanes::pair_forces::<false, ROLL_NONE>(b, dt_hist, out),
        (false, ROLL_EPSD2) => lanes::pair_forces::<false, ROLL_EPSD2>(b, dt_hist, out),
        (false, _) => lanes::pair_forces::<false, ROLL_CDT>(b, dt_hist, out),
        (true, ROLL_NONE) => lanes::pair_forces::<true, ROLL_NONE>(b, dt_hist, out),
        (true, ROLL_EPSD2) => lanes::pair_forces::<true, ROLL_EPSD2>(b, dt_hist, out),
        (true, _) => lanes::pair_forces::<true, ROLL_CDT>(b, dt_hist, out),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn avx512(b: &PairLanes, dt_hist: f32, hertz: bool, roll: u32, out: &mut PairResults) {
    lanes_for(b, dt_hist, hertz, roll, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn avx2(b: &PairLanes, dt_hist: f32, hertz: bool, roll: u32, out: &mut PairResults) {
    lanes_for(b, dt_hist, hertz, roll, out);
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
        if has_avx512() {
            // SAFETY: the CPU reports AVX-512F, the feature `gather512` is
            // compiled for; it checks its indices itself.
            unsafe { gather512(src, idx, b, true) };
            lanes::fill_roll(src, idx, b);
            return;
        }
        if has_avx2() {
            // SAFETY: as above, for AVX2 and `gather256`.
            unsafe { gather256(src, idx, b) };
            lanes::fill_roll(src, idx, b);
            return;
        }
    }
    lanes::fill(src, idx, b);
}

/// Whether the wide prefilter ([`prefilter_block`]) runs on this CPU (AVX-512F).
#[inline]
pub fn has_wide_prefilter() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx512()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The listed pairs a block of the wide prefilter reads.
#[derive(Debug, Clone, Copy)]
pub struct ListedBlock<'a> {
    /// The chunk's positions and radii.
    pub pos: &'a [[f32; 4]],
    /// Owner of each listed pair (list indices, particle indices from `base`).
    pub owner: &'a [u32],
    /// Partner of each listed pair.
    pub partner: &'a [u32],
    /// First particle of the chunk.
    pub base: u32,
    /// First pair of the slab (its springs start there).
    pub k0: usize,
    /// The period along each axis (0: not periodic) and its inverse: the
    /// partners' positions move to the minimum image.
    pub period: Option<([f32; 3], [f32; 3])>,
}

/// The wide prefilter for the listed pairs `k..end` (at most [`LANES`]):
/// the same touching test as the scalar one (`dist2 < rsum^2`, unfused,
/// false for NaN), the touching pairs appended in order to `pending` with
/// their positions and springs (the first three of `springs`), the springs
/// of the others cleared when `commit`. Needs room for [`LANES`] more pairs
/// in `pending`.
///
/// # Panics
/// Without AVX-512F ([`has_wide_prefilter`]), when `pending` has no room,
/// or when an index is out of range (never, for the list's indices).
pub fn prefilter_block(
    src: &ListedBlock<'_>,
    k: usize,
    end: usize,
    springs: &mut [&mut [f32]],
    commit: bool,
    pending: &mut Pending,
) {
    assert!(end > k && end - k <= LANES && pending.used <= LANES);
    assert!(end <= src.owner.len() && end <= src.partner.len());
    assert!(end - src.k0 <= springs.iter().map(|s| s.len()).min().unwrap_or(0));
    assert!(k >= src.k0 && src.pos.len() < (i32::MAX as usize - 3) / 4);
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the CPU reports AVX-512F; the asserts above bound the
            // list and spring ranges the block reads and writes, and the
            // room in `pending`; particle indices are checked inside.
            unsafe { prefilter512(src, k, end, springs, commit, pending) };
            return;
        }
    }
    let _ = commit;
    panic!("the wide prefilter needs AVX-512F");
}

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
unsafe fn records512(
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
fn transposed512(
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
fn transpose_lanes512(v: [std::arch::x86_64::__m512; 4]) -> [std::arch::x86_64::__m512; 4] {
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
unsafe fn store_records512(base: *mut [f32; 4], c: [std::arch::x86_64::__m512; 4]) {
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

/// Whether [`verlet16`] runs on this CPU (AVX-512F).
#[inline]
pub fn has_wide_update() -> bool {
    has_wide_prefilter()
}

/// What [`verlet16`] needs besides the particles: half the time step and
/// the time step (s), and the closed faces' limits (`-inf` / `+inf` where a
/// face is open).
#[derive(Debug, Clone, Copy)]
pub struct VerletStep {
    /// Half the time step, s.
    pub h: f32,
    /// The time step, s.
    pub dt: f32,
    /// Lower limits of the domain per axis, m.
    pub lo: [f32; 3],
    /// Upper limits, m.
    pub hi: [f32; 3],
}

/// The fused velocity Verlet update of the sixteen free particles
/// `x[..16]` (closing half kick, opening half kick, drift), sixteen lanes
/// at a time: the same operations in the same order as the scalar update,
/// so the same bits. Returns the largest squared displacement from `x_ref`
/// after storing the new state, or `None` without storing anything when
/// a lane turned non-finite or escaped a closed face (the caller then runs
/// the scalar update on these particles, which reports them).
///
/// # Panics
/// Without AVX-512F ([`has_wide_update`]), or when a slice holds fewer
/// than sixteen records (`x_ref` seventeen: its records are loaded sixteen
/// bytes at a time).
#[allow(clippy::too_many_arguments)]
pub fn verlet16(
    x: &mut [[f32; 4]],
    v: &mut [[f32; 4]],
    w: &mut [[f32; 4]],
    f: &[[f32; 4]],
    t: &[[f32; 4]],
    x_ref: &[[f32; 3]],
    step: &VerletStep,
) -> Option<f32> {
    assert!(x.len() >= LANES && v.len() >= LANES && w.len() >= LANES);
    assert!(f.len() >= LANES && t.len() >= LANES && x_ref.len() > LANES);
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the CPU reports AVX-512F; the asserts above bound
            // every load and store.
            return unsafe { verlet512(x, v, w, f, t, x_ref, step) };
        }
    }
    let _ = (x, v, w, f, t, x_ref, step);
    panic!("the wide update needs AVX-512F");
}

/// # Safety
/// AVX-512F must be available; the slices as [`verlet16`] asserts.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn verlet512(
    x: &mut [[f32; 4]],
    v: &mut [[f32; 4]],
    w: &mut [[f32; 4]],
    f: &[[f32; 4]],
    t: &[[f32; 4]],
    x_ref: &[[f32; 3]],
    step: &VerletStep,
) -> Option<f32> {
    use std::arch::x86_64::*;
    const SEQ: [u32; LANES] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    // SAFETY: sixteen records of every slice (seventeen of `x_ref`, whose
    // 12-byte records are read 16 bytes at a time: the last read ends in
    // record 16), as the caller asserted.
    unsafe {
        let [mut px, mut py, mut pz, pr] = records512(x.as_ptr(), &SEQ);
        let [mut vx, mut vy, mut vz, vw] = records512(v.as_ptr(), &SEQ);
        let [mut wx, mut wy, mut wz, ww] = records512(w.as_ptr(), &SEQ);
        let [fx, fy, fz, _] = records512(f.as_ptr(), &SEQ);
        let [tx, ty, tz, _] = records512(t.as_ptr(), &SEQ);
        let [rx, ry, rz, _] = transposed512(|l| _mm_loadu_ps(x_ref.as_ptr().add(l).cast()));
        let h = _mm512_set1_ps(step.h);
        // kick: v += f * (v.w * h), twice (closing, then opening), as the
        // scalar `kick`.
        let (sv, sw) = (_mm512_mul_ps(vw, h), _mm512_mul_ps(ww, h));
        for _ in 0..2 {
            vx = _mm512_add_ps(vx, _mm512_mul_ps(fx, sv));
            vy = _mm512_add_ps(vy, _mm512_mul_ps(fy, sv));
            vz = _mm512_add_ps(vz, _mm512_mul_ps(fz, sv));
            wx = _mm512_add_ps(wx, _mm512_mul_ps(tx, sw));
            wy = _mm512_add_ps(wy, _mm512_mul_ps(ty, sw));
            wz = _mm512_add_ps(wz, _mm512_mul_ps(tz, sw));
        }
        let dt = _mm512_set1_ps(step.dt);
        px = _mm512_add_ps(px, _mm512_mul_ps(vx, dt));
        py = _mm512_add_ps(py, _mm512_mul_ps(vy, dt));
        pz = _mm512_add_ps(pz, _mm512_mul_ps(vz, dt));
        // Non-finite on the bits (exponent all ones), and escapes.
        let exp = _mm512_set1_epi32(0x7F80_0000);
        let mut bad: __mmask16 = 0;
        for c in [px, py, pz, vx, vy, vz, wx, wy, wz] {
            let e = _mm512_and_si512(_mm512_castps_si512(c), exp);
            bad |= _mm512_cmpeq_epi32_mask(e, exp);
        }
        for (c, a) in [(px, 0), (py, 1), (pz, 2)] {
            let lo = _mm512_sub_ps(_mm512_set1_ps(step.lo[a]), pr);
            let hi = _mm512_add_ps(_mm512_set1_ps(step.hi[a]), pr);
            bad |=
                _mm512_cmp_ps_mask::<_CMP_LT_OQ>(c, lo) | _mm512_cmp_ps_mask::<_CMP_GT_OQ>(c, hi);
        }
        if bad != 0 {
            return None;
        }
        let (dx, dy, dz) = (
            _mm512_sub_ps(px, rx),
            _mm512_sub_ps(py, ry),
            _mm512_sub_ps(pz, rz),
        );
        let d2 = _mm512_add_ps(
            _mm512_add_ps(_mm512_mul_ps(dx, dx), _mm512_mul_ps(dy, dy)),
            _mm512_mul_ps(dz, dz),
        );
        // `f32::max` skips NaN (a non-finite reference position): so do
        // these lanes.
        let ordered = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(d2, d2);
        let d2 = _mm512_maskz_mov_ps(ordered, d2);
        store_records512(x.as_mut_ptr(), [px, py, pz, pr]);
        store_records512(v.as_mut_ptr(), [vx, vy, vz, vw]);
        store_records512(w.as_mut_ptr(), [wx, wy, wz, ww]);
        Some(_mm512_reduce_max_ps(d2))
    }
}

/// Gravity on sixteen particles with no wall in reach, the start of their
/// sums: `force = gravity * m` (`m = 1 / v.w`, or 0 for an immovable
/// particle), `torque = 0`, as the scalar start computes them (the same
/// bits). Returns false, storing nothing, without AVX-512F.
///
/// # Panics
/// When a slice holds fewer than sixteen records.
pub fn gravity16(
    v: &[[f32; 4]],
    force: &mut [[f32; 4]],
    torque: &mut [[f32; 4]],
    gravity: [f32; 3],
) -> bool {
    assert!(v.len() >= LANES && force.len() >= LANES && torque.len() >= LANES);
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the CPU reports AVX-512F; the assert above bounds
            // every load and store.
            unsafe { gravity512(v, force, torque, gravity) };
            return true;
        }
    }
    let _ = (force, torque, gravity);
    false
}

/// # Safety
/// AVX-512F must be available; sixteen records in every slice.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gravity512(
    v: &[[f32; 4]],
    force: &mut [[f32; 4]],
    torque: &mut [[f32; 4]],
    gravity: [f32; 3],
) {
    use std::arch::x86_64::*;
    const SEQ: [u32; LANES] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    // SAFETY: sixteen records of each slice (the caller's contract).
    unsafe {
        let [_, _, _, vw] = records512(v.as_ptr(), &SEQ);
        let zero = _mm512_setzero_ps();
        let movable = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(vw, zero);
        let m = _mm512_maskz_div_ps(movable, _mm512_set1_ps(1.0), vw);
        let g = |a: usize| _mm512_mul_ps(_mm512_set1_ps(gravity[a]), m);
        store_records512(force.as_mut_ptr(), [g(0), g(1), g(2), zero]);
        for k in 0..4 {
            _mm512_storeu_ps(torque.as_mut_ptr().add(4 * k).cast(), zero);
        }
    }
}

/// `|pi - pj|^2` over sixteen lanes, unfused and in the order the lanes
/// compute it (`(dx dx + dy dy) + dz dz`), so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn dist2_512(
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

/// # Safety
/// AVX-512F must be available; `k..end` must be at most 16 pairs inside
/// `owner`, `partner` and (from `k0`) every spring slice; `pending` must
/// have room for 16 more pairs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn prefilter512(
    src: &ListedBlock<'_>,
    k: usize,
    end: usize,
    springs: &mut [&mut [f32]],
    commit: bool,
    pending: &mut Pending,
) {
    use std::arch::x86_64::*;
    // SAFETY: loads and stores are masked to the block's `end - k` lanes,
    // which lie inside the list and spring slices (caller's contract); the
    // gathers read records of particles checked below to be in the chunk;
    // the stores write 16 elements from `used` (at most 16), inside the
    // 32-element pending arrays.
    unsafe {
        let valid: __mmask16 = ((1u32 << (end - k)) - 1) as __mmask16;
        let base = _mm512_set1_epi32(src.base as i32);
        let vo = _mm512_sub_epi32(
            _mm512_maskz_loadu_epi32(valid, src.owner.as_ptr().add(k).cast()),
            base,
        );
        let vp = _mm512_sub_epi32(
            _mm512_maskz_loadu_epi32(valid, src.partner.as_ptr().add(k).cast()),
            base,
        );
        let n = _mm512_set1_epi32(src.pos.len() as i32);
        let bad =
            _mm512_mask_cmpge_epu32_mask(valid, vo, n) | _mm512_mask_cmpge_epu32_mask(valid, vp, n);
        assert!(bad == 0, "pair lane index out of range");
        let zero = _mm512_setzero_ps();
        // Plain loads and a transpose; lanes past the block read record 0
        // (the chunk has particles: it lists this block) and are ignored.
        let lanes = |v: __m512i| {
            let mut out = [0u32; LANES];
            _mm512_storeu_si512(out.as_mut_ptr().cast(), _mm512_maskz_mov_epi32(valid, v));
            out
        };
        let [ix, iy, iz, iw] = records512(src.pos.as_ptr(), &lanes(vo));
        let [jx, jy, jz, jw] = records512(src.pos.as_ptr(), &lanes(vp));
        let (jx, jy, jz) = match src.period {
            // Minimum image: pj + L round((pi - pj) / L), as `image_of`.
            Some((period, inv)) => {
                let image = |i: __m512, j: __m512, a: usize| {
                    if period[a] > 0.0 {
                        let d = _mm512_sub_ps(i, j);
                        let k = _mm512_roundscale_ps::<
                            { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
                        >(_mm512_mul_ps(d, _mm512_set1_ps(inv[a])));
                        _mm512_add_ps(j, _mm512_mul_ps(k, _mm512_set1_ps(period[a])))
                    } else {
                        j
                    }
                };
                (image(ix, jx, 0), image(iy, jy, 1), image(iz, jz, 2))
            }
            None => (jx, jy, jz),
        };
        let (pi, pj) = ([ix, iy, iz, iw], [jx, jy, jz, jw]);
        let dist2 = dist2_512([ix, iy, iz], [jx, jy, jz]);
        let rsum = _mm512_add_ps(pi[3], pj[3]);
        let touch = _mm512_mask_cmp_ps_mask::<_CMP_LT_OQ>(valid, dist2, _mm512_mul_ps(rsum, rsum));
        // The touching pairs' springs go to the lanes with them (read
        // before any is written: a pair's spring is written only when its
        // lane is evaluated, after this).
        let at = pending.used;
        for (a, s) in springs.iter().take(3).enumerate() {
            let xi = _mm512_maskz_loadu_ps(valid, s.as_ptr().add(k - src.k0));
            _mm512_storeu_ps(
                pending.xi[a].as_mut_ptr().add(at),
                _mm512_maskz_compress_ps(touch, xi),
            );
        }
        if commit {
            let apart = valid & !touch;
            for s in springs.iter_mut() {
                _mm512_mask_storeu_ps(s.as_mut_ptr().add(k - src.k0), apart, zero);
            }
        }
        let lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let local = _mm512_add_epi32(_mm512_set1_epi32((k - src.k0) as i32), lane);
        let pair = _mm512_add_epi32(_mm512_set1_epi32(k as i32), lane);
        // Compress in registers, then store all sixteen lanes: the lanes
        // past the touching ones land beyond `used` and are never read.
        // (The memory form of the compress store is microcoded on AMD Zen 4,
        // about a hundred cycles each: it took half the step there.)
        let ints = |v: __m512i| _mm512_maskz_compress_epi32(touch, v);
        _mm512_storeu_si512(pending.i.as_mut_ptr().add(at).cast(), ints(vo));
        _mm512_storeu_si512(pending.j.as_mut_ptr().add(at).cast(), ints(vp));
        _mm512_storeu_si512(pending.local.as_mut_ptr().add(at).cast(), ints(local));
        _mm512_storeu_si512(pending.pair.as_mut_ptr().add(at).cast(), ints(pair));
        for a in 0..4 {
            let (ci, cj) = (
                _mm512_maskz_compress_ps(touch, pi[a]),
                _mm512_maskz_compress_ps(touch, pj[a]),
            );
            _mm512_storeu_ps(pending.pi[a].as_mut_ptr().add(at), ci);
            _mm512_storeu_ps(pending.pj[a].as_mut_ptr().add(at), cj);
        }
        pending.used = at + touch.count_ones() as usize;
    }
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
    }
    lanes::fill(src, idx, b);
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
            if let Some([kn, kt, mu]) = src.uniform {
                b.kn[at..at + 8].fill(kn);
                b.kt[at..at + 8].fill(kt);
                b.mu[at..at + 8].fill(mu);
            } else {
                gather(src.kn.as_ptr(), vp, &mut b.kn);
                gather(src.kt.as_ptr(), vp, &mut b.kt);
                gather(src.mu.as_ptr(), vp, &mut b.mu);
            }
            match src.uniform_damping {
                Some(c) => b.c[at..at + 8].fill(c),
                None => gather(src.damping.as_ptr(), vp, &mut b.c),
            }
            gather(src.sign.as_ptr(), vp, &mut b.sign);
        }
    }
}

/// The portable build (`PELLET_SIMD=portable`, CPUs without AVX2, and the
/// tests that compare it with the wide ones).
pub fn pair_forces_portable(
    b: &PairLanes,
    dt_hist: f32,
    hertz: bool,
    roll: u32,
    out: &mut PairResults,
) {
    lanes_for(b, dt_hist, hertz, roll, out);
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
            uniform: None,
            uniform_damping: None,
            kn: &per_pair,
            kt: &spring[0],
            mu: &spring[1],
            damping: &spring[2],
            sign: &per_pair,
            roll: [&[], &[], &[]],
            uniform_mu_roll: None,
            mu_roll: &[],
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
            // One pair of materials: the constants come from `uniform`.
            let one = LaneSources {
                uniform: Some([3.0, 2.0, 0.5]),
                uniform_damping: Some(0.25),
                damping: &[],
                kn: &[],
                kt: &[],
                mu: &[],
                ..src
            };
            let (mut wide1, mut portable1) = (PairLanes::default(), PairLanes::default());
            fill_lanes(&one, &idx, &mut wide1);
            fill_lanes_portable(&one, &idx, &mut portable1);
            assert!(wide1.kn == [3.0; LANES] && wide1.mu == [0.5; LANES]);
            assert!(wide1.c == [0.25; LANES] && portable1.c == [0.25; LANES]);
            assert_eq!(wide1.kt, portable1.kt);
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

    /// The wide prefilter finds exactly the pairs the scalar test finds, in
    /// order, with their positions, and clears exactly the others' springs.
    #[test]
    fn the_wide_prefilter_matches_the_scalar_test() {
        if !has_wide_prefilter() {
            return; // nothing wide to compare on this CPU
        }
        let n = 200usize;
        let pos: Vec<[f32; 4]> = (0..n)
            .map(|k| {
                let f = |m: usize| ((k * m + 7) % 97) as f32 * 0.0002;
                [f(13), f(29), f(41), 0.004 + (k % 5) as f32 * 0.001]
            })
            .collect();
        let base = 1000u32;
        let pairs = 150usize;
        let owner: Vec<u32> = (0..pairs).map(|k| base + (k / 3) as u32).collect();
        let partner: Vec<u32> = (0..pairs)
            .map(|k| base + ((k * 37 + 11) % n) as u32)
            .collect();
        let k0 = 5usize;
        for commit in [true, false] {
            let mut spring: Vec<Vec<f32>> =
                (0..3).map(|a| vec![1.0 + a as f32; pairs - k0]).collect();
            let mut pending = Pending::default();
            let mut found = Vec::new();
            let mut k = k0;
            while k < pairs {
                let stop = (k + LANES).min(pairs);
                let listed = ListedBlock {
                    pos: &pos,
                    owner: &owner,
                    partner: &partner,
                    base,
                    k0,
                    period: None,
                };
                let [sx, sy, sz] = &mut spring[..] else {
                    unreachable!()
                };
                let mut springs = [&mut sx[..], &mut sy[..], &mut sz[..]];
                prefilter_block(&listed, k, stop, &mut springs, commit, &mut pending);
                for l in 0..pending.used {
                    found.push((
                        pending.i[l],
                        pending.j[l],
                        pending.local[l],
                        pending.pair[l],
                        pending.pi[3][l],
                        pending.pj[0][l],
                    ));
                }
                pending.used = 0;
                k = stop;
            }
            let mut want = Vec::new();
            for k in k0..pairs {
                let (i, j) = ((owner[k] - base) as usize, (partner[k] - base) as usize);
                let (pi, pj) = (pos[i], pos[j]);
                let d = [pi[0] - pj[0], pi[1] - pj[1], pi[2] - pj[2]];
                let dist2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                let rsum = pi[3] + pj[3];
                if dist2 < rsum * rsum {
                    want.push((i as u32, j as u32, (k - k0) as u32, k as u32, pi[3], pj[0]));
                } else if commit {
                    assert!(
                        spring.iter().all(|s| s[k - k0] == 0.0),
                        "spring of {k} kept"
                    );
                    continue;
                }
                assert!(
                    (0..3).all(|a| spring[a][k - k0] == 1.0 + a as f32),
                    "spring of {k} changed"
                );
            }
            assert!(!want.is_empty() && want.len() < pairs - k0);
            assert_eq!(found, want);
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
            uniform: None,
            uniform_damping: None,
            kn: &per_pair,
            kt: &per_pair,
            mu: &per_pair,
            damping: &per_pair,
            sign: &per_pair,
            roll: [&[], &[], &[]],
            uniform_mu_roll: None,
            mu_roll: &[],
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
            let hertz = round % 2 == 1;
            let roll = (round / 2) % 3;
            for l in 0..LANES {
                b.mu_r[l] = rnd(0.0, 0.5);
                for a in 0..3 {
                    b.roll[a][l] = rnd(-1e-4, 1e-4);
                }
            }
            let (mut wide, mut portable) = (PairResults::default(), PairResults::default());
            pair_forces(&b, 1e-5, hertz, roll, &mut wide);
            pair_forces_portable(&b, 1e-5, hertz, roll, &mut portable);
            let bits = |r: &PairResults| -> Vec<u32> {
                r.f.iter()
                    .chain(&r.tn)
                    .chain(&r.xi)
                    .chain(&r.m)
                    .chain(&r.roll)
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

    /// A small deterministic generator (xorshift) of floats in `[-1, 1)`.
    fn noise(seed: &mut u32) -> f32 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 17;
        *seed ^= *seed << 5;
        (*seed >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    }

    /// The scalar update of `verlet16`, written out: closing and opening
    /// kicks, drift, the checks and the squared displacement.
    fn scalar_verlet(
        x: &mut [f32; 4],
        v: &mut [f32; 4],
        w: &mut [f32; 4],
        f: &[f32; 4],
        t: &[f32; 4],
        r: &[f32; 3],
        s: &VerletStep,
    ) -> (bool, f32) {
        for _ in 0..2 {
            let (sv, sw) = (v[3] * s.h, w[3] * s.h);
            for a in 0..3 {
                v[a] += f[a] * sv;
                w[a] += t[a] * sw;
            }
        }
        for a in 0..3 {
            x[a] += v[a] * s.dt;
        }
        let bad = (0..3).any(|a| {
            !x[a].is_finite()
                || !v[a].is_finite()
                || !w[a].is_finite()
                || x[a] < s.lo[a] - x[3]
                || x[a] > s.hi[a] + x[3]
        });
        let d: [f32; 3] = std::array::from_fn(|a| x[a] - r[a]);
        (bad, d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
    }

    /// The sixteen-lane update gives the scalar update's bits, and stores
    /// nothing when one lane goes non-finite or escapes.
    #[test]
    fn wide_update_matches_the_scalar_one() {
        if !has_wide_update() {
            eprintln!("no AVX-512F: the wide update is not used on this CPU");
            return;
        }
        let mut seed = 0x1234_5678;
        let step = VerletStep {
            h: 0.5e-3,
            dt: 1e-3,
            lo: [-1.0, f32::NEG_INFINITY, -1.0],
            hi: [1.0, 2.0, f32::INFINITY],
        };
        for case in 0..200 {
            let mut rec = |scale: f32, w: f32| -> Vec<[f32; 4]> {
                (0..LANES)
                    .map(|_| {
                        let n = [noise(&mut seed), noise(&mut seed), noise(&mut seed)];
                        [n[0] * scale, n[1] * scale, n[2] * scale, w]
                    })
                    .collect()
            };
            let mut x = rec(0.5, 0.01);
            let mut v = rec(3.0, 95.0);
            let mut w = rec(50.0, 2.4e5);
            let mut f = rec(1.0, 0.0);
            let t = rec(1e-3, 0.0);
            let x_ref: Vec<[f32; 3]> = (0..=LANES)
                .map(|k| {
                    let p = x.get(k).copied().unwrap_or([0.0; 4]);
                    [p[0] + 1e-3 * noise(&mut seed), p[1], p[2]]
                })
                .collect();
            // Some blocks go wrong in one lane: non-finite, or escaped.
            let lane = case % LANES;
            match case % 4 {
                1 => f[lane][1] = f32::INFINITY,
                2 => x[lane][0] = 1.5,
                _ => {}
            }
            let (mut xs, mut vs, mut ws) = (x.clone(), v.clone(), w.clone());
            let mut any_bad = false;
            let mut max_d2 = 0.0f32;
            for k in 0..LANES {
                let (bad, d2) = scalar_verlet(
                    &mut xs[k], &mut vs[k], &mut ws[k], &f[k], &t[k], &x_ref[k], &step,
                );
                any_bad |= bad;
                max_d2 = max_d2.max(d2);
            }
            let (x0, v0, w0) = (x.clone(), v.clone(), w.clone());
            let got = verlet16(&mut x, &mut v, &mut w, &f, &t, &x_ref, &step);
            if any_bad {
                assert_eq!(got, None, "case {case}");
                assert!(x == x0 && v == v0 && w == w0, "stored after a bad lane");
                continue;
            }
            let bits = |r: &Vec<[f32; 4]>| -> Vec<u32> {
                r.iter().flatten().map(|x| x.to_bits()).collect()
            };
            assert_eq!(got.map(f32::to_bits), Some(max_d2.to_bits()), "case {case}");
            assert_eq!(bits(&x), bits(&xs), "positions, case {case}");
            assert_eq!(bits(&v), bits(&vs), "velocities, case {case}");
            assert_eq!(bits(&w), bits(&ws), "spins, case {case}");
        }
    }

    /// Gravity on sixteen particles gives the scalar start's bits,
    /// immovable and non-finite inverse masses included.
    #[test]
    fn wide_gravity_matches_the_scalar_start() {
        let g = [0.3, -9.81, 1e-3];
        let mut seed = 99;
        let mut v: Vec<[f32; 4]> = (0..LANES)
            .map(|_| [0.0, 0.0, 0.0, 100.0 * (noise(&mut seed) + 1.0)])
            .collect();
        v[3][3] = 0.0;
        v[4][3] = -0.0;
        v[5][3] = f32::NAN;
        v[6][3] = f32::INFINITY;
        v[7][3] = 1e-30;
        let mut force = vec![[7.0; 4]; LANES];
        let mut torque = vec![[7.0; 4]; LANES];
        if !gravity16(&v, &mut force, &mut torque, g) {
            eprintln!("no AVX-512F: the wide start is not used on this CPU");
            return;
        }
        for k in 0..LANES {
            let m = if v[k][3] > 0.0 { 1.0 / v[k][3] } else { 0.0 };
            let want = [g[0] * m, g[1] * m, g[2] * m, 0.0].map(f32::to_bits);
            assert_eq!(force[k].map(f32::to_bits), want, "lane {k}");
            assert_eq!(torque[k].map(f32::to_bits), [0; 4], "lane {k}");
        }
    }
}
