//! Stage `forces`, CPU twin of `forces.wgsl`: kernel `compute_forces` and
//! the contact model it evaluates: a spring-dashpot normal force and a
//! Coulomb-capped tangential spring with history (Cundall-Strack), linear
//! (LIGGGHTS `hooke/history`) or Hertz-Mindlin (LIGGGHTS `hertz/history`:
//! stiffness and damping grow with the overlap, [`contact_stiffness`]).
//! `forces.wgsl` and `common.wgsl` have the same functions with the same
//! names; keep them in step.
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

use std::sync::atomic::Ordering;

use rayon::prelude::*;

#[allow(unused_imports)]
use super::common::ROLL_EPSD2;
use super::common::{HERTZ, Params, ROLL_CDT, V3, add, cross, dot, scale, sub};
use crate::cpu::{CpuSim, MIN_LEN};
use crate::setup::{PairParams, WALL_ID_BASE, WallParams};
use crate::{Counter, ForceKind, ForceMode, NeighbourSink, for_each_neighbour};

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

/// The constants `[kn, kt, mu, c]` of one contact, from its materials'
/// `pair`, effective radius `r_eff` (m) and effective mass `m_eff` (kg): the
/// pair lists keep them per pair. Hooke: the stiffnesses (N/m) and the
/// damping coefficient `c = 2 beta sqrt(m_eff kn)` (or the absolute damping,
/// N s/m). Hertz (`hertz`): `kn = 4/3 E* sqrt(R*)`, `kt = 8 G* sqrt(R*)`
/// (N/m^1.5) and `c = 2 sqrt(5/6) |beta| sqrt(3/2 kn m_eff)`, which
/// [`contact_stiffness`] scales by the overlap. `kernel pair_constants_of`
/// in `common.wgsl` is the same arithmetic.
#[inline(always)]
pub(crate) fn pair_constants(pair: &PairParams, hertz: bool, r_eff: f32, m_eff: f32) -> [f32; 4] {
    if hertz {
        let sr = r_eff.sqrt();
        let kn = pair.kn * sr;
        [
            kn,
            pair.kt * sr,
            pair.mu,
            pair.damping_ratio2 * (1.5 * kn * m_eff).sqrt(),
        ]
    } else {
        let c = if pair.damping_abs > 0.0 {
            pair.damping_abs
        } else {
            pair.damping_ratio2 * (m_eff * pair.kn).sqrt()
        };
        [pair.kn, pair.kt, pair.mu, c]
    }
}

/// Normal and tangential stiffness (N/m) and damping (N s/m) of a contact
/// with constants `k` ([`pair_constants`]) at overlap `delta` (m). Hooke:
/// the constants. Hertz-Mindlin (LIGGGHTS `hertz`): `kn sqrt(delta)`,
/// `kt sqrt(delta)`, `c delta^(1/4)` and, tangentially,
/// `c delta^(1/4) sqrt(2/3 kt / kn)` (`gamma_t = gamma_n sqrt(St / Sn)`).
#[inline(always)]
pub(crate) fn contact_stiffness(k: [f32; 4], hertz: bool, delta: f32) -> (f32, f32, f32, f32) {
    if hertz {
        let s = if delta > 0.0 { delta } else { 0.0 }.sqrt();
        let q = s.sqrt();
        let ratio = k[1] * (2.0 / 3.0) / if k[0] > 0.0 { k[0] } else { 1.0 };
        let cn = k[3] * q;
        (k[0] * s, k[1] * s, cn, cn * ratio.sqrt())
    } else {
        (k[0], k[1], k[3], k[3])
    }
}

