//! Integration on the pair-list engine: velocity Verlet with the closing
//! half kick of one step and the opening kick and drift of the next fused
//! into one pass (with the non-finite, escape and displacement checks), RK2,
//! and the rigid bodies.

use rayon::prelude::*;

use super::dispatch;
use super::lanes::LANES;
use super::{MIN_LEN, PairListSim};
use crate::setup::{FREE, escaped_face};
use crate::stages::bodies::{body_begin, body_end, body_particle, body_reduce};

/// `v.xyz += f.xyz * (v.w * h)` (velocity and angular velocity kicks).
#[inline(always)]
fn kick(v: &mut [f32; 4], f: &[f32; 4], h: f32) {
    let s = v[3] * h;
    for a in 0..3 {
        v[a] += f[a] * s;
    }
}

/// Whether any of the nine components is infinite or NaN (on the bits, as
/// the kernels test it), without branches.
#[inline(always)]
fn nonfinite(p: &[f32; 4], v: &[f32; 4], w: &[f32; 4]) -> bool {
    const EXP: u32 = 0x7F80_0000;
    let mut any = false;
    for a in 0..3 {
        any |= (p[a].to_bits() & EXP == EXP)
            | (v[a].to_bits() & EXP == EXP)
            | (w[a].to_bits() & EXP == EXP);
    }
    any
}

/// The escape test of `escaped_face` with open faces at infinity, branch-free.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EscapeLimits {
    lo: [f32; 3],
    hi: [f32; 3],
}

impl EscapeLimits {
    pub(super) fn new(p: &crate::stages::common::Params) -> Self {
        let closed = |bit: u32| p.closed_faces & (1 << bit) != 0;
        Self {
            lo: std::array::from_fn(|a| {
                if closed(2 * a as u32) {
                    p.domain_min[a]
                } else {
                    f32::NEG_INFINITY
                }
            }),
            hi: std::array::from_fn(|a| {
                if closed(2 * a as u32 + 1) {
                    p.domain_max[a]
                } else {
                    f32::INFINITY
                }
            }),
        }
    }

    /// Whether the centre lies more than the radius beyond a closed face.
    #[inline(always)]
    fn escaped(&self, x: &[f32; 4]) -> bool {
        let mut out = false;
        for a in 0..3 {
            out |= (x[a] < self.lo[a] - x[3]) | (x[a] > self.hi[a] + x[3]);
        }
        out
    }
}

#[inline(always)]
fn disp2(p: &[f32; 4], r: &[f32; 3]) -> f32 {
    let d = [p[0] - r[0], p[1] - r[1], p[2] - r[2]];
    d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
}

/// What one pass found: the lowest id of a non-finite particle after the
/// closing kick and after the opening drift, of an escaped one after the
/// drift, and the largest squared displacement since the last build.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Found {
    nan_close: u32,
    nan_open: u32,
    escaped: u32,
    disp2: f32,
}

impl Found {
    pub(super) const NONE: Self = Self {
        nan_close: u32::MAX,
        nan_open: u32::MAX,
        escaped: u32::MAX,
        disp2: 0.0,
    };

    pub(super) fn merge(self, o: Self) -> Self {
        Self {
            nan_close: self.nan_close.min(o.nan_close),
            nan_open: self.nan_open.min(o.nan_open),
            escaped: self.escaped.min(o.escaped),
            // A NaN position is reported and stops the run.
            disp2: self.disp2.max(o.disp2),
        }
    }
}

/// One velocity Verlet update of the free particles of a block: `close`
/// the step with a half kick, then `open` the next with a half kick and a
/// drift, with the checks. `meta` and `x_ref` start at the block's first
/// particle, as the mutable slices do.
#[derive(Debug, Clone, Copy)]
pub(crate) struct VerletUpdate {
    /// Half a time step, seconds.
    pub h: f32,
    /// The time step, seconds.
    pub dt: f32,
    /// Closed domain faces.
    pub limits: EscapeLimits,
    /// Finish the step with a half kick.
    pub close: bool,
    /// Start the next step with a half kick and a drift.
    pub open: bool,
    /// Every particle is free (no bodies, no scenery): `meta` is read only
    /// for the id of a particle that went wrong, not streamed.
    pub all_free: bool,
}

