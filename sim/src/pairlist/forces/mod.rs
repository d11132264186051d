//! Forces on the lists: gravity and wall contacts per particle, then every
//! listed pair once, applied to both of its particles (even slabs in
//! parallel, then odd ones), with each pair's spring updated in place.

mod chunks;
mod pairs;
mod start;
mod sweep;

use std::sync::atomic::Ordering;

use rayon::prelude::*;

use super::integrate::{Found, VerletUpdate};
use super::{MIN_LEN, PairListSim};
use crate::stages::common::{HERTZ, ROLL_NONE};
use crate::stages::common::{add, cross, dot, scale, sub};
use crate::stages::forces::{contact_force_full, rolling_torque};
use crate::{Counter, ForceKind};
use chunks::{Chunk, History, Particles, chunks};
use pairs::{PairInputs, xyz};
use start::ParticleStart;

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
        // The particle, pair and wall ranges of one phase's chunk `(k, e)`:
        // slabs `k..e` (`e == 0`: slab 0 alone, updated only), the springs
        // of slab `k`'s rows, and in the even phase the chunk's wall springs.
        let op_ranges = |parity: usize, (k, e): (usize, usize)| {
            let range = if e == 0 {
                (starts[0] as usize, starts[1] as usize)
            } else {
                (starts[k] as usize, starts[e] as usize)
            };
            let pairs = if e == 0 {
                (0, 0)
            } else {
                let (a, b) = (starts[k] as usize, starts[k + 1] as usize);
                (inputs.row[a] as usize, inputs.row[b] as usize)
            };
            let walls = if parity == 0 {
                (
                    start.wall_row[range.0] as usize,
                    start.wall_row[range.1] as usize,
                )
            } else {
                (0, 0)
            };
            (range, pairs, walls)
        };
        let run = |parity: usize, mut c: Chunk<'_>, (k, e): (usize, usize)| {
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
        // One sweep along the slabs per thread, each over a strip of whole
        // slabs, then the odd chunks across the strips' cuts
        // ([`sweep`](sweep) shows the order is the phases' one).
        let threads = if serial {
            1
        } else {
            rayon::current_num_threads()
        };
        let (strips, across) = sweep::strips(&starts, first_slab, threads);
        let span = |(a, b): (usize, usize)| {
            let (p, q) = (starts[a] as usize, starts[b] as usize);
            (
                (p, q),
                (inputs.row[p] as usize, inputs.row[q] as usize),
                (start.wall_row[p] as usize, start.wall_row[q] as usize),
            )
        };
        let sweep_strip = |(mut whole, strip): (Chunk<'_>, &sweep::Strip)| {
            let (_, (pair0, _), (wall0, _)) = span(strip.slabs);
            strip
                .ops
                .iter()
                .map(|&(parity, chunk)| {
                    let (range, pairs, walls) = op_ranges(parity, chunk);
                    let c = whole.part((pair0, wall0), range, pairs, walls);
                    run(parity, c, chunk)
                })
                .fold((0, 0, Found::NONE), merge)
        };
        let [sx, sy, sz] = &mut list.spring;
        let [rx, ry, rz] = &mut list.roll;
        let mut total = (0, 0, Found::NONE);
        for phase in [&strips, &across] {
            let spans: Vec<_> = phase.iter().map(|s| span(s.slabs)).collect();
            let work = chunks(
                Particles {
                    pos: &mut pos[..],
                    vel: &mut vel[..],
                    angvel: &mut angvel[..],
                    force: &mut force[..],
                    torque: &mut torque[..],
                },
                History {
                    spring: [&mut sx[..], &mut sy[..], &mut sz[..]],
                    roll: [&mut rx[..], &mut ry[..], &mut rz[..]],
                    wall_spring: &mut wl.spring,
                    wall_roll: &mut wl.roll,
                },
                &spans.iter().map(|s| s.0).collect::<Vec<_>>(),
                &spans.iter().map(|s| s.1).collect::<Vec<_>>(),
                &spans.iter().map(|s| s.2).collect::<Vec<_>>(),
            );
            let part = if work.len() == 1 {
                work.into_iter()
                    .zip(phase.iter())
                    .map(sweep_strip)
                    .fold((0, 0, Found::NONE), merge)
            } else {
                work.into_par_iter()
                    .zip(phase.par_iter())
                    .map(sweep_strip)
                    .reduce(|| (0, 0, Found::NONE), merge)
            };
            total = merge(total, part);
        }
        let (p, w, f) = total;
        pair_touching += p;
        wall_touching += w;
        found = found.merge(f);
        pair_touching += self.wrap_pair_forces(kind);
        self.counters[Counter::Contacts as usize].fetch_add(2 * pair_touching, Ordering::Relaxed);
        self.counters[Counter::WallContacts as usize].fetch_add(wall_touching, Ordering::Relaxed);
        if let Some(u) = update {
            self.report_update(found, u.close, u.open);
        }
    }
}
