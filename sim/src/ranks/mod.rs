//! The CPU engine over several ranks (processes under MPI, or threads):
//! [`RankedSim`] gives, on any number of ranks, the same bits as
//! [`PairListSim`] on one.
//!
//! The scene is cut along the major axis into the slabs one rank would cut
//! ([`plan::Plan`]); each rank owns a run of whole slabs and keeps the
//! previous rank's last layer of cells and the next rank's first layer as
//! read-only halos. Its engine is an ordinary [`PairListSim`] over those
//! particles, told which it owns ([`crate::pairlist::RankSpan`]):
//!
//! - the previous rank's last layer gets rows, so this rank adds their
//!   pairs' forces to its first particles itself, in the order and in the
//!   phase (the slab's global parity) that one rank adds them; the next
//!   rank's first layer has none (its forces are that rank's);
//! - springs of pairs across a cut live on both ranks and are updated by
//!   both with the same arithmetic;
//! - per step: the halos' positions and velocities from their owners, one
//!   global maximum of the displacement (so every rank rebuilds at the same
//!   step), and for rigid bodies each body's particle shares to the rank
//!   that owns the body, which sums them by id in the one-rank order; the
//!   sums go to every rank, which all integrate every body alike;
//! - at a build: a global count of particles per layer, the plan, and every
//!   particle with its contact history to its new owner and readers.

use std::ops::Range;
use std::sync::atomic::Ordering;

use crate::pairlist::{Cuts, History, PairListSim, RankSpan, key, slabs_of};
use crate::setup::FREE;
use crate::stages::bodies::body_reduce;
use crate::stages::common::BodyGpu;
use crate::{Counter, ForceKind, HostState, NUM_COUNTERS, SimError, SimSetup};
use pellet_formats::scene::Integrator;

pub mod comm;
pub mod plan;
pub mod records;
pub mod threads;

pub use comm::{Comm, CommError, TimedComm};
pub use plan::Plan;
pub use threads::ThreadComm;

use comm::{Message, Reader, gather_values};
use records::{
    BodyShare, BodySum, HistoryRecord, MotionRecord, ParticleRecord, ROLL, SPRING, WALL_ROLL,
    WALL_SPRING, state_of,
};

/// What the ranks did, for `--stats`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankStats {
    /// Ranks.
    pub ranks: usize,
    /// Particles each rank owned at the last build.
    pub owned: Vec<u64>,
    /// Particles each rank read from its neighbours at the last build.
    pub halo: Vec<u64>,
    /// The largest rank's particles over the mean at the last build.
    pub imbalance: f64,
    /// Bytes this rank sent since the start (halos, builds, bodies, reductions).
    pub bytes_sent: u64,
    /// Steps taken.
    pub steps: u64,
}

/// Figures summed or reduced over every rank.
#[derive(Debug, Clone, PartialEq)]
pub struct GlobalStats {
    /// Translational + rotational kinetic energy, joules.
    pub kinetic_energy: f64,
    /// Largest particle speed, m/s.
    pub max_speed: f64,
    /// Bytes all ranks sent each other since the start.
    pub bytes_sent: u64,
    /// Seconds each rank spent in collectives since the start (sending,
    /// receiving, and waiting for the slowest rank), by rank.
    pub comm_seconds: Vec<f64>,
}

/// One rank's part of a ranked run.
#[derive(Debug)]
pub struct RankedSim {
    /// The engine over this rank's particles and halos.
    pub sim: PairListSim,
    comm: TimedComm,
    plan: Plan,
    /// Neighbour ranks that own the halos (and read this rank's edges).
    previous: Option<usize>,
    next: Option<usize>,
    /// This rank's particles the previous and the next rank read.
    send_previous: Range<usize>,
    send_next: Range<usize>,
    stats: RankStats,
    /// The halo exchange's buffers, kept from step to step: what this rank
    /// sends its previous and next rank, and what it gets from them.
    halo_send: [Vec<MotionRecord>; 2],
    halo_recv: Vec<(usize, Vec<u8>)>,
}

