//! Forces on the lists: gravity and wall contacts per particle, then every
//! listed pair once, applied to both of its particles (even slabs in
//! parallel, then odd ones), with each pair's spring updated in place.

use std::sync::atomic::Ordering;

use rayon::prelude::*;

use super::build::image_component;
use super::dispatch;
use super::integrate::{Found, VerletUpdate};
use super::lanes::{LANES, LaneIndex, LaneSources, PairLanes, PairResults, Pending};
use super::{MIN_LEN, PairListSim};
use crate::setup::WallParams;
use crate::stages::common::{HERTZ, ROLL_NONE};
use crate::stages::common::{V3, add, cross, dot, scale, sub};
use crate::stages::forces::{contact_force_full, rolling_torque};
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

/// `pj` at the minimum image of `pi` (`NeighbourList::image_of`), or as it
/// is without periods.
#[inline(always)]
fn image(period: Option<([f32; 3], [f32; 3])>, pi: &[f32; 4], pj: [f32; 4]) -> [f32; 4] {
    let Some((period, inv)) = period else {
        return pj;
    };
    let mut out = pj;
    for a in 0..3 {
        out[a] = image_component(pi[a], pj[a], period[a], inv[a]);
    }
    out
}

#[inline(always)]
fn xyz(v: &[f32; 4]) -> V3 {
    [v[0], v[1], v[2]]
}

/// The read-only inputs of the pair kernel.
struct PairInputs<'a> {
    row: &'a [u32],
    uniform: Option<[f32; 3]>,
    uniform_damping: Option<f32>,
    owner: &'a [u32],
    partner: &'a [u32],
    kn: &'a [f32],
    kt: &'a [f32],
    mu: &'a [f32],
    damping: &'a [f32],
    sign: &'a [f32],
    mode: ForceMode,
    /// Hertz-Mindlin contacts.
    hertz: bool,
    /// Rolling resistance (`ROLL_*`).
    roll: u32,
    /// Periods and their inverses (periodic domains): partners at the
    /// minimum image.
    period: Option<([f32; 3], [f32; 3])>,
    uniform_mu_roll: Option<f32>,
    mu_roll: &'a [f32],
}