/// Rolling resistance of one contact: the torque `M` (N m) the first
/// particle gets as `-M` and the second as `+M`, and the new stored torque.
/// `w_rel`: the first particle's spin minus the second's (rad/s; a wall:
/// the particle's); its part along `n` (twisting) is left out, as LIGGGHTS
/// does by default. `model`: [`ROLL_EPSD2`] adds `kt R*^2 w_t dt_hist` to
/// the stored torque and caps it at `mu_roll |F_n| R*` (LIGGGHTS
/// `rolling_model_epsd2.h`); [`ROLL_CDT`] is `mu_roll (kn delta) R* w_t /
/// |w_t|`, no history (`rolling_model_cdt.h`). `kt` and `kn_delta` are the
/// contact's tangential stiffness and elastic normal force, `fn_mag` its
/// whole normal force.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn rolling_torque(
    model: u32,
    n: V3,
    w_rel: V3,
    kt: f32,
    kn_delta: f32,
    fn_mag: f32,
    r_eff: f32,
    mu_roll: f32,
    stored: V3,
    dt_hist: f32,
) -> (V3, V3) {
    let wt = sub(w_rel, scale(n, dot(w_rel, n)));
    if model == ROLL_CDT {
        let w2 = dot(wt, wt);
        if w2 > 0.0 {
            let m = scale(wt, mu_roll * kn_delta * r_eff / w2.sqrt());
            return (m, [0.0; 3]);
        }
        return ([0.0; 3], [0.0; 3]);
    }
    let kr = kt * r_eff * r_eff;
    let mut m = add(stored, scale(wt, dt_hist * kr));
    let cap = fn_mag.abs() * r_eff * mu_roll;
    let m2 = dot(m, m);
    if m2 > cap * cap {
        m = scale(m, cap / m2.sqrt());
    }
    (m, m)
}

/// Force on the particle, its tangential part and the new tangential spring,
/// for one contact with the materials' `pair`.
/// `xi_old` is the stored spring (zero for a new contact).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn contact_force(
    n: V3,
    delta: f32,
    vr: V3,
    wsum: V3,
    m_eff: f32,
    r_eff: f32,
    pair: &PairParams,
    hertz: bool,
    xi_old: V3,
    dt_hist: f32,
) -> (V3, V3, V3) {
    let k = pair_constants(pair, hertz, r_eff, m_eff);
    contact_force_damped(n, delta, vr, wsum, k, hertz, xi_old, dt_hist)
}

/// [`contact_force`] with the contact's constants `k` already known (the
/// pair lists compute them once per pair at a build): the same arithmetic,
/// in the same order.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn contact_force_damped(
    n: V3,
    delta: f32,
    vr: V3,
    wsum: V3,
    k: [f32; 4],
    hertz: bool,
    xi_old: V3,
    dt_hist: f32,
) -> (V3, V3, V3) {
    let c = contact_force_full(n, delta, vr, wsum, k, hertz, xi_old, dt_hist);
    (c.force, c.ft, c.xi)
}

/// What one contact gives: forces, the new spring, and what the rolling
/// resistance reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ContactOut {
    /// Force on the first particle, N.
    pub force: V3,
    /// Its tangential part, N.
    pub ft: V3,
    /// The new tangential spring, m.
    pub xi: V3,
    /// The contact's tangential stiffness, N/m.
    pub kt: f32,
    /// Its elastic normal force `kn delta`, N.
    pub kn_delta: f32,
    /// Its normal force (elastic and damping), N.
    pub fn_mag: f32,
}

/// [`contact_force_damped`], with the stiffness and normal force kept.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn contact_force_full(
    n: V3,
    delta: f32,
    vr: V3,
    wsum: V3,
    k: [f32; 4],
    hertz: bool,
    xi_old: V3,
    dt_hist: f32,
) -> ContactOut {
    let (kn, kt, c, ct) = contact_stiffness(k, hertz, delta);
    let mu = k[2];
    let vn = dot(vr, n);
    let vc = sub(vr, cross(wsum, n));
    let vt = sub(vc, scale(n, dot(vc, n)));
    let kn_delta = kn * delta;
    let fn_mag = kn_delta - c * vn;
    let xi_rot = sub(xi_old, scale(n, dot(xi_old, n)));
    let mut xi = add(xi_rot, scale(vt, dt_hist));
    let mut ft = sub(scale(xi, -kt), scale(vt, ct));
    let ft_max = mu * fn_mag.abs();
    let ft2 = dot(ft, ft);
    if ft2 > ft_max * ft_max {
        ft = scale(ft, ft_max / ft2.sqrt());
        xi = if kt > 0.0 {
            scale(add(ft, scale(vt, ct)), -1.0 / kt)
        } else {
            [0.0; 3]
        };
    }
    ContactOut {
        force: add(scale(n, fn_mag), ft),
        ft,
        xi,
        kt,
        kn_delta,
        fn_mag,
    }
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
    let r_eff = pi[3] * pj[3] / rsum;
    let hertz = params.contact_model == HERTZ;
    let (f, ft, xi) = contact_force(
        n,
        delta,
        vr,
        wsum,
        m_eff,
        r_eff,
        pair,
        hertz,
        xi_old,
        mode.dt_hist,
    );
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
        pi[3],
        pair,
        params.contact_model == HERTZ,
        xi_old,
        mode.dt_hist,
    );
    record(acc, f, pi[3], n, ft);
    acc.wall_touching += 1;
    store_history(mode, hist, acc, partner, xi);
}

