//! [`Simulation`]: one scene running on one backend, with statistics,
//! snapshots and the non-finite check.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use pellet_formats::assets::SimState;
use pellet_gpu::Gpu;

use super::blocks::{BlockSim, BlockStats};
use super::cpu::kinetic_energy;
use super::gpu::GpuSim;
use super::pairlist::PairListSim;
use super::ranks::{Comm, RankedSim};
use super::stages::SimShaders;
use super::{Counter, HostState, NUM_COUNTERS, SimError, SimSetup};
use crate::stages::bodies::BodyGpu;

/// Where the kernels run.
#[derive(Debug)]
pub enum Engine {
    /// wgpu compute shaders.
    Gpu(Box<GpuSim>),
    /// The pair-list engine on rayon threads.
    Cpu(Box<PairListSim>),
    /// State on the host, forces on the GPU block by block (scenes larger
    /// than the device budget).
    Blocks(Box<BlockSim>),
    /// One rank of the CPU engine over several (MPI processes): the same
    /// bits as [`Engine::Cpu`]; statistics, states and bodies are global
    /// (every call is a collective: every rank makes it).
    Ranked(Box<RankedSim>),
}

/// One line of `--stats`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepStats {
    /// Steps taken.
    pub step: u64,
    /// Simulated time, seconds.
    pub time: f64,
    /// Translational + rotational kinetic energy, joules.
    pub kinetic_energy: f64,
    /// Largest particle speed, m/s.
    pub max_speed: f64,
    /// Particle-particle contacts (pairs) in the last step.
    pub contacts: u64,
    /// Particle-wall contacts in the last step.
    pub wall_contacts: u64,
    /// Most particles under one cell key in the last step.
    pub max_cell_occupancy: u32,
    /// Touching contacts that found no free history slot, since the start:
    /// always 0, since every engine keeps springs with the list's pairs (the
    /// field stays for scripts that read it).
    pub slot_overflows: u64,
    /// Neighbour-list builds since the start (both engines rebuild when a
    /// particle has moved half the skin, block-wise stepping too).
    pub rebuilds: u64,
    /// Wall-clock milliseconds per step since the last stats line.
    pub ms_per_step: f64,
    /// The ranks of a run under `mpirun` (absent on one process).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranks: Option<RanksLine>,
}

/// The ranks' part of a `--stats` line: where the slabs put the particles
/// at the last neighbour-list build, and what the ranks sent each other.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RanksLine {
    /// Ranks.
    pub ranks: usize,
    /// Particles each rank owned at the last build (slab boundaries are
    /// placed by particle count at every build).
    pub owned: Vec<u64>,
    /// Halo particles each rank read from its neighbours at the last build.
    pub halo: Vec<u64>,
    /// The fullest rank's particles over the mean (1 = even).
    pub imbalance: f64,
    /// Bytes all ranks sent each other since the start.
    pub bytes_sent: u64,
    /// Bytes all ranks sent each other per step since the last stats line.
    pub bytes_per_step: f64,
    /// The share of the wall time since the last stats line each rank spent
    /// in collectives (sending, receiving and waiting for the slowest rank),
    /// by rank, 0-1: a rank well above the others computes less than they do.
    pub comm_share: Vec<f64>,
}

/// A running simulation.
#[derive(Debug)]
pub struct Simulation {
    engine: Engine,
    dt: f64,
    steps: u64,
    last_stats_step: u64,
    last_stats_at: Instant,
    /// Bytes the ranks had sent at the last stats line.
    last_stats_bytes: u64,
    /// Seconds each rank had spent in collectives at the last stats line.
    last_stats_comm: Vec<f64>,
    particles: usize,
    /// Domain lower and upper corner and closed faces, for escape messages.
    domain: ([f32; 3], [f32; 3], u32),
}

impl Simulation {
    /// Starts `setup` on the GPU.
    pub fn gpu(gpu: Arc<Gpu>, setup: &SimSetup) -> Result<Self, SimError> {
        let mut sim = GpuSim::new(gpu, setup)?;
        sim.prime()?;
        Ok(Self::with(Engine::Gpu(Box::new(sim)), setup))
    }

    /// Starts `setup` on the GPU with the kernels compiled from `shaders`
    /// instead of the built-in ones (shader hot reload).
    pub fn gpu_with_shaders(
        gpu: Arc<Gpu>,
        setup: &SimSetup,
        shaders: &SimShaders,
    ) -> Result<Self, SimError> {
        let mut sim = GpuSim::with_shaders(gpu, setup, shaders)?;
        sim.prime()?;
        Ok(Self::with(Engine::Gpu(Box::new(sim)), setup))
    }