impl PairInputs<'_> {
    /// Every pair of the rows of particles `first..end`, in batches of
    /// [`LANES`] consecutive touching pairs; the chunk's slices start at
    /// particle `base`, its springs at pair `row[first]`. Each pair's force
    /// goes to both particles, pair by pair in list order.
    fn slab(&self, first: usize, end: usize, base: usize, c: &mut Chunk<'_>) -> u32 {
        if dispatch::has_wide_prefilter() {
            return self.slab_wide(first, end, base, c);
        }
        let mode = self.mode;
        let k0 = self.row[first] as usize;
        let mut touching = 0;
        let mut batch = PairLanes::default();
        let mut out = PairResults::default();
        let mut idx = LaneIndex::default();
        let mut used = 0;
        for i in first - base..end - base {
            let (a, b) = (self.row[i + base] as usize, self.row[i + base + 1] as usize);
            if a == b {
                continue;
            }
            let pi = c.pos[i];
            for k in a..b {
                let j = self.partner[k] as usize - base;
                let pj = image(self.period, &pi, c.pos[j]);
                // The lanes' own test, done first: listed pairs that do not
                // touch only lose their spring (as the lanes would give them).
                let d = [pi[0] - pj[0], pi[1] - pj[1], pi[2] - pj[2]];
                let dist2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                let rsum = pi[3] + pj[3];
                let local = k - k0;
                let touching_now = dist2 < rsum * rsum; // false for NaN, as in the lanes
                if !touching_now {
                    if mode.commit {
                        for a in 0..3 {
                            c.spring[a][local] = 0.0;
                        }
                        for r in c.roll.iter_mut().filter(|r| !r.is_empty()) {
                            r[local] = 0.0;
                        }
                    }
                    continue;
                }
                idx.i[used] = i as u32;
                idx.j[used] = j as u32;
                idx.local[used] = local as u32;
                idx.pair[used] = k as u32;
                used += 1;
                if used == LANES {
                    touching += self.flush(&mut batch, &idx, used, &mut out, c, true);
                    used = 0;
                }
            }
        }
        if used > 0 {
            touching += self.flush(&mut batch, &idx, used, &mut out, c, true);
        }
        touching
    }

    /// [`PairInputs::slab`] with the touching test sixteen listed pairs at a
    /// time (AVX-512): the same touching pairs in the same order, so the
    /// same batches and the same bits.
    fn slab_wide(&self, first: usize, end: usize, base: usize, c: &mut Chunk<'_>) -> u32 {
        let (k0, k1) = (self.row[first] as usize, self.row[end] as usize);
        let mut touching = 0;
        let mut batch = PairLanes::default();
        let mut out = PairResults::default();
        let mut idx = LaneIndex::default();
        let mut pending = Pending::default();
        let mut k = k0;
        while k < k1 {
            let stop = (k + LANES).min(k1);
            {
                let listed = dispatch::ListedBlock {
                    pos: c.pos,
                    owner: self.owner,
                    partner: self.partner,
                    base: base as u32,
                    k0,
                    period: self.period,
                };
                let [sx, sy, sz] = &mut c.spring;
                let [rx, ry, rz] = &mut c.roll;
                // The springs, and the stored rolling torques when kept:
                // cleared for the listed pairs that do not touch.
                let mut springs = [
                    &mut **sx, &mut **sy, &mut **sz, &mut **rx, &mut **ry, &mut **rz,
                ];
                let arrays = if springs[3].is_empty() { 3 } else { 6 };
                dispatch::prefilter_block(
                    &listed,
                    k,
                    stop,
                    &mut springs[..arrays],
                    self.mode.commit,
                    &mut pending,
                );
            }
            while pending.used >= LANES {
                let used = pending.take(&mut idx, &mut batch);
                touching += self.flush(&mut batch, &idx, used, &mut out, c, false);
            }
            k = stop;
        }
        while pending.used > 0 {
            let used = pending.take(&mut idx, &mut batch);
            touching += self.flush(&mut batch, &idx, used, &mut out, c, false);
        }
        touching
    }

    /// Gathers the first `used` lanes of `idx` (the rest repeat earlier,
    /// valid pairs and are ignored), evaluates them and adds each pair's
    /// force to both particles, lane by lane in list order. A run of lanes
    /// with one owner keeps the owner's sums in registers, added in the same
    /// order (so the same bits) as through memory; its partners are all
    /// later particles, never the owner. `positions`: gather the positions
    /// too (false when the wide prefilter put them in the lanes).
    #[inline]
    fn flush(
        &self,
        batch: &mut PairLanes,
        idx: &LaneIndex,
        used: usize,
        out: &mut PairResults,
        c: &mut Chunk<'_>,
        positions: bool,
    ) -> u32 {
        // The rolling torques only where a scene has rolling resistance:
        // the scatter loop of the others stays as it was.
        if self.roll == ROLL_NONE {
            self.flush_with::<false>(batch, idx, used, out, c, positions)
        } else {
            self.flush_with::<true>(batch, idx, used, out, c, positions)
        }
    }

    /// [`PairInputs::flush`], with (`ROLL`) or without rolling torques (a
    /// function of its own, as the scatter was before rolling resistance:
    /// inlined into the slab loops it measured slower).
    #[inline(never)]
    fn flush_with<const ROLL: bool>(
        &self,
        batch: &mut PairLanes,
        idx: &LaneIndex,
        used: usize,
        out: &mut PairResults,
        c: &mut Chunk<'_>,
        positions: bool,
    ) -> u32 {
        let mode = self.mode;
        let src = LaneSources {
            pos: c.pos,
            vel: c.vel,
            angvel: c.angvel,
            spring: [&c.spring[0][..], &c.spring[1][..], &c.spring[2][..]],
            uniform: self.uniform,
            uniform_damping: self.uniform_damping,
            kn: self.kn,
            kt: self.kt,
            mu: self.mu,
            damping: self.damping,
            sign: self.sign,
            roll: [&c.roll[0][..], &c.roll[1][..], &c.roll[2][..]],
            uniform_mu_roll: self.uniform_mu_roll,
            mu_roll: self.mu_roll,
        };
        if positions {
            dispatch::fill_lanes(&src, idx, batch);
            if let Some((period, inv)) = self.period {
                // The partners at the minimum image, as the wide prefilter
                // puts them in the lanes.
                for l in 0..LANES {
                    for a in 0..3 {
                        batch.pj[a][l] =
                            image_component(batch.pi[a][l], batch.pj[a][l], period[a], inv[a]);
                    }
                }
            }
        } else {
            dispatch::fill_lanes_but_positions(&src, idx, batch);
        }
        dispatch::pair_forces(batch, mode.dt_hist, self.hertz, self.roll, out);
        let roll = ROLL;
        let keep_roll = ROLL && !c.roll[0].is_empty();
        let mut touching = 0;
        let mut owner = usize::MAX;
        let (mut fi, mut ti) = ([0.0f32; 4], [0.0f32; 4]);
        for l in 0..used {
            let (i, j, k) = (idx.i[l] as usize, idx.j[l] as usize, idx.local[l] as usize);
            if !out.touching[l] {
                if mode.commit {
                    for a in 0..3 {
                        c.spring[a][k] = out.xi[a][l];
                    }
                    if keep_roll {
                        for a in 0..3 {
                            c.roll[a][k] = 0.0;
                        }
                    }
                }
                continue;
            }
            if i != owner {
                if owner != usize::MAX {
                    c.force[owner] = fi;
                    c.torque[owner] = ti;
                }
                owner = i;
                fi = c.force[i];
                ti = c.torque[i];
            }
            let (ri, rj) = (batch.pi[3][l], batch.pj[3][l]);
            for a in 0..3 {
                fi[a] += out.f[a][l];
                ti[a] += out.tn[a][l] * ri;
            }
            // The partner's two records read, summed and written whole.
            let (mut fj, mut tj) = (c.force[j], c.torque[j]);
            for a in 0..3 {
                fj[a] -= out.f[a][l];
                tj[a] += out.tn[a][l] * rj;
            }
            if roll {
                for a in 0..3 {
                    tj[a] += out.m[a][l];
                }
            }
            c.force[j] = fj;
            c.torque[j] = tj;
            if roll {
                for a in 0..3 {
                    ti[a] -= out.m[a][l];
                }
            }
            touching += 1;
            if mode.commit {
                for a in 0..3 {
                    c.spring[a][k] = out.xi[a][l];
                }
                if keep_roll {
                    for a in 0..3 {
                        c.roll[a][k] = out.roll[a][l];
                    }
                }
            }
        }
        if owner != usize::MAX {
            c.force[owner] = fi;
            c.torque[owner] = ti;
        }
        touching
    }
}

