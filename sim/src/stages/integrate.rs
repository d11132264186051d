//! Stage `integrate`, CPU twin of `integrate.wgsl`: velocity Verlet
//! (`verlet_begin`, `verlet_end`) and RK2 (`rk2_mid`, `rk2_end`) updates,
//! with the non-finite and escape checks of `check_finite`.

use std::sync::atomic::Ordering;

use rayon::prelude::*;

use super::common::{V3, bad};
use crate::Counter;
use crate::cpu::{CpuSim, MIN_LEN};
use crate::setup::{FREE, escaped_face};

impl CpuSim {
    fn report_nan(&self, i: usize) {
        let prev = self.counters[Counter::NanStep as usize].fetch_min(self.step, Ordering::Relaxed);
        if prev >= self.step {
            self.counters[Counter::NanId as usize]
                .fetch_min(self.state.meta[i][0], Ordering::Relaxed);
        }
    }

    fn report_escape(&self, i: usize) {
        let prev =
            self.counters[Counter::EscapeStep as usize].fetch_min(self.step, Ordering::Relaxed);
        if prev >= self.step {
            self.counters[Counter::EscapeId as usize]
                .fetch_min(self.state.meta[i][0], Ordering::Relaxed);
        }
    }

    /// The non-finite and escape checks of the kernels' `check_finite`.
    pub(crate) fn check_nan(&self) {
        let s = &self.state;
        let p = &self.params;
        let out =
            |i: usize| escaped_face(s.pos[i], p.domain_min, p.domain_max, p.closed_faces).is_some();
        let nan = |i: usize| bad(xyz(&s.pos[i])) || bad(xyz(&s.vel[i])) || bad(xyz(&s.angvel[i]));
        let bad_index = (0..s.len())
            .into_par_iter()
            .with_min_len(MIN_LEN)
            .find_first(|&i| nan(i) || out(i));
        if let Some(first) = bad_index {
            for i in first..s.len() {
                if nan(i) {
                    self.report_nan(i);
                }
                if out(i) {
                    self.report_escape(i);
                }
            }
        }
    }

    /// Kernel `verlet_begin`: half kick with the last forces, then drift.
    pub fn verlet_begin(&mut self) {
        let half = 0.5 * self.params.dt;
        let dt = self.params.dt;
        let s = &mut self.state;
        s.pos
            .par_iter_mut()
            .zip(s.vel.par_iter_mut())
            .zip(s.angvel.par_iter_mut())
            .zip(s.force.par_iter().zip(s.torque.par_iter()))
            .zip(s.meta.par_iter())
            .with_min_len(MIN_LEN)
            .for_each(|((((p, v), w), (f, t)), m)| {
                if m[2] != FREE {
                    return;
                }
                kick(v, f, half);
                kick(w, t, half);
                for a in 0..3 {
                    p[a] += v[a] * dt;
                }
            });
        self.check_nan();
    }

    /// Kernel `verlet_end`: the second half kick with the new forces.
    pub fn verlet_end(&mut self) {
        let half = 0.5 * self.params.dt;
        let s = &mut self.state;
        s.vel
            .par_iter_mut()
            .zip(s.angvel.par_iter_mut())
            .zip(s.force.par_iter().zip(s.torque.par_iter()))
            .zip(s.meta.par_iter())
            .with_min_len(MIN_LEN)
            .for_each(|(((v, w), (f, t)), m)| {
                if m[2] == FREE {
                    kick(v, f, half);
                    kick(w, t, half);
                }
            });
        self.check_nan();
    }

    /// Kernel `rk2_mid`: saves the start of the step, moves to the midpoint.
    pub fn rk2_mid(&mut self) {
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
        self.check_nan();
    }

    /// Kernel `rk2_end`: the full step from the start with midpoint rates.
    pub fn rk2_end(&mut self) {
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
                let vm = v[3];
                let wm = w[3];
                for a in 0..3 {
                    v[a] = v0[a] + f[a] * (vm * dt);
                    w[a] = w0[a] + t[a] * (wm * dt);
                }
            });
        self.check_nan();
    }
}

#[inline]
fn xyz(v: &[f32; 4]) -> V3 {
    [v[0], v[1], v[2]]
}

/// `v.xyz += f.xyz * (v.w * h)` (velocity and angular velocity kicks).
#[inline]
fn kick(v: &mut [f32; 4], f: &[f32; 4], h: f32) {
    let s = v[3] * h;
    for a in 0..3 {
        v[a] += f[a] * s;
    }
}
