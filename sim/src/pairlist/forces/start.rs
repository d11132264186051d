//! The start of the even phase: gravity and wall contacts per particle,
//! before the pairs are added.

use super::chunks::Chunk;
use super::pairs::xyz;
use crate::ForceMode;
use crate::pairlist::dispatch;
use crate::pairlist::lanes::LANES;
use crate::setup::WallParams;
use crate::stages::common::ROLL_NONE;
use crate::stages::common::{V3, add, cross, dot, scale, sub};
use crate::stages::forces::{contact_force_full, rolling_torque};

/// One particle's walls: every wall, the ones it lists, their constants,
/// springs and rolling history.
pub(super) struct ParticleWalls<'a> {
    pub(super) params: &'a [WallParams],
    pub(super) wall_of: &'a [u32],
    pub(super) constants: &'a [[f32; 4]],
    /// Rolling friction with each (empty without rolling resistance).
    pub(super) mu_roll: &'a [f32],
    pub(super) springs: &'a mut [[f32; 3]],
    /// Stored rolling torques (empty without `epsd2`).
    pub(super) roll: &'a mut [[f32; 3]],
}

/// Gravity and the wall contacts of one particle: its force and torque
/// before the pairs are added.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn particle_start(
    p: &[f32; 4],
    v: &[f32; 4],
    w: &[f32; 4],
    gravity: V3,
    time: f32,
    walls: ParticleWalls<'_>,
    hertz: bool,
    roll_model: u32,
    mode: ForceMode,
) -> ([f32; 4], [f32; 4], u32) {
    let m_i = if v[3] > 0.0 { 1.0 / v[3] } else { 0.0 };
    let mut f = scale(gravity, m_i);
    let mut t = [0.0f32; 3];
    let ParticleWalls {
        params: wall_params,
        wall_of,
        constants,
        mu_roll,
        springs,
        roll,
    } = walls;
    let mut touching = 0;
    for (k, spring) in springs.iter_mut().enumerate() {
        let wall = &wall_params[wall_of[k] as usize];
        if time >= wall.remove_at {
            continue;
        }
        let n = wall.normal;
        let dist = dot(n, xyz(p)) - wall.offset;
        let delta = p[3] - dist;
        if delta <= 0.0 {
            if mode.commit && *spring != [0.0; 3] {
                *spring = [0.0; 3];
            }
            if mode.commit && !roll.is_empty() {
                roll[k] = [0.0; 3];
            }
            continue;
        }
        let wsum = scale(xyz(w), p[3]);
        let c = contact_force_full(
            n,
            delta,
            xyz(v),
            wsum,
            constants[k],
            hertz,
            *spring,
            mode.dt_hist,
        );
        if mode.commit {
            *spring = c.xi;
        }
        f = add(f, c.force);
        t = add(t, scale(cross(c.ft, n), p[3]));
        if roll_model != ROLL_NONE {
            // The wall does not spin: the particle's spin is the relative one.
            let stored = roll.get(k).copied().unwrap_or([0.0; 3]);
            let (m, new) = rolling_torque(
                roll_model,
                n,
                xyz(w),
                c.kt,
                c.kn_delta,
                c.fn_mag,
                p[3],
                mu_roll[k],
                stored,
                mode.dt_hist,
            );
            t = sub(t, m);
            if mode.commit && !roll.is_empty() {
                roll[k] = new;
            }
        }
        touching += 1;
    }
    ([f[0], f[1], f[2], 0.0], [t[0], t[1], t[2], 0.0], touching)
}

/// Gravity and walls for every particle of a chunk (the start of the even
/// phase): their forces and torques before the pairs.
pub(super) struct ParticleStart<'a> {
    pub(super) wall_row: &'a [u32],
    pub(super) wall_of: &'a [u32],
    pub(super) wall_constants: &'a [[f32; 4]],
    pub(super) wall_mu_roll: &'a [f32],
    pub(super) walls: &'a [WallParams],
    pub(super) gravity: V3,
    pub(super) time: f32,
    pub(super) hertz: bool,
    pub(super) roll: u32,
    pub(super) mode: ForceMode,
}

impl ParticleStart<'_> {
    pub(super) fn chunk(&self, c: &mut Chunk<'_>) -> u32 {
        let base = c.base;
        let wall0 = self.wall_row[base] as usize;
        let mut touching = 0;
        let n = c.pos.len();
        for first in (0..n).step_by(LANES) {
            let end = (first + LANES).min(n);
            // Gravity on sixteen particles at a time; the ones with a wall
            // in reach are then started one by one (which overwrites it).
            let wide = end - first == LANES
                && dispatch::gravity16(
                    &c.vel[first..end],
                    &mut c.force[first..end],
                    &mut c.torque[first..end],
                    self.gravity,
                );
            if wide && self.wall_row[base + first] == self.wall_row[base + end] {
                continue;
            }
            for k in first..end {
                let i = base + k;
                let (a, b) = (self.wall_row[i] as usize, self.wall_row[i + 1] as usize);
                if a == b {
                    if !wide {
                        // No wall within reach: gravity only.
                        let v = c.vel[k];
                        let m_i = if v[3] > 0.0 { 1.0 / v[3] } else { 0.0 };
                        let g = scale(self.gravity, m_i);
                        c.force[k] = [g[0], g[1], g[2], 0.0];
                        c.torque[k] = [0.0; 4];
                    }
                    continue;
                }
                let (f, t, n) = particle_start(
                    &c.pos[k],
                    &c.vel[k],
                    &c.angvel[k],
                    self.gravity,
                    self.time,
                    ParticleWalls {
                        params: self.walls,
                        wall_of: &self.wall_of[a..b],
                        constants: &self.wall_constants[a..b],
                        mu_roll: if self.wall_mu_roll.is_empty() {
                            &[]
                        } else {
                            &self.wall_mu_roll[a..b]
                        },
                        springs: &mut c.wall_spring[a - wall0..b - wall0],
                        roll: if c.wall_roll.is_empty() {
                            &mut []
                        } else {
                            &mut c.wall_roll[a - wall0..b - wall0]
                        },
                    },
                    self.hertz,
                    self.roll,
                    self.mode,
                );
                c.force[k] = f;
                c.torque[k] = t;
                touching += n;
            }
        }
        touching
    }
}
