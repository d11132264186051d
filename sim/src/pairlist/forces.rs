//! Forces on the lists: gravity and wall contacts per particle, then every
//! listed pair once, applied to both of its particles (even slabs in
//! parallel, then odd ones), with each pair's spring updated in place.

use std::sync::atomic::Ordering;

use rayon::prelude::*;

use super::{MIN_LEN, PairListSim};
use crate::setup::{PairParams, WallParams};
use crate::stages::common::{V3, add, cross, dot, scale};
use crate::stages::forces::contact_force_damped;
use crate::{Counter, ForceKind, ForceMode};

/// `v` cut into the disjoint, ascending index ranges `ranges`.
fn split_ranges<'a, T>(mut v: &'a mut [T], ranges: &[(usize, usize)]) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(ranges.len());
    let mut offset = 0;
    for &(a, b) in ranges {
        let rest = std::mem::take(&mut v);
        let (_, rest) = rest.split_at_mut(a - offset);
        let (mid, rest) = rest.split_at_mut(b - a);
        out.push(mid);
        v = rest;
        offset = b;
    }
    out
}

#[inline(always)]
fn xyz(v: &[f32; 4]) -> V3 {
    [v[0], v[1], v[2]]
}

/// The read-only inputs of the pair kernel.
struct PairInputs<'a> {
    pos: &'a [[f32; 4]],
    vel: &'a [[f32; 4]],
    angvel: &'a [[f32; 4]],
    meta: &'a [[u32; 4]],
    row: &'a [u32],
    partner: &'a [u32],
    material_pair: &'a [u32],
    damping: &'a [f32],
    table: &'a [PairParams],
    mode: ForceMode,
}

impl PairInputs<'_> {
    /// Every pair of the rows of particles `first..end`; `force` and
    /// `torque` start at particle `base`, `spring` at pair `row[first]`.
    fn slab(
        &self,
        first: usize,
        end: usize,
        base: usize,
        force: &mut [[f32; 4]],
        torque: &mut [[f32; 4]],
        spring: &mut [[f32; 3]],
    ) -> u32 {
        let mode = self.mode;
        let pair0 = self.row[first] as usize;
        let mut touching = 0;
        for i in first..end {
            let (pi, vi, wi) = (self.pos[i], self.vel[i], self.angvel[i]);
            let id_i = self.meta[i][0];
            let mut fi = [0.0f32; 3];
            let mut ti = [0.0f32; 3];
            for k in self.row[i] as usize..self.row[i + 1] as usize {
                let j = self.partner[k] as usize;
                let pj = self.pos[j];
                let d = [pi[0] - pj[0], pi[1] - pj[1], pi[2] - pj[2]];
                let dist2 = dot(d, d);
                let rsum = pi[3] + pj[3];
                let xi_old = &mut spring[k - pair0];
                if dist2 >= rsum * rsum {
                    if mode.commit && *xi_old != [0.0; 3] {
                        *xi_old = [0.0; 3];
                    }
                    continue;
                }
                let (vj, wj) = (self.vel[j], self.angvel[j]);
                let dist = dist2.sqrt();
                let n = if dist > 0.0 {
                    scale(d, 1.0 / dist)
                } else if id_i < self.meta[j][0] {
                    [0.0, 1.0, 0.0]
                } else {
                    [0.0, -1.0, 0.0]
                };
                let delta = rsum - dist;
                let vr = [vi[0] - vj[0], vi[1] - vj[1], vi[2] - vj[2]];
                let wsum = add(scale(xyz(&wi), pi[3]), scale(xyz(&wj), pj[3]));
                let pair = &self.table[self.material_pair[k] as usize];
                let (f, ft, xi) = contact_force_damped(
                    n,
                    delta,
                    vr,
                    wsum,
                    self.damping[k],
                    pair,
                    *xi_old,
                    mode.dt_hist,
                );
                if mode.commit {
                    *xi_old = xi;
                }
                let tn = cross(ft, n);
                fi = add(fi, f);
                ti = add(ti, scale(tn, pi[3]));
                let (fj, tj) = (&mut force[j - base], &mut torque[j - base]);
                let t = scale(tn, pj[3]);
                for a in 0..3 {
                    fj[a] -= f[a];
                    tj[a] += t[a];
                }
                touching += 1;
            }
            let (f, t) = (&mut force[i - base], &mut torque[i - base]);
            for a in 0..3 {
                f[a] += fi[a];
                t[a] += ti[a];
            }
        }
        touching
    }
}

/// One particle's walls: every wall, the ones it lists, their damping and springs.
type ParticleWalls<'a> = (&'a [WallParams], &'a [u32], &'a [f32], &'a mut [[f32; 3]]);

/// One slab's share of the pair phase: its index, forces, torques and springs.
type SlabWork<'a> = (
    usize,
    &'a mut [[f32; 4]],
    &'a mut [[f32; 4]],
    &'a mut [[f32; 3]],
);