    /// Starts `setup` on the CPU engine (neighbour lists with a skin).
    pub fn cpu(setup: &SimSetup) -> Self {
        let mut sim = PairListSim::new(setup);
        sim.prime();
        Self::with(Engine::Cpu(Box::new(sim)), setup)
    }

    /// Starts `setup` stepped block by block, the device holding at most
    /// `budget` bytes (`super::blocks`).
    pub fn blocks(gpu: Arc<Gpu>, setup: &SimSetup, budget: u64) -> Result<Self, SimError> {
        let mut sim = BlockSim::new(gpu, setup, budget)?;
        sim.prime()?;
        Ok(Self::with(Engine::Blocks(Box::new(sim)), setup))
    }

    /// `setup` on the CPU engine as one rank of `comm`'s (every rank calls
    /// this with the same setup).
    pub fn ranked(setup: &SimSetup, comm: Box<dyn Comm>) -> Result<Self, SimError> {
        let sim = RankedSim::new(setup, comm)?;
        Ok(Self::with(Engine::Ranked(Box::new(sim)), setup))
    }

    /// The ranked engine, when running over several ranks.
    pub fn ranked_sim(&self) -> Option<&RankedSim> {
        match &self.engine {
            Engine::Ranked(r) => Some(r),
            _ => None,
        }
    }

    /// What block-wise stepping did, when it is on.
    pub fn block_stats(&self) -> Option<&BlockStats> {
        match &self.engine {
            Engine::Blocks(b) => Some(b.stats()),
            _ => None,
        }
    }

    fn with(engine: Engine, setup: &SimSetup) -> Self {
        Self {
            engine,
            dt: setup.dt,
            steps: 0,
            last_stats_step: 0,
            last_stats_at: Instant::now(),
            last_stats_bytes: 0,
            last_stats_comm: Vec::new(),
            particles: setup.particles.len(),
            domain: (setup.domain_min, setup.domain_max, setup.closed_faces),
        }
    }

    /// The GPU simulation, when running on the GPU.
    pub fn gpu_sim(&self) -> Option<&GpuSim> {
        match &self.engine {
            Engine::Gpu(g) => Some(g),
            Engine::Cpu(_) | Engine::Blocks(_) | Engine::Ranked(_) => None,
        }
    }

    /// The backend.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The backend, mutably (tests drive single kernels through it).
    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// `gpu (adapter)` or `cpu (N threads)`.
    pub fn backend_name(&self) -> String {
        match &self.engine {
            Engine::Gpu(g) => format!("gpu ({})", g.gpu().report.name),
            Engine::Cpu(_) => format!("cpu ({} threads)", rayon::current_num_threads()),
            Engine::Ranked(r) => format!(
                "cpu ({} ranks of {} threads)",
                r.comm().size(),
                rayon::current_num_threads()
            ),
            Engine::Blocks(b) => format!(
                "gpu blocks ({} threads + {}; at most {} particles per block)",
                rayon::current_num_threads(),
                b.device_name(),
                b.stats().capacity
            ),
        }
    }