impl RankedSim {
    /// This rank's part of `setup` (every rank passes the same setup),
    /// built and primed: the first build spreads the particles.
    pub fn new(setup: &SimSetup, comm: Box<dyn Comm>) -> Result<Self, SimError> {
        if setup.integrator != Integrator::VelocityVerlet {
            return Err(SimError::Unsupported(
                "RK2 runs on one rank only: use velocity Verlet under mpirun",
            ));
        }
        let mut sim = PairListSim::new(setup);
        if sim.list.major_periodic() {
            return Err(SimError::Unsupported(
                "a domain periodic on all three axes runs on one rank only: leave one axis walled under mpirun",
            ));
        }
        // Before the first build every rank owns a share of the input order.
        let (rank, size) = (comm.rank(), comm.size());
        let n = sim.state.len();
        let mine = n * rank / size..n * (rank + 1) / size;
        let records: Vec<ParticleRecord> = mine
            .clone()
            .map(|i| ParticleRecord::of(&sim.state, i))
            .collect();
        sim.state = state_of(&records);
        for (k, i) in mine.enumerate() {
            sim.inv_index[i] = k as u32;
        }
        let own = 0..sim.state.len();
        sim.span = Some(RankSpan { own, first_slab: 0 });
        let mut out = Self {
            sim,
            comm: TimedComm::new(comm),
            plan: Plan::default(),
            previous: None,
            next: None,
            send_previous: 0..0,
            send_next: 0..0,
            stats: RankStats {
                ranks: size,
                ..RankStats::default()
            },
            halo_send: [Vec::new(), Vec::new()],
            halo_recv: Vec::new(),
        };
        out.rebuild()?;
        out.sim.compute_forces(ForceKind::Prime);
        out.body_reduce()?;
        out.reduce_counters()?;
        Ok(out)
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The communicator.
    pub fn comm(&self) -> &dyn Comm {
        &self.comm
    }

    /// What the ranks did.
    pub fn stats(&self) -> &RankStats {
        &self.stats
    }

    /// The plan of the last build.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    fn own(&self) -> Range<usize> {
        self.sim.own_range()
    }

    fn all_to_all(
        &mut self,
        send: Vec<Vec<u8>>,
        during: &'static str,
    ) -> Result<Vec<Vec<u8>>, CommError> {
        let me = self.comm.rank();
        self.stats.bytes_sent += send
            .iter()
            .enumerate()
            .filter(|&(r, _)| r != me)
            .map(|(_, b)| b.len() as u64)
            .sum::<u64>();
        self.comm.all_to_all(send, during)
    }

    /// Takes `steps` velocity Verlet steps, as [`PairListSim::advance`] does.
    pub fn advance(&mut self, steps: u32) -> Result<(), SimError> {
        // Not moved onto a pool worker as one rank's loop is: MPI is called
        // from the thread that initialised it.
        for s in 0..steps {
            self.sim.clear_step_counters();
            if s == 0 {
                self.sim.verlet_open();
            }
            if !self.sim.bodies.is_empty() {
                self.sim.body_begin();
                self.sim.body_particles(true);
            }
            // Every rank rebuilds at the same step: the global largest
            // displacement (a NaN anywhere rebuilds everywhere, as on one rank).
            let d = gather_values(&self.comm, self.sim.max_disp2, "the rebuild check")?;
            self.stats.bytes_sent += 4 * (self.stats.ranks as u64).saturating_sub(1);
            self.sim.max_disp2 = d.into_iter().fold(0.0f32, |a, b| {
                if a.is_nan() || b.is_nan() {
                    f32::NAN
                } else {
                    a.max(b)
                }
            });
            if self.sim.needs_rebuild() {
                self.rebuild()?;
            } else {
                self.exchange_halos()?;
            }
            let update = self.sim.verlet_update(true, s + 1 < steps);
            self.sim.forces_then(ForceKind::Commit, Some(update));
            if !self.sim.bodies.is_empty() {
                self.body_reduce()?;
                self.sim.body_end();
                self.sim.body_particles(false);
            }
            self.sim.step += 1;
            self.stats.steps += 1;
        }
        self.reduce_counters()?;
        Ok(())
    }

