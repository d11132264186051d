//! The sixteen-particle updates (AVX-512, or AVX2 eight at a time): the
//! fused velocity Verlet update and the gravity start of the sums, the
//! scalar code's bits.
//!
//! Part of the one module that allows `unsafe` ([`super`]): its audit
//! covers every `unsafe` block here.
#![allow(unsafe_code)]

use super::has_wide_prefilter;
#[cfg(target_arch = "x86_64")]
use super::records::{
    HALF, records256, records512, store_records256, store_records512, transposed256, transposed512,
};
#[cfg(target_arch = "x86_64")]
use super::{has_avx2, has_avx512};
use crate::pairlist::lanes::LANES;

/// Whether [`verlet16`] runs on this CPU (AVX-512F or AVX2).
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
/// Without AVX2 ([`has_wide_update`]), or when a slice holds fewer
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
        if has_avx2() {
            // SAFETY: the CPU reports AVX2; as above.
            return unsafe { verlet256(x, v, w, f, t, x_ref, step) };
        }
    }
    let _ = (x, v, w, f, t, x_ref, step);
    panic!("the wide update needs AVX2");
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
/// bits). Returns false, storing nothing, without AVX2.
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
        if has_avx2() {
            // SAFETY: the CPU reports AVX2; as above.
            unsafe { gravity256(v, force, torque, gravity) };
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

/// [`verlet512`] in two halves of eight lanes (AVX2): both halves are
/// computed and checked before either is stored.
///
/// # Safety
/// AVX2 must be available; the slices as [`verlet16`] asserts.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn verlet256(
    x: &mut [[f32; 4]],
    v: &mut [[f32; 4]],
    w: &mut [[f32; 4]],
    f: &[[f32; 4]],
    t: &[[f32; 4]],
    x_ref: &[[f32; 3]],
    step: &VerletStep,
) -> Option<f32> {
    use std::arch::x86_64::*;
    const SEQ: [u32; HALF] = [0, 1, 2, 3, 4, 5, 6, 7];
    type Half = ([__m256; 4], [__m256; 4], [__m256; 4], __m256);
    // SAFETY: sixteen records of every slice (seventeen of `x_ref`, whose
    // 12-byte records are read 16 bytes at a time: the last read ends in
    // record 16), as the caller asserted; each half reads and writes eight
    // records from `o`, 0 or 8.
    unsafe {
        let h = _mm256_set1_ps(step.h);
        let dt = _mm256_set1_ps(step.dt);
        let exp = _mm256_set1_epi32(0x7F80_0000);
        let half = |o: usize| -> (Half, bool) {
            let [mut px, mut py, mut pz, pr] = records256(x.as_ptr().add(o), &SEQ);
            let [mut vx, mut vy, mut vz, vw] = records256(v.as_ptr().add(o), &SEQ);
            let [mut wx, mut wy, mut wz, ww] = records256(w.as_ptr().add(o), &SEQ);
            let [fx, fy, fz, _] = records256(f.as_ptr().add(o), &SEQ);
            let [tx, ty, tz, _] = records256(t.as_ptr().add(o), &SEQ);
            let [rx, ry, rz, _] = transposed256(|l| _mm_loadu_ps(x_ref.as_ptr().add(o + l).cast()));
            // kick: v += f * (v.w * h), twice (closing, then opening).
            let (sv, sw) = (_mm256_mul_ps(vw, h), _mm256_mul_ps(ww, h));
            for _ in 0..2 {
                vx = _mm256_add_ps(vx, _mm256_mul_ps(fx, sv));
                vy = _mm256_add_ps(vy, _mm256_mul_ps(fy, sv));
                vz = _mm256_add_ps(vz, _mm256_mul_ps(fz, sv));
                wx = _mm256_add_ps(wx, _mm256_mul_ps(tx, sw));
                wy = _mm256_add_ps(wy, _mm256_mul_ps(ty, sw));
                wz = _mm256_add_ps(wz, _mm256_mul_ps(tz, sw));
            }
            px = _mm256_add_ps(px, _mm256_mul_ps(vx, dt));
            py = _mm256_add_ps(py, _mm256_mul_ps(vy, dt));
            pz = _mm256_add_ps(pz, _mm256_mul_ps(vz, dt));
            // Non-finite on the bits (exponent all ones), and escapes.
            let mut bad = _mm256_setzero_si256();
            for c in [px, py, pz, vx, vy, vz, wx, wy, wz] {
                let e = _mm256_and_si256(_mm256_castps_si256(c), exp);
                bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, exp));
            }
            let mut escaped = _mm256_setzero_ps();
            for (c, a) in [(px, 0), (py, 1), (pz, 2)] {
                let lo = _mm256_sub_ps(_mm256_set1_ps(step.lo[a]), pr);
                let hi = _mm256_add_ps(_mm256_set1_ps(step.hi[a]), pr);
                escaped = _mm256_or_ps(escaped, _mm256_cmp_ps::<_CMP_LT_OQ>(c, lo));
                escaped = _mm256_or_ps(escaped, _mm256_cmp_ps::<_CMP_GT_OQ>(c, hi));
            }
            let bad = _mm256_movemask_epi8(bad) != 0 || _mm256_movemask_ps(escaped) != 0;
            let (dx, dy, dz) = (
                _mm256_sub_ps(px, rx),
                _mm256_sub_ps(py, ry),
                _mm256_sub_ps(pz, rz),
            );
            let d2 = _mm256_add_ps(
                _mm256_add_ps(_mm256_mul_ps(dx, dx), _mm256_mul_ps(dy, dy)),
                _mm256_mul_ps(dz, dz),
            );
            // `f32::max` skips NaN: so do these lanes (zeroed).
            let d2 = _mm256_and_ps(d2, _mm256_cmp_ps::<_CMP_ORD_Q>(d2, d2));
            (
                ([px, py, pz, pr], [vx, vy, vz, vw], [wx, wy, wz, ww], d2),
                bad,
            )
        };
        let (lo, bad_lo) = half(0);
        let (hi, bad_hi) = half(HALF);
        if bad_lo || bad_hi {
            return None;
        }
        for (o, (xs, vs, ws, _)) in [(0, lo), (HALF, hi)] {
            store_records256(x.as_mut_ptr().add(o), xs);
            store_records256(v.as_mut_ptr().add(o), vs);
            store_records256(w.as_mut_ptr().add(o), ws);
        }
        // The largest of sixteen non-negative lanes (any order: the same
        // value).
        let m = _mm256_max_ps(lo.3, hi.3);
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_max_ss(m, _mm_shuffle_ps::<0b01>(m, m));
        Some(_mm_cvtss_f32(m))
    }
}