    /// Number of particles.
    pub fn particles(&self) -> usize {
        self.particles
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Time step, seconds.
    pub fn dt(&self) -> f64 {
        self.dt
    }

    /// Simulated time, seconds.
    pub fn time(&self) -> f64 {
        self.steps as f64 * self.dt
    }

    /// Takes `steps` steps (one GPU submission), then checks that every
    /// value is still finite.
    pub fn advance(&mut self, steps: u32) -> Result<(), SimError> {
        match &mut self.engine {
            Engine::Gpu(g) => g.advance(steps)?,
            Engine::Cpu(c) => c.advance(steps),
            Engine::Blocks(b) => b.advance(steps)?,
            Engine::Ranked(r) => r.advance(steps)?,
        }
        self.steps += u64::from(steps);
        let counters = self.counters()?;
        let nan_step = counters[Counter::NanStep as usize];
        if nan_step != u32::MAX {
            return Err(SimError::NonFinite {
                step: u64::from(nan_step) + 1,
                particle: counters[Counter::NanId as usize],
            });
        }
        let escape_step = counters[Counter::EscapeStep as usize];
        if escape_step != u32::MAX {
            let particle = counters[Counter::EscapeId as usize];
            let state = self.host_state()?;
            let (mut position, mut speed, mut face) = ([f32::NAN; 3], f32::NAN, "domain".into());
            if let Some(i) = state.meta.iter().position(|m| m[0] == particle) {
                let p = state.pos[i];
                let v = state.vel[i];
                position = [p[0], p[1], p[2]];
                speed = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
                if let Some(bit) =
                    super::setup::escaped_face(p, self.domain.0, self.domain.1, self.domain.2)
                {
                    face = super::setup::face_name(bit);
                }
            }
            return Err(SimError::Escaped {
                step: u64::from(escape_step) + 1,
                particle,
                face,
                position,
                speed,
            });
        }
        Ok(())
    }

    fn counters(&self) -> Result<[u32; NUM_COUNTERS], SimError> {
        match &self.engine {
            Engine::Gpu(g) => g.counters(),
            Engine::Cpu(c) => Ok(std::array::from_fn(|k| {
                c.counters[k].load(std::sync::atomic::Ordering::Relaxed)
            })),
            Engine::Blocks(b) => Ok(std::array::from_fn(|k| {
                b.host.counters[k].load(std::sync::atomic::Ordering::Relaxed)
            })),
            Engine::Ranked(r) => Ok(std::array::from_fn(|k| {
                r.sim.counters[k].load(std::sync::atomic::Ordering::Relaxed)
            })),
        }
    }

    /// Statistics of the current state (waits for the GPU).
    pub fn stats(&mut self) -> Result<StepStats, SimError> {
        let mut ranks = None;
        let (kinetic_energy, max_speed) = match &self.engine {
            Engine::Gpu(g) => g.kinetic_energy()?,
            Engine::Cpu(c) => kinetic_energy(&c.state),
            Engine::Blocks(b) => kinetic_energy(&b.host.state),
            Engine::Ranked(r) => {
                let global = r.global_stats()?;
                let rs = r.stats();
                let steps = self.steps - self.last_stats_step;
                let wall = self.last_stats_at.elapsed().as_secs_f64();
                let comm_share = global
                    .comm_seconds
                    .iter()
                    .enumerate()
                    .map(|(k, &c)| {
                        let before = self.last_stats_comm.get(k).copied().unwrap_or(0.0);
                        if wall > 0.0 {
                            ((c - before) / wall).clamp(0.0, 1.0)
                        } else {
                            0.0
                        }
                    })
                    .collect();
                self.last_stats_comm = global.comm_seconds.clone();
                ranks = Some(RanksLine {
                    ranks: rs.ranks,
                    owned: rs.owned.clone(),
                    halo: rs.halo.clone(),
                    imbalance: rs.imbalance,
                    bytes_sent: global.bytes_sent,
                    bytes_per_step: if steps > 0 {
                        (global.bytes_sent - self.last_stats_bytes) as f64 / steps as f64
                    } else {
                        0.0
                    },
                    comm_share,
                });
                self.last_stats_bytes = global.bytes_sent;
                (global.kinetic_energy, global.max_speed)
            }
        };
        let counters = self.counters()?;
        let now = Instant::now();
        let steps = self.steps - self.last_stats_step;
        let ms_per_step = if steps > 0 {
            now.duration_since(self.last_stats_at).as_secs_f64() * 1e3 / steps as f64
        } else {
            0.0
        };
        self.last_stats_step = self.steps;
        self.last_stats_at = now;
        Ok(StepStats {
            step: self.steps,
            time: self.time(),
            kinetic_energy,
            max_speed,
            contacts: u64::from(counters[Counter::Contacts as usize]) / 2,
            wall_contacts: u64::from(counters[Counter::WallContacts as usize]),
            max_cell_occupancy: counters[Counter::MaxOccupancy as usize],
            slot_overflows: u64::from(counters[Counter::Overflows as usize]),
            rebuilds: match &self.engine {
                Engine::Cpu(c) => c.rebuilds,
                Engine::Gpu(g) => g.rebuilds(),
                Engine::Blocks(b) => b.host.rebuilds,
                Engine::Ranked(r) => r.sim.rebuilds,
            },
            ms_per_step,
            ranks,
        })
    }

    /// All particle data in the current (cell-sorted) order.
    pub fn host_state(&self) -> Result<HostState, SimError> {
        match &self.engine {
            Engine::Gpu(g) => g.download(),
            Engine::Cpu(c) => Ok(c.state.clone()),
            Engine::Blocks(b) => Ok(b.host.state.clone()),
            Engine::Ranked(r) => r.gather_state(),
        }
    }

    /// The rigid bodies' current state.
    pub fn bodies(&self) -> Result<Vec<BodyGpu>, SimError> {
        match &self.engine {
            Engine::Gpu(g) => g.download_bodies(),
            Engine::Cpu(c) => Ok(c.bodies.clone()),
            Engine::Blocks(b) => Ok(b.host.bodies.clone()),
            Engine::Ranked(r) => Ok(r.bodies().to_vec()),
        }
    }

    /// A snapshot in input order, ready to save.
    pub fn snapshot(&self) -> Result<SimState, SimError> {
        Ok(self
            .host_state()?
            .to_sim_state(self.steps, self.time(), &self.bodies()?))
    }
}
