//! The contact model, shared by every CPU kernel: a linear spring-dashpot
//! normal force and a Coulomb-capped tangential spring with history
//! (Cundall-Strack; LIGGGHTS `hooke/history`). `sim.wgsl` has the same
//! functions with the same names; keep the two in step.
//!
//! For particle `i` touching `j` (`n` from `j` to `i`, overlap `delta`):
//! - normal: `f_n = kn delta - c vn`, with `vn = (v_i - v_j) . n` and
//!   `c = 2 beta sqrt(m_eff kn)` from the restitution (or an absolute damping);
//! - tangential: the spring `xi` is turned into the tangent plane, extended
//!   by the tangential contact velocity times the step, and gives
//!   `f_t = -kt xi - c v_t`, capped at `mu |f_n|` (the spring then shrinks to
//!   carry exactly the capped force);
//! - torque on `i`: `r_i (f_t x n)`.
//!
//! Every expression is written so that `j`'s view of the contact is the exact
//! negation of `i`'s: the pair forces cancel to the last bit, which is what
//! keeps momentum conserved.

use super::ForceMode;
use super::setup::{PairParams, Params, WALL_ID_BASE, WallParams};

/// A 3-vector.
pub type V3 = [f32; 3];

#[inline(always)]
pub(crate) fn add(a: V3, b: V3) -> V3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

#[inline(always)]
pub(crate) fn sub(a: V3, b: V3) -> V3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

#[inline(always)]
pub(crate) fn scale(a: V3, s: f32) -> V3 {
    [a[0] * s, a[1] * s, a[2] * s]
}

#[inline(always)]
pub(crate) fn dot(a: V3, b: V3) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

#[inline(always)]
pub(crate) fn cross(a: V3, b: V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// Whether any component is infinite or NaN (tested on the bits, as the GPU does).
#[inline(always)]
pub(crate) fn bad(a: V3) -> bool {
    a.iter().any(|x| x.to_bits() & 0x7F80_0000 == 0x7F80_0000)
}

/// What one particle accumulates over its contacts.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Acc {
    pub force: V3,
    pub torque: V3,
    /// History slots written so far.
    pub new_count: u32,
    /// Touching particles.
    pub touching: u32,
    /// Touching walls.
    pub wall_touching: u32,
    /// Touching contacts that found no free history slot.
    pub overflow: u32,
}

/// Force on the particle, its tangential part and the new tangential spring,
/// for one contact.
/// `xi_old` is the stored spring (zero for a new contact).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn contact_force(
    n: V3,
    delta: f32,
    vr: V3,
    wsum: V3,
    m_eff: f32,
    pair: &PairParams,
    xi_old: V3,
    dt_hist: f32,
) -> (V3, V3, V3) {
    let vn = dot(vr, n);
    let vc = sub(vr, cross(wsum, n));
    let vt = sub(vc, scale(n, dot(vc, n)));
    let c = if pair.damping_abs > 0.0 {
        pair.damping_abs
    } else {
        pair.damping_ratio2 * (m_eff * pair.kn).sqrt()
    };
    let fn_mag = pair.kn * delta - c * vn;
    let xi_rot = sub(xi_old, scale(n, dot(xi_old, n)));
    let mut xi = add(xi_rot, scale(vt, dt_hist));
    let mut ft = sub(scale(xi, -pair.kt), scale(vt, c));
    let ft_max = pair.mu * fn_mag.abs();
    let ft2 = dot(ft, ft);
    if ft2 > ft_max * ft_max {
        ft = scale(ft, ft_max / ft2.sqrt());
        xi = if pair.kt > 0.0 {
            scale(add(ft, scale(vt, c)), -1.0 / pair.kt)
        } else {
            [0.0; 3]
        };
    }
    (add(scale(n, fn_mag), ft), ft, xi)
}

/// Looks `partner` up in the particle's old history slots.
#[inline(always)]
fn find_history(old: &[[f32; 4]], partner: u32) -> V3 {
    for h in old {
        if h[3].to_bits() == partner {
            return [h[0], h[1], h[2]];
        }
    }
    [0.0; 3]
}