/// One particle's walls: every wall, the ones it lists, their constants,
/// springs and rolling history.
struct ParticleWalls<'a> {
    params: &'a [WallParams],
    wall_of: &'a [u32],
    constants: &'a [[f32; 4]],
    /// Rolling friction with each (empty without rolling resistance).
    mu_roll: &'a [f32],
    springs: &'a mut [[f32; 3]],
    /// Stored rolling torques (empty without `epsd2`).
    roll: &'a mut [[f32; 3]],
}

/// Gravity and the wall contacts of one particle: its force and torque
/// before the pairs are added.
#[allow(clippy::too_many_arguments)]
#[inline]
fn particle_start(
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

/// One chunk of whole slabs: the particle state and springs it owns while
/// a phase runs.
struct Chunk<'a> {
    /// First particle.
    base: usize,
    pos: &'a mut [[f32; 4]],
    vel: &'a mut [[f32; 4]],
    angvel: &'a mut [[f32; 4]],
    force: &'a mut [[f32; 4]],
    torque: &'a mut [[f32; 4]],
    /// Springs (per axis) of the rows of the chunk's first slab.
    spring: [&'a mut [f32]; 3],
    /// Stored rolling torques (per axis) of those rows (empty without
    /// `epsd2` rolling resistance).
    roll: [&'a mut [f32]; 3],
    /// Wall springs of all the chunk's particles (even phase).
    wall_spring: &'a mut [[f32; 3]],
    /// Their stored rolling torques (empty without `epsd2`).
    wall_roll: &'a mut [[f32; 3]],
}

/// The chunks of `ranges` (ascending, disjoint particle ranges), each
/// with the springs of `pair_ranges` and wall springs of `wall_ranges`.
/// The particle arrays a phase splits into chunks.
struct Particles<'a> {
    pos: &'a mut [[f32; 4]],
    vel: &'a mut [[f32; 4]],
    angvel: &'a mut [[f32; 4]],
    force: &'a mut [[f32; 4]],
    torque: &'a mut [[f32; 4]],
}

/// Per-pair and per-wall-contact history a phase splits with the chunks.
struct History<'a> {
    spring: &'a mut [Vec<f32>; 3],
    roll: &'a mut [Vec<f32>; 3],
    wall_spring: &'a mut [[f32; 3]],
    wall_roll: &'a mut [[f32; 3]],
}