/// Gravity and the wall contacts of one particle: its force and torque
/// before the pairs are added.
#[allow(clippy::too_many_arguments)]
#[inline]
fn particle_start(
    p: &[f32; 4],
    v: &[f32; 4],
    w: &[f32; 4],
    material: u32,
    gravity: V3,
    time: f32,
    walls: ParticleWalls<'_>,
    table: &[PairParams],
    material_count: u32,
    mode: ForceMode,
) -> ([f32; 4], [f32; 4], u32) {
    let m_i = if v[3] > 0.0 { 1.0 / v[3] } else { 0.0 };
    let mut f = scale(gravity, m_i);
    let mut t = [0.0f32; 3];
    let (wall_params, wall_of, damping, springs) = walls;
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
            continue;
        }
        let pair = &table[(material * material_count + wall.material) as usize];
        let wsum = scale(xyz(w), p[3]);
        let (force, ft, xi) = contact_force_damped(
            n,
            delta,
            xyz(v),
            wsum,
            damping[k],
            pair,
            *spring,
            mode.dt_hist,
        );
        if mode.commit {
            *spring = xi;
        }
        f = add(f, force);
        t = add(t, scale(cross(ft, n), p[3]));
        touching += 1;
    }
    ([f[0], f[1], f[2], 0.0], [t[0], t[1], t[2], 0.0], touching)
}

impl PairListSim {
    /// Forces and torques on every particle: gravity, walls, then each
    /// listed pair once. `kind` says how the springs are extended and
    /// whether they are kept (RK2's trial evaluation leaves them).
    pub fn compute_forces(&mut self, kind: ForceKind) {
        let params = self.params;
        let mode = kind.mode(params.dt);
        let time = self.kernel_time();
        let gravity = params.gravity;
        let s = &mut self.state;
        let (pos, vel, angvel, meta) = (&s.pos, &s.vel, &s.angvel, &s.meta);
        let wl = &mut self.wall_list;
        let (table, walls) = (&self.pairs, &self.walls);

        // Gravity and walls, per particle, in blocks of MIN_LEN particles
        // (each block owns the springs of its particles' walls).
        let n = pos.len();
        let blocks: Vec<(usize, usize)> = (0..n)
            .step_by(MIN_LEN)
            .map(|a| (a, (a + MIN_LEN).min(n)))
            .collect();
        let spring_ranges: Vec<(usize, usize)> = blocks
            .iter()
            .map(|&(a, b)| (wl.row[a] as usize, wl.row[b] as usize))
            .collect();
        let wall_springs = split_ranges(&mut wl.spring, &spring_ranges);
        let (wall_row, wall_of, wall_damping) = (&wl.row, &wl.wall, &wl.damping);
        let wall_touching: u32 = s
            .force
            .par_chunks_mut(MIN_LEN)
            .zip(s.torque.par_chunks_mut(MIN_LEN))
            .zip(wall_springs.into_par_iter())
            .zip(blocks.par_iter())
            .map(|(((fs, ts), springs), &(first, _))| {
                let base = wall_row[first] as usize;
                let mut touching = 0;
                for (k, (f, t)) in fs.iter_mut().zip(ts.iter_mut()).enumerate() {
                    let i = first + k;
                    let (a, b) = (wall_row[i] as usize, wall_row[i + 1] as usize);
                    let (fi, ti, c) = particle_start(
                        &pos[i],
                        &vel[i],
                        &angvel[i],
                        meta[i][1],
                        gravity,
                        time,
                        (
                            walls,
                            &wall_of[a..b],
                            &wall_damping[a..b],
                            &mut springs[a - base..b - base],
                        ),
                        table,
                        params.material_count,
                        mode,
                    );
                    *f = fi;
                    *t = ti;
                    touching += c;
                }
                touching
            })
            .sum();

        // Pairs: even slabs, then odd slabs.
        let list = &mut self.list;
        let inputs = PairInputs {
            pos,
            vel,
            angvel,
            meta,
            row: &list.row,
            partner: &list.partner,
            material_pair: &list.material_pair,
            damping: &list.damping,
            table,
            mode,
        };
        let starts = &list.slab_start;
        let slabs = starts.len().saturating_sub(1);
        let mut pair_touching = 0u32;
        for parity in 0..2 {
            let chosen: Vec<usize> = (parity..slabs).step_by(2).collect();
            let particle_ranges: Vec<(usize, usize)> = chosen
                .iter()
                .map(|&k| (starts[k] as usize, starts[(k + 2).min(slabs)] as usize))
                .collect();
            let pair_ranges: Vec<(usize, usize)> = chosen
                .iter()
                .map(|&k| {
                    (
                        inputs.row[starts[k] as usize] as usize,
                        inputs.row[starts[k + 1] as usize] as usize,
                    )
                })
                .collect();
            let forces = split_ranges(&mut s.force, &particle_ranges);
            let torques = split_ranges(&mut s.torque, &particle_ranges);
            let springs = split_ranges(&mut list.spring, &pair_ranges);
            let work: Vec<_> = chosen
                .iter()
                .zip(forces)
                .zip(torques)
                .zip(springs)
                .map(|(((&k, f), t), sp)| (k, f, t, sp))
                .collect();
            let run = |(k, f, t, sp): SlabWork<'_>| {
                let (first, end) = (starts[k] as usize, starts[k + 1] as usize);
                inputs.slab(first, end, first, f, t, sp)
            };
            pair_touching += if pos.len() < 2 * MIN_LEN {
                work.into_iter().map(run).sum::<u32>()
            } else {
                work.into_par_iter().map(run).sum::<u32>()
            };
        }
        self.counters[Counter::Contacts as usize].fetch_add(2 * pair_touching, Ordering::Relaxed);
        self.counters[Counter::WallContacts as usize].fetch_add(wall_touching, Ordering::Relaxed);
    }
}