#[inline(always)]
fn record(acc: &mut Acc, force: V3, torque_arm: f32, n: V3, ft: V3) {
    acc.force = add(acc.force, force);
    acc.torque = add(acc.torque, scale(cross(ft, n), torque_arm));
}

#[inline(always)]
fn store_history(mode: ForceMode, hist: &mut [[f32; 4]], acc: &mut Acc, partner: u32, xi: V3) {
    if !mode.commit {
        return;
    }
    let k = acc.new_count as usize;
    if k < hist.len() {
        hist[k] = [xi[0], xi[1], xi[2], f32::from_bits(partner)];
        acc.new_count += 1;
    } else {
        acc.overflow += 1;
    }
}

/// Kernel function `interact_pair`: particle `i` with candidate `j`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn interact_pair(
    i: usize,
    j: usize,
    pos: &[[f32; 4]],
    vel: &[[f32; 4]],
    angvel: &[[f32; 4]],
    meta: &[[u32; 4]],
    pairs: &[PairParams],
    params: &Params,
    mode: ForceMode,
    old: &[[f32; 4]],
    hist: &mut [[f32; 4]],
    acc: &mut Acc,
) {
    if j == i {
        return;
    }
    let (pi, pj) = (pos[i], pos[j]);
    let d = [pi[0] - pj[0], pi[1] - pj[1], pi[2] - pj[2]];
    let dist2 = dot(d, d);
    let rsum = pi[3] + pj[3];
    if dist2 >= rsum * rsum {
        return;
    }
    let (mi, mj) = (meta[i], meta[j]);
    if mi[2] != u32::MAX && mi[2] == mj[2] {
        return;
    }
    let (vi, vj) = (vel[i], vel[j]);
    if vi[3] + vj[3] == 0.0 {
        // Two immovable particles (static or kinematic bodies).
        return;
    }
    let dist = dist2.sqrt();
    let n = if dist > 0.0 {
        scale(d, 1.0 / dist)
    } else if mi[0] < mj[0] {
        [0.0, 1.0, 0.0]
    } else {
        [0.0, -1.0, 0.0]
    };
    let delta = rsum - dist;
    let (wi, wj) = (angvel[i], angvel[j]);
    let m_eff = 1.0 / (vi[3] + vj[3]);
    let vr = [vi[0] - vj[0], vi[1] - vj[1], vi[2] - vj[2]];
    let wsum = add(
        scale([wi[0], wi[1], wi[2]], pi[3]),
        scale([wj[0], wj[1], wj[2]], pj[3]),
    );
    let pair = &pairs[(mi[1] * params.material_count + mj[1]) as usize];
    let xi_old = find_history(old, mj[0]);
    let (f, ft, xi) = contact_force(n, delta, vr, wsum, m_eff, pair, xi_old, mode.dt_hist);
    record(acc, f, pi[3], n, ft);
    acc.touching += 1;
    store_history(mode, hist, acc, mj[0], xi);
}

/// Kernel function `interact_wall`: particle `i` with wall `w`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn interact_wall(
    w: usize,
    wall: &WallParams,
    pi: &[f32; 4],
    vi: &[f32; 4],
    wi: &[f32; 4],
    material: u32,
    pairs: &[PairParams],
    params: &Params,
    mode: ForceMode,
    old: &[[f32; 4]],
    hist: &mut [[f32; 4]],
    acc: &mut Acc,
) {
    let n = wall.normal;
    let dist = dot(n, [pi[0], pi[1], pi[2]]) - wall.offset;
    let delta = pi[3] - dist;
    if delta <= 0.0 {
        return;
    }
    let partner = WALL_ID_BASE + w as u32;
    let pair = &pairs[(material * params.material_count + wall.material) as usize];
    let xi_old = find_history(old, partner);
    let wsum = scale([wi[0], wi[1], wi[2]], pi[3]);
    let (f, ft, xi) = contact_force(
        n,
        delta,
        [vi[0], vi[1], vi[2]],
        wsum,
        1.0 / vi[3],
        pair,
        xi_old,
        mode.dt_hist,
    );
    record(acc, f, pi[3], n, ft);
    acc.wall_touching += 1;
    store_history(mode, hist, acc, partner, xi);
}