/// `v` cut as [`split_ranges`] does, or into empty slices when `v` is empty
/// (history that is not kept).
fn split_or_empty<'a, T>(v: &'a mut [T], ranges: &[(usize, usize)]) -> Vec<&'a mut [T]> {
    if v.is_empty() {
        ranges.iter().map(|_| <&mut [T]>::default()).collect()
    } else {
        split_ranges(v, ranges)
    }
}

fn chunks<'a>(
    s: Particles<'a>,
    history: History<'a>,
    ranges: &[(usize, usize)],
    pair_ranges: &[(usize, usize)],
    wall_ranges: &[(usize, usize)],
) -> Vec<Chunk<'a>> {
    let History {
        spring,
        roll,
        wall_spring,
        wall_roll,
    } = history;
    let mut pos = split_ranges(s.pos, ranges).into_iter();
    let mut vel = split_ranges(s.vel, ranges).into_iter();
    let mut angvel = split_ranges(s.angvel, ranges).into_iter();
    let mut force = split_ranges(s.force, ranges).into_iter();
    let mut torque = split_ranges(s.torque, ranges).into_iter();
    let [sx, sy, sz] = spring;
    let mut springs = split_ranges(sx, pair_ranges)
        .into_iter()
        .zip(split_ranges(sy, pair_ranges))
        .zip(split_ranges(sz, pair_ranges))
        .map(|((x, y), z)| [x, y, z]);
    let [rx, ry, rz] = roll;
    let mut rolls = split_or_empty(rx, pair_ranges)
        .into_iter()
        .zip(split_or_empty(ry, pair_ranges))
        .zip(split_or_empty(rz, pair_ranges))
        .map(|((x, y), z)| [x, y, z]);
    let mut walls = split_ranges(wall_spring, wall_ranges).into_iter();
    let mut wall_rolls = split_or_empty(wall_roll, wall_ranges).into_iter();
    ranges
        .iter()
        .filter_map(|&(base, _)| {
            Some(Chunk {
                base,
                pos: pos.next()?,
                vel: vel.next()?,
                angvel: angvel.next()?,
                force: force.next()?,
                torque: torque.next()?,
                spring: springs.next()?,
                roll: rolls.next()?,
                wall_spring: walls.next()?,
                wall_roll: wall_rolls.next()?,
            })
        })
        .collect()
}

/// Gravity and walls for every particle of a chunk (the start of the even
/// phase): their forces and torques before the pairs.
struct ParticleStart<'a> {
    wall_row: &'a [u32],
    wall_of: &'a [u32],
    wall_constants: &'a [[f32; 4]],
    wall_mu_roll: &'a [f32],
    walls: &'a [WallParams],
    gravity: V3,
    time: f32,
    hertz: bool,
    roll: u32,
    mode: ForceMode,
}