impl VerletUpdate {
    /// Updates particles `0..x.len()` of the slices.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn block(
        &self,
        x: &mut [[f32; 4]],
        v: &mut [[f32; 4]],
        w: &mut [[f32; 4]],
        f: &[[f32; 4]],
        t: &[[f32; 4]],
        meta: &[[u32; 4]],
        x_ref: &[[f32; 3]],
    ) -> Found {
        let (h, dt) = (self.h, self.dt);
        let mut acc = Found::NONE;
        let mut first = 0;
        if self.all_free && self.close && self.open && dispatch::has_wide_update() {
            // Sixteen at a time while `x_ref` has a seventeenth record (the
            // wide loads read 16 bytes of each 12-byte one); a block with
            // a particle gone wrong is redone below, one by one.
            let step = dispatch::VerletStep {
                h,
                dt,
                lo: self.limits.lo,
                hi: self.limits.hi,
            };
            while first + LANES < x.len() {
                let r = first..first + LANES;
                match dispatch::verlet16(
                    &mut x[r.clone()],
                    &mut v[r.clone()],
                    &mut w[r.clone()],
                    &f[r.clone()],
                    &t[r.clone()],
                    &x_ref[first..=first + LANES],
                    &step,
                ) {
                    Some(d2) => acc.disp2 = acc.disp2.max(d2),
                    None => acc = acc.merge(self.one_by_one(r.clone(), x, v, w, f, t, meta, x_ref)),
                }
                first += LANES;
            }
        }
        acc.merge(self.one_by_one(first..x.len(), x, v, w, f, t, meta, x_ref))
    }

    /// [`VerletUpdate::block`] on the particles `range`, one at a time.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn one_by_one(
        &self,
        range: std::ops::Range<usize>,
        x: &mut [[f32; 4]],
        v: &mut [[f32; 4]],
        w: &mut [[f32; 4]],
        f: &[[f32; 4]],
        t: &[[f32; 4]],
        meta: &[[u32; 4]],
        x_ref: &[[f32; 3]],
    ) -> Found {
        let (h, dt) = (self.h, self.dt);
        let mut acc = Found::NONE;
        for i in range {
            if !self.all_free && meta[i][2] != FREE {
                continue;
            }
            let m = &meta[i];
            let (x, v, w) = (&mut x[i], &mut v[i], &mut w[i]);
            if self.close && self.open {
                // One check after both kicks and the drift; only when it
                // fails is the closing kick redone (from the saved values,
                // with the same operations) to tell which step went bad.
                let (x0, v0, w0) = (*x, *v, *w);
                kick(v, &f[i], h);
                kick(w, &t[i], h);
                kick(v, &f[i], h);
                kick(w, &t[i], h);
                for a in 0..3 {
                    x[a] += v[a] * dt;
                }
                if nonfinite(x, v, w) {
                    let (mut vc, mut wc) = (v0, w0);
                    kick(&mut vc, &f[i], h);
                    kick(&mut wc, &t[i], h);
                    if nonfinite(&x0, &vc, &wc) {
                        acc.nan_close = acc.nan_close.min(m[0]);
                    } else {
                        acc.nan_open = acc.nan_open.min(m[0]);
                    }
                }
                if self.limits.escaped(x) {
                    acc.escaped = acc.escaped.min(m[0]);
                }
                acc.disp2 = acc.disp2.max(disp2(x, &x_ref[i]));
                continue;
            }
            if self.close {
                kick(v, &f[i], h);
                kick(w, &t[i], h);
                if nonfinite(x, v, w) {
                    acc.nan_close = acc.nan_close.min(m[0]);
                }
            }
            if self.open {
                kick(v, &f[i], h);
                kick(w, &t[i], h);
                for a in 0..3 {
                    x[a] += v[a] * dt;
                }
                if nonfinite(x, v, w) {
                    acc.nan_open = acc.nan_open.min(m[0]);
                }
                if self.limits.escaped(x) {
                    acc.escaped = acc.escaped.min(m[0]);
                }
                acc.disp2 = acc.disp2.max(disp2(x, &x_ref[i]));
            }
        }
        acc
    }
}

impl PairListSim {
    /// The update of the free particles that closes (and perhaps opens) a step.
    pub(crate) fn verlet_update(&self, close: bool, open: bool) -> VerletUpdate {
        VerletUpdate {
            h: 0.5 * self.params.dt,
            dt: self.params.dt,
            limits: EscapeLimits::new(&self.params),
            close,
            open,
            all_free: self.all_free,
        }
    }