/// [`gravity512`] in two halves of eight lanes (AVX2).
///
/// # Safety
/// AVX2 must be available; sixteen records in every slice.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn gravity256(
    v: &[[f32; 4]],
    force: &mut [[f32; 4]],
    torque: &mut [[f32; 4]],
    gravity: [f32; 3],
) {
    use std::arch::x86_64::*;
    const SEQ: [u32; HALF] = [0, 1, 2, 3, 4, 5, 6, 7];
    // SAFETY: sixteen records of each slice (the caller's contract), eight
    // from `o`, 0 or 8, per half.
    unsafe {
        let zero = _mm256_setzero_ps();
        for o in [0, HALF] {
            let [_, _, _, vw] = records256(v.as_ptr().add(o), &SEQ);
            let movable = _mm256_cmp_ps::<_CMP_GT_OQ>(vw, zero);
            let m = _mm256_and_ps(movable, _mm256_div_ps(_mm256_set1_ps(1.0), vw));
            let g = |a: usize| _mm256_mul_ps(_mm256_set1_ps(gravity[a]), m);
            store_records256(force.as_mut_ptr().add(o), [g(0), g(1), g(2), zero]);
            for k in 0..4 {
                _mm256_storeu_ps(torque.as_mut_ptr().add(o + 2 * k).cast(), zero);
            }
        }
    }
}