impl ParticleStart<'_> {
    fn chunk(&self, c: &mut Chunk<'_>) -> u32 {
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

impl PairListSim {
    /// The pairs across the periodic face of the major axis (a domain
    /// periodic on all three axes), after the slabs: each once, in list
    /// order, applied to both particles, its spring and stored rolling
    /// torque kept as `kind` says. Returns the touching pairs.
    pub fn wrap_pair_forces(&mut self, kind: ForceKind) -> u32 {
        let mode = kind.mode(self.params.dt);
        let hertz = self.params.contact_model == HERTZ;
        let roll_model = self.params.rolling_model;
        let list = &mut self.list;
        let s = &mut self.state;
        let mut touching = 0;
        for k in 0..list.wraps.pair.len() {
            let [i, j] = list.wraps.pair[k].map(|x| x as usize);
            let pi = s.pos[i];
            let pj = list.image_of(&pi, s.pos[j]);
            let d = [pi[0] - pj[0], pi[1] - pj[1], pi[2] - pj[2]];
            let dist2 = dot(d, d);
            let rsum = pi[3] + pj[3];
            let w = &mut list.wraps;
            // Not touching (NaN included, as in the lanes).
            let touching_now = dist2 < rsum * rsum;
            if !touching_now {
                if mode.commit {
                    w.spring[k] = [0.0; 3];
                    w.roll[k] = [0.0; 3];
                }
                continue;
            }
            let dist = dist2.sqrt();
            let n = if dist > 0.0 {
                scale(d, 1.0 / dist)
            } else if s.meta[i][0] < s.meta[j][0] {
                [0.0, 1.0, 0.0]
            } else {
                [0.0, -1.0, 0.0]
            };
            let (vi, vj, wi, wj) = (s.vel[i], s.vel[j], s.angvel[i], s.angvel[j]);
            let (ri, rj) = (pi[3], pj[3]);
            let vr = [vi[0] - vj[0], vi[1] - vj[1], vi[2] - vj[2]];
            let wsum = add(scale(xyz(&wi), ri), scale(xyz(&wj), rj));
            let c = contact_force_full(
                n,
                rsum - dist,
                vr,
                wsum,
                w.constants[k],
                hertz,
                w.spring[k],
                mode.dt_hist,
            );
            let tn = cross(c.ft, n);
            let mut ti = scale(tn, ri);
            let mut tj = scale(tn, rj);
            if roll_model != ROLL_NONE {
                let (m, new) = rolling_torque(
                    roll_model,
                    n,
                    sub(xyz(&wi), xyz(&wj)),
                    c.kt,
                    c.kn_delta,
                    c.fn_mag,
                    ri * rj / rsum,
                    w.mu_roll[k],
                    w.roll[k],
                    mode.dt_hist,
                );
                ti = sub(ti, m);
                tj = add(tj, m);
                if mode.commit {
                    w.roll[k] = new;
                }
            }
            if mode.commit {
                w.spring[k] = c.xi;
            }
            for a in 0..3 {
                s.force[i][a] += c.force[a];
                s.force[j][a] -= c.force[a];
                s.torque[i][a] += ti[a];
                s.torque[j][a] += tj[a];
            }
            touching += 1;
        }
        touching
    }

    /// Forces and torques on every particle: gravity, walls, then each
    /// listed pair once. `kind` says how the springs are extended and
    /// whether they are kept (RK2's trial evaluation leaves them).
    pub fn compute_forces(&mut self, kind: ForceKind) {
        self.forces_then(kind, None);
    }

    /// [`PairListSim::compute_forces`], then the Verlet `update` of every
    /// slab as soon as its forces are final (in the odd phase, while the
    /// slab is still in cache).
    pub(crate) fn forces_then(&mut self, kind: ForceKind, update: Option<VerletUpdate>) {
        let params = self.params;
        let mode = kind.mode(params.dt);
        let n = self.state.len();
        let time = self.kernel_time();
        let crate::HostState {
            pos,
            vel,
            angvel,
            meta,
            force,
            torque,
            ..
        } = &mut self.state;
        let meta = &*meta;
        let list = &mut self.list;
        let wl = &mut self.wall_list;
        let starts = list.slab_start.clone();
        let slabs = starts.len().saturating_sub(1);
        let start = ParticleStart {
            wall_row: &wl.row,
            wall_of: &wl.wall,
            wall_constants: &wl.constants,
            wall_mu_roll: &wl.mu_roll,
            walls: &self.walls,
            gravity: params.gravity,
            time,
            hertz: params.contact_model == HERTZ,
            roll: params.rolling_model,
            mode,
        };
        let inputs = PairInputs {
            row: &list.row,
            uniform: list.uniform,
            uniform_damping: list.uniform_damping,
            owner: &list.owner,
            partner: &list.partner,
            kn: &list.kn,
            kt: &list.kt,
            mu: &list.mu,
            damping: &list.damping,
            sign: &list.sign,
            mode,
            hertz: params.contact_model == HERTZ,
            roll: params.rolling_model,
            period: list.is_periodic().then_some((list.period, list.inv_period)),
            uniform_mu_roll: list.uniform_mu_roll,
            mu_roll: &list.mu_roll,
        };
        let x_ref = &self.x_ref;
        let serial = n < 2 * MIN_LEN;
        let mut pair_touching = 0u32;
        let mut wall_touching = 0u32;
        let mut found = Found::NONE;
        // The parity of each slab is its global one (on one rank its
        // index; one rank of several starts at `first_slab`), so every
        // particle's sum runs in the same order on any number of ranks.
        let first_slab = self.span.as_ref().map_or(0, |s| s.first_slab);
        let own = self.span.as_ref().map_or(0..n, |s| s.own.clone());
        for parity in 0..2 {
            // Even phase: chunks (s, s + 1) for even s, started, then the
            // rows of s. Odd phase: chunks (s, s + 1) for odd s, the rows of
            // s, then the update of both; a first slab of even parity is
            // final after the even phase and is updated alone.
            let first = (parity + first_slab) % 2;
            let mut chosen: Vec<(usize, usize)> = (first..slabs)
                .step_by(2)
                .map(|k| (k, (k + 2).min(slabs)))
                .collect();
            if parity == 1 && slabs > 0 && first_slab.is_multiple_of(2) {
                chosen.insert(0, (0, 0));
            }
            let ranges: Vec<(usize, usize)> = chosen
                .iter()
                .map(|&(k, e)| {
                    if e == 0 {
                        (starts[0] as usize, starts[1] as usize)
                    } else {
                        (starts[k] as usize, starts[e] as usize)
                    }
                })
                .collect();
            let pair_ranges: Vec<(usize, usize)> = chosen
                .iter()
                .map(|&(k, e)| {
                    if e == 0 {
                        (0, 0)
                    } else {
                        let (a, b) = (starts[k] as usize, starts[k + 1] as usize);
                        (inputs.row[a] as usize, inputs.row[b] as usize)
                    }
                })
                .collect();
            let wall_ranges: Vec<(usize, usize)> = if parity == 0 {
                ranges
                    .iter()
                    .map(|&(a, b)| (start.wall_row[a] as usize, start.wall_row[b] as usize))
                    .collect()
            } else {
                vec![(0, 0); ranges.len()]
            };
            let particles = Particles {
                pos: &mut pos[..],
                vel: &mut vel[..],
                angvel: &mut angvel[..],
                force: &mut force[..],
                torque: &mut torque[..],
            };
            let work = chunks(
                particles,
                History {
                    spring: &mut list.spring,
                    roll: &mut list.roll,
                    wall_spring: &mut wl.spring,
                    wall_roll: &mut wl.roll,
                },
                &ranges,
                &pair_ranges,
                &wall_ranges,
            );
            let run = |(mut c, &(k, e)): (Chunk<'_>, &(usize, usize))| {
                let mut walls = 0;
                if parity == 0 {
                    walls = start.chunk(&mut c);
                }
                let mut pairs = 0;
                if e != 0 {
                    let (first, end) = (starts[k] as usize, starts[k + 1] as usize);
                    pairs = inputs.slab(first, end, c.base, &mut c);
                    if !own.contains(&first) {
                        // The previous rank's last layer: its rows give
                        // this rank's first particles their share, and that
                        // rank counts them.
                        pairs = 0;
                    }
                }
                let mut f = Found::NONE;
                if parity == 1
                    && let Some(u) = &update
                {
                    // Only the particles this engine owns.
                    let (a, b) = (c.base.max(own.start), (c.base + c.pos.len()).min(own.end));
                    if a < b {
                        let r = a - c.base..b - c.base;
                        f = u.block(
                            &mut c.pos[r.clone()],
                            &mut c.vel[r.clone()],
                            &mut c.angvel[r.clone()],
                            &c.force[r.clone()],
                            &c.torque[r],
                            &meta[a..b],
                            &x_ref[a..b],
                        );
                    }
                }
                (pairs, walls, f)
            };
            let merge =
                |x: (u32, u32, Found), y: (u32, u32, Found)| (x.0 + y.0, x.1 + y.1, x.2.merge(y.2));
            let (p, w, f) = if serial {
                work.into_iter()
                    .zip(&chosen)
                    .map(run)
                    .fold((0, 0, Found::NONE), merge)
            } else {
                work.into_par_iter()
                    .zip(chosen.par_iter())
                    .map(run)
                    .reduce(|| (0, 0, Found::NONE), merge)
            };
            pair_touching += p;
            wall_touching += w;
            found = found.merge(f);
        }
        pair_touching += self.wrap_pair_forces(kind);
        self.counters[Counter::Contacts as usize].fetch_add(2 * pair_touching, Ordering::Relaxed);
        self.counters[Counter::WallContacts as usize].fetch_add(wall_touching, Ordering::Relaxed);
        if let Some(u) = update {
            self.report_update(found, u.close, u.open);
        }
    }
}