    /// One pass over the free particles (see [`VerletUpdate`]), in blocks
    /// of [`MIN_LEN`] particles.
    pub(super) fn verlet_pass(&mut self, close: bool, open: bool) {
        let update = self.verlet_update(close, open);
        let own = self.own_range();
        let s = &mut self.state;
        let (force, torque, meta) = (
            &s.force[own.clone()],
            &s.torque[own.clone()],
            &s.meta[own.clone()],
        );
        let x_ref = &self.x_ref[own.clone()];
        let found = s.pos[own.clone()]
            .par_chunks_mut(MIN_LEN)
            .zip(s.vel[own.clone()].par_chunks_mut(MIN_LEN))
            .zip(s.angvel[own].par_chunks_mut(MIN_LEN))
            .enumerate()
            .map(|(block, ((xs, vs), ws))| {
                let a = block * MIN_LEN;
                let b = a + xs.len();
                update.block(
                    xs,
                    vs,
                    ws,
                    &force[a..b],
                    &torque[a..b],
                    &meta[a..b],
                    &x_ref[a..b],
                )
            })
            .reduce(|| Found::NONE, Found::merge);
        self.report_update(found, close, open);
    }

    /// Reports what a Verlet update found.
    pub(super) fn report_update(&mut self, found: Found, close: bool, open: bool) {
        // The closing kick belongs to the step being finished, the opening
        // one to the next: `self.step` counts the steps already taken.
        let (close_step, open_step) = if close {
            (self.step, self.step + 1)
        } else {
            (self.step, self.step)
        };
        if found.nan_close != u32::MAX {
            self.report(true, close_step, found.nan_close);
        }
        if found.nan_open != u32::MAX {
            self.report(true, open_step, found.nan_open);
        }
        if found.escaped != u32::MAX {
            self.report(false, open_step, found.escaped);
        }
        if open {
            self.max_disp2 = self.max_disp2.max(found.disp2);
        }
    }

    /// Opens a step: half kick with the last forces, then drift.
    pub(crate) fn verlet_open(&mut self) {
        self.verlet_pass(false, true);
    }

    /// The largest displacement since the last build, over every particle
    /// (RK2 moves them outside the fused pass).
    pub fn update_max_displacement(&mut self) {
        let d = self
            .state
            .pos
            .par_iter()
            .zip(self.x_ref.par_iter())
            .with_min_len(MIN_LEN)
            .map(|(x, r)| Found {
                disp2: disp2(x, r),
                ..Found::NONE
            })
            .reduce(|| Found::NONE, Found::merge);
        self.max_disp2 = Found {
            disp2: self.max_disp2,
            ..Found::NONE
        }
        .merge(d)
        .disp2;
    }

    /// The non-finite and escape checks over every particle, at this step.
    fn check_all(&self) {
        let s = &self.state;
        let p = &self.params;
        let found = (0..s.len())
            .into_par_iter()
            .with_min_len(MIN_LEN)
            .map(|i| {
                let id = s.meta[i][0];
                let mut f = Found::NONE;
                if nonfinite(&s.pos[i], &s.vel[i], &s.angvel[i]) {
                    f.nan_close = id;
                }
                if escaped_face(s.pos[i], p.domain_min, p.domain_max, p.closed_faces).is_some() {
                    f.escaped = id;
                }
                f
            })
            .reduce(|| Found::NONE, Found::merge);
        if found.nan_close != u32::MAX {
            self.report(true, self.step, found.nan_close);
        }
        if found.escaped != u32::MAX {
            self.report(false, self.step, found.escaped);
        }
    }

    /// RK2: saves the start of the step, moves to the midpoint.
    pub(super) fn rk2_mid(&mut self) {
        let half = 0.5 * self.params.dt;
        let s = &mut self.state;
        self.pos0.clone_from(&s.pos);
        self.vel0.clone_from(&s.vel);
        self.angvel0.clone_from(&s.angvel);
        s.pos
            .par_iter_mut()
            .zip(s.vel.par_iter_mut())
            .zip(s.angvel.par_iter_mut())
            .zip(s.force.par_iter().zip(s.torque.par_iter()))
            .with_min_len(MIN_LEN)
            .for_each(|(((p, v), w), (f, t))| {
                for a in 0..3 {
                    p[a] += v[a] * half;
                }
                kick(v, f, half);
                kick(w, t, half);
            });
        self.check_all();
    }