    /// The halos' positions and velocities from the ranks that own them,
    /// point to point (both sides know the sizes from the last build).
    fn exchange_halos(&mut self) -> Result<(), SimError> {
        let s = &self.sim.state;
        let neighbours = [
            (self.previous, self.send_previous.clone()),
            (self.next, self.send_next.clone()),
        ];
        for ((to, range), out) in neighbours.iter().zip(&mut self.halo_send) {
            out.clear();
            if to.is_some() {
                out.extend(range.clone().map(|i| MotionRecord {
                    pos: s.pos[i],
                    vel: s.vel[i],
                    angvel: s.angvel[i],
                }));
            }
        }
        let send: Vec<(usize, &[u8])> = neighbours
            .iter()
            .zip(&self.halo_send)
            .filter_map(|((to, _), out)| Some(((*to)?, bytemuck::cast_slice(out))))
            .collect();
        let own = self.own();
        let n = self.sim.state.len();
        let halos = [(self.previous, 0..own.start), (self.next, own.end..n)];
        // One buffer per halo's owner, kept (with its capacity) across steps.
        let from: Vec<usize> = halos.iter().filter_map(|(r, _)| *r).collect();
        let mut recv = std::mem::take(&mut self.halo_recv);
        recv.resize_with(from.len(), Default::default);
        for (slot, r) in recv.iter_mut().zip(from) {
            slot.0 = r;
        }
        let me = self.comm.rank();
        self.stats.bytes_sent += send
            .iter()
            .filter(|&&(r, _)| r != me)
            .map(|(_, b)| b.len() as u64)
            .sum::<u64>();
        let done = self
            .comm
            .neighbour_exchange(&send, &mut recv, "the halo exchange");
        drop(send);
        let result = done.map_err(SimError::from).and_then(|()| {
            let mut got = recv.iter();
            for (from, range) in halos {
                let Some(r) = from else { continue };
                let Some((_, bytes)) = got.next() else { break };
                if bytes.len() != range.len() * size_of::<MotionRecord>() {
                    return Err(CommError::Malformed {
                        rank: r,
                        problem: format!(
                            "{} bytes of halo where {} particles were expected",
                            bytes.len(),
                            range.len()
                        ),
                    }
                    .into());
                }
                let owned;
                let m: &[MotionRecord] = match bytemuck::try_cast_slice(bytes) {
                    Ok(m) => m,
                    Err(_) => {
                        owned = bytemuck::pod_collect_to_vec(bytes);
                        &owned
                    }
                };
                let s = &mut self.sim.state;
                for (k, rec) in range.zip(m) {
                    s.pos[k] = rec.pos;
                    s.vel[k] = rec.vel;
                    s.angvel[k] = rec.angvel;
                }
            }
            Ok(())
        });
        self.halo_recv = recv;
        result
    }