impl CpuSim {
    /// Kernel `compute_forces`: contact and wall forces, torques, gravity,
    /// and the new contact history of every particle.
    pub fn compute_forces(&mut self, kind: ForceKind) {
        let params = self.params;
        let mode = kind.mode(params.dt);
        let grid = self.grid;
        let slots = params.slots as usize;
        let time = self.kernel_time();
        let s = &mut self.state;
        let (pos, vel, angvel, meta) = (&s.pos, &s.vel, &s.angvel, &s.meta);
        let (pairs, walls) = (&self.pairs, &self.walls);
        let (hist_count_old, hist_old) = (&self.hist_count_old, &self.hist_old);
        let cell_start = &self.cell_start;
        let counters = &self.counters;
        s.force
            .par_iter_mut()
            .zip(s.torque.par_iter_mut())
            .zip(s.hist.par_chunks_mut(slots))
            .zip(s.hist_count.par_iter_mut())
            .enumerate()
            .with_min_len(MIN_LEN)
            .for_each(|(i, (((force, torque), hist), hist_count))| {
                let pi = pos[i];
                let vi = vel[i];
                let m_i = if vi[3] > 0.0 { 1.0 / vi[3] } else { 0.0 };
                let old = &hist_old[i * slots..i * slots + hist_count_old[i] as usize];
                let mut acc = Acc {
                    force: scale(
                        [params.gravity[0], params.gravity[1], params.gravity[2]],
                        m_i,
                    ),
                    ..Acc::default()
                };
                let mut sink = ForceSink {
                    i,
                    acc: &mut acc,
                    pos,
                    vel,
                    angvel,
                    meta,
                    pairs,
                    params: &params,
                    mode,
                    old,
                    hist,
                };
                for_each_neighbour(&grid, cell_start, pos, i, &mut sink);
                for (w, wall) in walls.iter().enumerate() {
                    if vi[3] > 0.0 && time < wall.remove_at {
                        interact_wall(
                            w, wall, &pi, &vi, &angvel[i], meta[i][1], pairs, &params, mode, old,
                            hist, &mut acc,
                        );
                    }
                }
                *force = [acc.force[0], acc.force[1], acc.force[2], 0.0];
                *torque = [acc.torque[0], acc.torque[1], acc.torque[2], 0.0];
                if mode.commit {
                    *hist_count = acc.new_count;
                } else {
                    hist[..old.len()].copy_from_slice(old);
                    *hist_count = old.len() as u32;
                }
                counters[Counter::Contacts as usize].fetch_add(acc.touching, Ordering::Relaxed);
                counters[Counter::WallContacts as usize]
                    .fetch_add(acc.wall_touching, Ordering::Relaxed);
                if acc.overflow > 0 {
                    counters[Counter::Overflows as usize]
                        .fetch_add(acc.overflow, Ordering::Relaxed);
                }
            });
    }
}

/// The per-particle body of `compute_forces`, called for each candidate.
struct ForceSink<'a, 'b> {
    i: usize,
    acc: &'b mut Acc,
    pos: &'a [[f32; 4]],
    vel: &'a [[f32; 4]],
    angvel: &'a [[f32; 4]],
    meta: &'a [[u32; 4]],
    pairs: &'a [PairParams],
    params: &'a Params,
    mode: ForceMode,
    old: &'a [[f32; 4]],
    hist: &'b mut [[f32; 4]],
}

impl NeighbourSink for ForceSink<'_, '_> {
    #[inline(always)]
    fn visit(&mut self, j: usize) {
        interact_pair(
            self.i,
            j,
            self.pos,
            self.vel,
            self.angvel,
            self.meta,
            self.pairs,
            self.params,
            self.mode,
            self.old,
            self.hist,
            self.acc,
        );
    }
}