    /// RK2: the full step from the start with the midpoint rates.
    pub(super) fn rk2_end(&mut self) {
        let dt = self.params.dt;
        let s = &mut self.state;
        s.pos
            .par_iter_mut()
            .zip(s.vel.par_iter_mut())
            .zip(s.angvel.par_iter_mut())
            .zip(self.pos0.par_iter().zip(self.vel0.par_iter()))
            .zip(self.angvel0.par_iter())
            .zip(s.force.par_iter().zip(s.torque.par_iter()))
            .with_min_len(MIN_LEN)
            .for_each(|(((((p, v), w), (p0, v0)), w0), (f, t))| {
                for a in 0..3 {
                    p[a] = p0[a] + v[a] * dt;
                }
                let (vm, wm) = (v[3], w[3]);
                for a in 0..3 {
                    v[a] = v0[a] + f[a] * (vm * dt);
                    w[a] = w0[a] + t[a] * (wm * dt);
                }
            });
        self.check_all();
    }

    /// Kernel `body_begin`: half kick and drift of every body.
    pub(crate) fn body_begin(&mut self) {
        body_begin(
            &mut self.bodies,
            &self.body_force,
            &self.body_torque,
            self.params.dt,
        );
    }

    /// Kernel `body_end`: the closing half kick of every body.
    pub(crate) fn body_end(&mut self) {
        body_end(
            &mut self.bodies,
            &self.body_force,
            &self.body_torque,
            self.params.dt,
        );
    }

    /// Kernel `body_particles`: body particles follow their bodies. After a
    /// `body_begin` their displacement counts for the next rebuild.
    pub(crate) fn body_particles(&mut self, track_displacement: bool) {
        let bodies = &self.bodies;
        let p = self.params;
        // Only the particles this engine owns (another rank's are refreshed
        // from it before the forces).
        let own = self.own_range();
        let s = &mut self.state;
        let found = s.pos[own.clone()]
            .par_iter_mut()
            .zip(s.vel[own.clone()].par_iter_mut())
            .zip(s.angvel[own.clone()].par_iter_mut())
            .zip(
                s.meta[own.clone()]
                    .par_iter()
                    .zip(s.local[own.clone()].par_iter()),
            )
            .zip(self.x_ref[own].par_iter())
            .with_min_len(MIN_LEN)
            .fold(
                || Found::NONE,
                |mut acc, ((((x, v), w), (m, l)), r)| {
                    if m[2] == FREE {
                        return acc;
                    }
                    body_particle(&bodies[m[2] as usize], l, x, v, w);
                    if nonfinite(x, v, w) {
                        acc.nan_close = acc.nan_close.min(m[0]);
                    }
                    if escaped_face(*x, p.domain_min, p.domain_max, p.closed_faces).is_some() {
                        acc.escaped = acc.escaped.min(m[0]);
                    }
                    if track_displacement {
                        acc = acc.merge(Found {
                            disp2: disp2(x, r),
                            ..Found::NONE
                        });
                    }
                    acc
                },
            )
            .reduce(|| Found::NONE, Found::merge);
        if found.nan_close != u32::MAX {
            self.report(true, self.step, found.nan_close);
        }
        if found.escaped != u32::MAX {
            self.report(false, self.step, found.escaped);
        }
        if track_displacement {
            self.max_disp2 = Found {
                disp2: self.max_disp2,
                ..Found::NONE
            }
            .merge(found)
            .disp2;
        }
    }

    /// Kernel `body_reduce`: every body's force and torque, summed in the
    /// fixed order of the body kernels.
    pub(crate) fn body_reduce(&mut self) {
        let s = &self.state;
        let (inv, bodies) = (&self.inv_index, &self.bodies);
        let sums: Vec<([f32; 4], [f32; 4])> = bodies
            .par_iter()
            .map(|b| body_reduce(b, inv, &s.pos, &s.force, &s.torque))
            .collect();
        for (k, (f, t)) in sums.into_iter().enumerate() {
            self.body_force[k] = f;
            self.body_torque[k] = t;
        }
    }
}