    /// A build over every rank: a new plan from the global layer counts,
    /// every particle and its history to its new owner and readers, then
    /// each rank's lists over its particles and halos.
    fn rebuild(&mut self) -> Result<(), SimError> {
        let size = self.comm.size();
        let own = self.own();
        // History of the rows this rank evaluates: its own and the previous
        // rank's last layer (both ranks hold a pair across the cut).
        let history = self.sim.old_history(0..own.end);
        self.sim.wrap_free_particles(own.clone());
        let s = &self.sim.state;
        let list = &self.sim.list;
        let layer_of: Vec<u64> = own
            .clone()
            .map(|i| key(list.coords(&s.pos[i])) >> 42)
            .collect();

        // The global count of particles per layer, and the plan.
        let mut histogram: Vec<(u64, u64)> = Vec::new();
        let mut sorted = layer_of.clone();
        sorted.sort_unstable();
        for l in sorted {
            match histogram.last_mut() {
                Some((last, c)) if *last == l => *c += 1,
                _ => histogram.push((l, 1)),
            }
        }
        let flat: Vec<[u64; 2]> = histogram.iter().map(|&(l, c)| [l, c]).collect();
        let me = self.comm.rank();
        self.stats.bytes_sent += (flat.len() * 16 * (size - 1)) as u64;
        let all = self
            .comm
            .all_gather(bytemuck::cast_slice(&flat).to_vec(), "the layer count")?;
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (r, bytes) in all.iter().enumerate() {
            let v: Vec<[u64; 2]> = comm::records(r, bytes, "a layer count")?;
            merged.extend(v.into_iter().map(|[l, c]| (l, c)));
        }
        let plan = Plan::new(merged, size);

        // Every owned particle to its owner and readers; history to the
        // ranks of each of its particles this rank owns.
        let mut particles: Vec<Vec<ParticleRecord>> = vec![Vec::new(); size];
        let mut dest_of: Vec<[usize; 3]> = Vec::with_capacity(own.len());
        for (k, i) in own.clone().enumerate() {
            let li = plan.layer_index(layer_of[k]).unwrap_or(0);
            let d = plan.destinations(li);
            let rec = ParticleRecord::of(s, i);
            let mut set = [usize::MAX; 3];
            for (slot, r) in d.ranks().enumerate() {
                particles[r].push(rec);
                set[slot] = r;
            }
            dest_of.push(set);
        }
        let local_owned = |id: u32| -> Option<usize> {
            let k = *self.sim.inv_index.get(id as usize)? as usize;
            (own.contains(&k) && s.meta[k][0] == id).then(|| k - own.start)
        };
        let mut hist: Vec<Vec<HistoryRecord>> = vec![Vec::new(); size];
        let mut route = |a: u32, b: u32, kind: u32, v: [f32; 3], both: bool| {
            let mut ranks: Vec<usize> = Vec::with_capacity(6);
            let ends: &[u32] = if both { &[a, b] } else { &[a] };
            for &x in ends {
                if let Some(k) = local_owned(x) {
                    ranks.extend(dest_of[k].iter().copied().filter(|&r| r != usize::MAX));
                }
            }
            if !both {
                ranks.truncate(1); // a wall contact: the particle's owner only
            }
            ranks.sort_unstable();
            ranks.dedup();
            for r in ranks {
                hist[r].push(HistoryRecord {
                    a,
                    b,
                    kind,
                    pad: 0,
                    value: [v[0], v[1], v[2], 0.0],
                });
            }
        };
        for &(a, b, v) in &history.springs {
            route(a, b, SPRING, v, true);
        }
        for &(a, b, v) in &history.rolls {
            route(a, b, ROLL, v, true);
        }
        for &(a, w, v) in &history.wall_springs {
            route(a, w, WALL_SPRING, v, false);
        }
        for &(a, w, v) in &history.wall_rolls {
            route(a, w, WALL_ROLL, v, false);
        }
        let send: Vec<Vec<u8>> = particles
            .iter()
            .zip(&hist)
            .map(|(p, h)| {
                let mut m = Message::default();
                m.push(p).push(h);
                m.into_bytes()
            })
            .collect();
        let got = self.all_to_all(send, "the rebuild's migration")?;
        let mut records: Vec<ParticleRecord> = Vec::new();
        let mut carried = History::default();
        for (r, bytes) in got.iter().enumerate() {
            let mut reader = Reader::new(r, bytes);
            records.extend(reader.section::<ParticleRecord>()?);
            for h in reader.section::<HistoryRecord>()? {
                let entry = (h.a, h.b, [h.value[0], h.value[1], h.value[2]]);
                match h.kind {
                    SPRING => carried.springs.push(entry),
                    ROLL => carried.rolls.push(entry),
                    WALL_SPRING => carried.wall_springs.push(entry),
                    WALL_ROLL => carried.wall_rolls.push(entry),
                    other => {
                        return Err(CommError::Malformed {
                            rank: r,
                            problem: format!("history of kind {other}"),
                        }
                        .into());
                    }
                }
            }
            reader.finish()?;
        }
        for rec in &records {
            if rec.meta[0] as usize >= self.sim.id_count {
                return Err(CommError::Malformed {
                    rank: me,
                    problem: format!("particle id {} of {}", rec.meta[0], self.sim.id_count),
                }
                .into());
            }
        }

        // This rank's particles sorted as one rank sorts them, cut as the
        // plan says: the previous rank's last layer, the owned slabs, the
        // next rank's first layer.
        self.sim.state = state_of(&records);
        let cells = self.sim.sort_by_cell();
        let n = self.sim.state.len();
        let mut layer_index = vec![0usize; n];
        for c in 0..cells.key.len() {
            let li = plan.layer_index(cells.key[c] >> 42).unwrap_or(0);
            for i in cells.start[c] as usize..cells.start[c + 1] as usize {
                layer_index[i] = li;
            }
        }
        let first_at = |li: usize| layer_index.partition_point(|&x| x < li);
        let slabs = plan.rank_slabs[me].clone();
        let mut slab_start = vec![0u32];
        let (own, first_slab) = if slabs.is_empty() {
            (0..0, 0)
        } else {
            let a = first_at(plan.slab_layer[slabs.start]);
            let b = first_at(plan.slab_layer[slabs.end]);
            if a > 0 {
                slab_start.push(a as u32);
            }
            for k in slabs.start + 1..slabs.end {
                slab_start.push(first_at(plan.slab_layer[k]) as u32);
            }
            if b < n && b > a {
                slab_start.push(b as u32);
            }
            let first = if a > 0 { slabs.start - 1 } else { slabs.start };
            (a..b, first)
        };
        slab_start.push(n as u32);
        slab_start.dedup();
        if slab_start.len() == 1 {
            slab_start.push(n as u32);
        }
        let layer_start = slabs_of(&cells, n).layer_start;
        self.previous = plan.previous(me).filter(|_| !slabs.is_empty());
        self.next = plan.next(me).filter(|_| !slabs.is_empty());
        let own_layers = plan.rank_layers(me);
        self.send_previous = if self.previous.is_some() {
            own.start..first_at(own_layers.start + 1).min(own.end)
        } else {
            0..0
        };
        self.send_next = if self.next.is_some() && !own.is_empty() {
            first_at(own_layers.end - 1).max(own.start)..own.end
        } else {
            0..0
        };
        self.sim.span = Some(RankSpan {
            own: own.clone(),
            first_slab,
        });
        self.sim.build_lists(
            &carried,
            &cells,
            Cuts {
                slab_start,
                layer_start,
            },
            own.end,
        );
        self.stats.owned = (0..size).map(|r| plan.rank_particles(r)).collect();
        self.stats.imbalance = plan.imbalance();
        let halo = (n - own.len()) as u64;
        self.stats.halo = gather_values(&self.comm, halo, "the rebuild's statistics")?;
        self.plan = plan;
        Ok(())
    }

