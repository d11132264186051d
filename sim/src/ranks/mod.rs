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
//!
//! The files: the transport (`comm.rs`: the [`Comm`] trait, its timing
//! wrapper, and threads as ranks in `threads.rs`), the slab plan
//! (`plan.rs`), the records sent between ranks (`records.rs`), the build
//! over every rank (`rebuild.rs`), the bodies' sums (`bodies.rs`); this
//! file: the stepping, the halo exchange, the counters and the gathers.

use std::ops::Range;
use std::sync::atomic::Ordering;

use crate::pairlist::{PairListSim, RankSpan};
use crate::stages::common::BodyGpu;
use crate::{Counter, ForceKind, HostState, NUM_COUNTERS, SimError, SimSetup};
use pellet_formats::scene::Integrator;

mod bodies;
pub mod comm;
pub mod plan;
mod rebuild;
pub mod records;
pub mod threads;

pub use comm::{Comm, CommError, TimedComm};
pub use plan::Plan;
pub use threads::ThreadComm;

use comm::gather_values;
use records::{MotionRecord, ParticleRecord, state_of};

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
                let m = comm::records::<MotionRecord>(r, bytes, "a halo")?;
                if m.len() != range.len() {
                    return Err(CommError::Malformed {
                        rank: r,
                        problem: format!(
                            "a halo of {} particles where {} were expected",
                            m.len(),
                            range.len()
                        ),
                    }
                    .into());
                }
                let s = &mut self.sim.state;
                for (k, rec) in range.zip(m.iter()) {
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
            records.extend_from_slice(&comm::records::<ParticleRecord>(r, bytes, "a state")?);
        }
        Ok(state_of(&records))
    }

    /// The bodies (the same on every rank).
    pub fn bodies(&self) -> &[BodyGpu] {
        &self.sim.bodies
    }
}
