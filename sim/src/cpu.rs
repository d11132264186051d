//! [`CpuSim`], the CPU twin of the GPU kernels: the same stages
//! (`stages/*.rs` beside `stages/*.wgsl`), with the same kernel names, the
//! same data layout and the same order of every floating-point sum, run with
//! rayon. This file holds the buffers and the step order; each stage's
//! kernels are `impl CpuSim` blocks in its own file.
//!
//! It is the oracle the GPU is tested against stage by stage, and
//! `--backend cpu` runs whole scenes with it.
//!
//! Differences that are allowed: the GPU may fuse multiply-adds and its
//! `sqrt` may differ in the last bit, so GPU and CPU agree to rounding, not
//! bit for bit. Integer stages (keys, counts, the sorted order) agree exactly.

use std::sync::atomic::{AtomicU32, Ordering};

use pellet_formats::scene::Integrator;

use crate::grid::GridSpec;
use crate::setup::{PairParams, SimSetup, WallParams};
use crate::stages::common::{BodyGpu, Params};
use crate::{Counter, ForceKind, HostState, NUM_COUNTERS};

pub use crate::stages::stats::{kinetic_energy, momentum, spring_energy};

/// Particles per rayon task.
pub(crate) const MIN_LEN: usize = 512;

/// The CPU twin's buffers; field names follow the WGSL bindings.
#[derive(Debug)]
pub struct CpuSim {
    /// Constant parameters.
    pub params: Params,
    /// The grid (`params` in typed form).
    pub grid: GridSpec,
    /// Material pair table.
    pub pairs: Vec<PairParams>,
    /// Walls.
    pub walls: Vec<WallParams>,
    /// Rigid bodies.
    pub bodies: Vec<BodyGpu>,
    /// Force on each body (sum over its particles), N.
    pub body_force: Vec<[f32; 4]>,
    /// Torque on each body about its centre of mass, N m.
    pub body_torque: Vec<[f32; 4]>,
    /// Current index of each particle id.
    pub inv_index: Vec<u32>,
    /// Particle state in the current (cell-sorted) order.
    pub state: HostState,
    /// RK2 start-of-step copies.
    pub pos0: Vec<[f32; 4]>,
    /// RK2 start-of-step velocities.
    pub vel0: Vec<[f32; 4]>,
    /// RK2 start-of-step angular velocities.
    pub angvel0: Vec<[f32; 4]>,
    /// History gathered into the new order, read by `compute_forces`.
    pub hist_count_old: Vec<u32>,
    /// History slots gathered into the new order.
    pub hist_old: Vec<[f32; 4]>,
    /// Cell key of each particle.
    pub keys: Vec<u32>,
    /// Particles per key (`num_keys + 1` entries, the last always 0).
    pub cell_count: Vec<AtomicU32>,
    /// Exclusive prefix sum of `cell_count`: first sorted slot of each key.
    pub cell_start: Vec<u32>,
    /// Scatter cursor per key.
    pub cursor: Vec<u32>,
    /// Old index of the particle at each sorted slot.
    pub sorted_index: Vec<u32>,
    /// Statistics and error counters (see [`Counter`]).
    pub counters: [AtomicU32; NUM_COUNTERS],
    /// Steps taken (the WGSL `clock`).
    pub step: u32,
    /// Time integrator.
    pub integrator: Integrator,
    pub(crate) scratch_f4: Vec<[f32; 4]>,
    pub(crate) scratch_u4: Vec<[u32; 4]>,
}

impl CpuSim {
    /// Buffers for `setup`, particles in input order, no history.
    pub fn new(setup: &SimSetup) -> Self {
        let params = setup.params();
        let n = setup.particles.len();
        let slots = setup.slots as usize;
        let keys = params.num_keys as usize;
        let counters = std::array::from_fn(|_| AtomicU32::new(0));
        let sim = Self {
            params,
            grid: setup.grid,
            pairs: setup.pairs.clone(),
            walls: setup.walls.clone(),
            bodies: setup.bodies.clone(),
            body_force: vec![[0.0; 4]; setup.bodies.len()],
            body_torque: vec![[0.0; 4]; setup.bodies.len()],
            inv_index: (0..n as u32).collect(),
            state: HostState::new(&setup.particles, setup.slots),
            pos0: Vec::new(),
            vel0: Vec::new(),
            angvel0: Vec::new(),
            hist_count_old: vec![0; n],
            hist_old: vec![[0.0; 4]; n * slots],
            keys: vec![0; n],
            cell_count: (0..=keys).map(|_| AtomicU32::new(0)).collect(),
            cell_start: vec![0; keys + 1],
            cursor: vec![0; keys],
            sorted_index: vec![0; n],
            counters,
            step: 0,
            integrator: setup.integrator,
            scratch_f4: Vec::new(),
            scratch_u4: Vec::new(),
        };
        sim.counters[Counter::NanStep as usize].store(u32::MAX, Ordering::Relaxed);
        sim.counters[Counter::NanId as usize].store(u32::MAX, Ordering::Relaxed);
        sim.counters[Counter::EscapeStep as usize].store(u32::MAX, Ordering::Relaxed);
        sim.counters[Counter::EscapeId as usize].store(u32::MAX, Ordering::Relaxed);
        sim
    }

    /// Current simulated time, seconds (`f32(step) * dt`, as the kernels see it).
    pub fn kernel_time(&self) -> f32 {
        self.step as f32 * self.params.dt
    }

    /// Resets the per-step counters.
    pub fn clear_step_counters(&self) {
        for c in [
            Counter::Contacts,
            Counter::WallContacts,
            Counter::MaxOccupancy,
        ] {
            self.counters[c as usize].store(0, Ordering::Relaxed);
        }
    }

    /// Counter value.
    pub fn counter(&self, c: Counter) -> u32 {
        self.counters[c as usize].load(Ordering::Relaxed)
    }

    /// Sorts and evaluates the first forces (velocity Verlet needs them
    /// before its first half kick).
    pub fn prime(&mut self) {
        self.sort(false);
        self.compute_forces(ForceKind::Prime);
        self.body_reduce();
    }

    /// Takes `steps` whole steps, kernels in the GPU's order.
    pub fn advance(&mut self, steps: u32) {
        for _ in 0..steps {
            self.clear_step_counters();
            match self.integrator {
                Integrator::VelocityVerlet => {
                    self.verlet_begin();
                    self.body_begin();
                    self.body_particles();
                    self.sort(false);
                    self.compute_forces(ForceKind::Commit);
                    self.verlet_end();
                    self.body_reduce();
                    self.body_end();
                    self.body_particles();
                }
                Integrator::Rk2 => {
                    self.sort(false);
                    self.compute_forces(ForceKind::Trial);
                    self.rk2_mid();
                    self.sort(true);
                    self.compute_forces(ForceKind::Commit);
                    self.rk2_end();
                }
            }
            self.step += 1;
        }
    }
}