    /// Every body's force and torque: each rank sends its body particles'
    /// shares to the body's owner (body `b` is rank `b mod ranks`'), which
    /// sums them by id as one rank does; every rank gets every sum.
    fn body_reduce(&mut self) -> Result<(), SimError> {
        let size = self.comm.size();
        let me = self.comm.rank();
        let own = self.own();
        let s = &self.sim.state;
        let mut shares: Vec<Vec<BodyShare>> = vec![Vec::new(); size];
        for i in own {
            let m = s.meta[i];
            if m[2] == FREE {
                continue;
            }
            shares[m[2] as usize % size].push(BodyShare {
                id: m[0],
                body: m[2],
                pad: [0; 2],
                pos: s.pos[i],
                force: s.force[i],
                torque: s.torque[i],
            });
        }
        let send: Vec<Vec<u8>> = shares
            .iter()
            .map(|v| bytemuck::cast_slice(v).to_vec())
            .collect();
        let got = self.all_to_all(send, "the body sums")?;
        let bodies = &self.sim.bodies;
        // Per owned body, its particles' records in id order.
        let mut per_body: Vec<Vec<Option<BodyShare>>> = bodies
            .iter()
            .enumerate()
            .map(|(b, body)| {
                if b % size == me {
                    vec![None; body.range[1] as usize]
                } else {
                    Vec::new()
                }
            })
            .collect();
        for (r, bytes) in got.iter().enumerate() {
            for sh in comm::records::<BodyShare>(r, bytes, "body shares")? {
                let body = bodies.get(sh.body as usize);
                let slot = body.and_then(|b| {
                    let k = sh.id.checked_sub(b.range[0])? as usize;
                    per_body.get_mut(sh.body as usize)?.get_mut(k)
                });
                match slot {
                    Some(slot) => *slot = Some(sh),
                    None => {
                        return Err(CommError::Malformed {
                            rank: r,
                            problem: format!("a share of particle {} for body {}", sh.id, sh.body),
                        }
                        .into());
                    }
                }
            }
        }
        let mut sums: Vec<BodySum> = Vec::new();
        for (b, parts) in per_body.iter().enumerate() {
            if b % size != me {
                continue;
            }
            let count = parts.len();
            if parts.iter().any(Option::is_none) {
                return Err(CommError::Transport(format!(
                    "body {b} got {} of its {count} particles' shares",
                    parts.iter().filter(|p| p.is_some()).count()
                ))
                .into());
            }
            let pick = |f: fn(&BodyShare) -> [f32; 4]| -> Vec<[f32; 4]> {
                parts.iter().flatten().map(f).collect()
            };
            let (pos, force, torque) = (pick(|p| p.pos), pick(|p| p.force), pick(|p| p.torque));
            let inv: Vec<u32> = (0..count as u32).collect();
            let mut local = bodies[b];
            local.range[0] = 0;
            let (f, t) = body_reduce(&local, &inv, &pos, &force, &torque);
            sums.push(BodySum {
                body: b as u32,
                pad: [0; 3],
                force: f,
                torque: t,
            });
        }
        self.stats.bytes_sent += (sums.len() * size_of::<BodySum>() * (size - 1)) as u64;
        let all = self
            .comm
            .all_gather(bytemuck::cast_slice(&sums).to_vec(), "the body sums")?;
        for (r, bytes) in all.iter().enumerate() {
            for sum in comm::records::<BodySum>(r, bytes, "body sums")? {
                let b = sum.body as usize;
                if b >= self.sim.bodies.len() || b % size != r {
                    return Err(CommError::Malformed {
                        rank: r,
                        problem: format!("a sum for body {b}"),
                    }
                    .into());
                }
                self.sim.body_force[b] = sum.force;
                self.sim.body_torque[b] = sum.torque;
            }
        }
        Ok(())
    }

    /// Makes the counters global: contacts summed, occupancy the largest,
    /// the first non-finite or escaped particle over every rank.
    fn reduce_counters(&mut self) -> Result<(), SimError> {
        let local: [u32; NUM_COUNTERS] =
            std::array::from_fn(|k| self.sim.counters[k].load(Ordering::Relaxed));
        let all = gather_values(&self.comm, local, "the counters")?;
        let mut out = local;
        out[Counter::Contacts as usize] = all.iter().map(|c| c[Counter::Contacts as usize]).sum();
        out[Counter::WallContacts as usize] =
            all.iter().map(|c| c[Counter::WallContacts as usize]).sum();
        for c in [Counter::MaxOccupancy, Counter::Overflows] {
            out[c as usize] = all.iter().map(|v| v[c as usize]).max().unwrap_or(0);
        }
        for (step, id) in [
            (Counter::NanStep, Counter::NanId),
            (Counter::EscapeStep, Counter::EscapeId),
        ] {
            let first = all
                .iter()
                .map(|c| c[step as usize])
                .min()
                .unwrap_or(u32::MAX);
            out[step as usize] = first;
            out[id as usize] = all
                .iter()
                .filter(|c| c[step as usize] == first)
                .map(|c| c[id as usize])
                .min()
                .unwrap_or(u32::MAX);
        }
        for (k, v) in out.iter().enumerate() {
            self.sim.counters[k].store(*v, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Kinetic energy, largest speed and the bytes every rank has sent
    /// since the start, over all ranks, in one gather (every rank calls it).
    pub fn global_stats(&self) -> Result<GlobalStats, SimError> {
        let own = self.own();
        let s = &self.sim.state;
        let mine = HostState {
            vel: s.vel[own.clone()].to_vec(),
            angvel: s.angvel[own].to_vec(),
            ..HostState::default()
        };
        let (ke, vmax) = crate::cpu::kinetic_energy(&mine);
        // Byte counts travel as f64: exact below 2^53 bytes. The time in
        // collectives is read before this gather (the same point on every
        // rank).
        let local = [ke, vmax, self.stats.bytes_sent as f64, self.comm.seconds()];
        let all = gather_values(&self.comm, local, "the statistics")?;
        Ok(GlobalStats {
            kinetic_energy: all.iter().map(|v| v[0]).sum(),
            max_speed: all.iter().map(|v| v[1]).fold(0.0, f64::max),
            bytes_sent: all.iter().map(|v| v[2] as u64).sum(),
            comm_seconds: all.iter().map(|v| v[3]).collect(),
        })
    }

    /// Every rank's owned particles, in global sorted order (on every rank).
    pub fn gather_state(&self) -> Result<HostState, SimError> {
        let own = self.own();
        let mine: Vec<ParticleRecord> = own
            .map(|i| ParticleRecord::of(&self.sim.state, i))
            .collect();
        let all = self
            .comm
            .all_gather(bytemuck::cast_slice(&mine).to_vec(), "the state gather")?;
        let mut records = Vec::new();
        for (r, bytes) in all.iter().enumerate() {
            records.extend(comm::records::<ParticleRecord>(r, bytes, "a state")?);
        }
        Ok(state_of(&records))
    }

    /// The bodies (the same on every rank).
    pub fn bodies(&self) -> &[BodyGpu] {
        &self.sim.bodies
    }
}
