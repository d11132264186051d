//! [`PairListSim`]: the CPU engine (`--backend cpu`). The same contact
//! model, integrators and rigid bodies as the GPU kernels, organised as
//! LIGGGHTS organises its step:
//!
//! - **a neighbour list with a skin** (`build.rs`): particles are sorted by
//!   cells of edge `d_max + skin` only at a rebuild, and every pair closer
//!   than `r_i + r_j + skin` is listed once (a half list: `j > i` in the
//!   sorted order). The list is rebuilt only when the largest displacement
//!   since the last build exceeds half the skin, so no contact can be missed
//!   in between (two particles each moving less than `skin / 2` close their
//!   gap by less than `skin`). The maximum does not depend on thread order,
//!   so the decision is deterministic.
//! - **per-pair history** (`forces.rs`): each list entry carries its own
//!   tangential spring; there is no slot search and no cap. At a rebuild the
//!   springs of touching pairs move to the new list by persistent particle
//!   ids (as LIGGGHTS `fix contact/history` does).
//! - **Newton's third law, deterministically**: each pair's force is
//!   computed once and applied to both particles. The sorted particles are
//!   cut into slabs of whole cell layers along the major axis (independent
//!   of the thread count); a pair reaches at most the next slab, so the even
//!   slabs run in parallel, then the odd ones, each writing only its own two
//!   slabs. Every sum happens in an order fixed by the list: results are
//!   bit-identical across reruns and across thread counts.
//! - **work done once**: pair constants (the material pair and the damping
//!   coefficient from the effective mass) at the build; per-particle wall
//!   lists of the walls within reach; pairs within one rigid body and pairs
//!   of two immovable particles left out at the build; the closing half
//!   kick of one step, the opening kick and drift of the next, the
//!   non-finite check and the displacement check in one pass
//!   (`integrate.rs`).
//!
//! Against the GPU kernels (and their stage-by-stage CPU twin
//! [`CpuSim`](crate::cpu::CpuSim)) the physics is the same to rounding: the
//! forces on a particle are summed in another order.

use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

use pellet_formats::scene::Integrator;

use crate::setup::{PairParams, SimSetup, WallParams};
use crate::stages::common::{BodyGpu, Params};
use crate::{Counter, ForceKind, HostState, NUM_COUNTERS};

mod build;
pub mod dispatch;
mod forces;
mod integrate;
pub mod lanes;

pub(crate) use build::{Cuts, History, TARGET_SLABS, key, slabs_of};
pub use build::{NeighbourList, WallList};

/// Particles per rayon task in the per-particle passes.
const MIN_LEN: usize = 2048;

/// What one rank of several holds of the sorted particles: the previous
/// rank's last layer of cells, its own particles, the next rank's first
/// layer (`crate::ranks`).
#[derive(Debug, Clone, Default)]
pub struct RankSpan {
    /// The particles this rank owns and integrates (the rest are read only,
    /// refreshed from their owners before every force pass).
    pub own: Range<usize>,
    /// The global index of the first of this engine's slabs (its parity
    /// decides the phase each slab runs in, as on one rank).
    pub first_slab: usize,
}

/// The CPU engine's state: particles in the order of the last build.
#[derive(Debug)]
pub struct PairListSim {
    /// Constant parameters (as the GPU kernels read them).
    pub params: Params,
    /// Material pair table, `material_count^2`.
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
    /// Particle state in the current (cell-sorted) order; no history slots.
    pub state: HostState,
    /// Statistics and error counters (see [`Counter`]).
    pub counters: [AtomicU32; NUM_COUNTERS],
    /// Steps taken.
    pub step: u32,
    /// Time integrator.
    pub integrator: Integrator,
    /// Neighbour-list skin, metres.
    pub skin: f32,
    /// The pair list and its cells.
    pub list: NeighbourList,
    /// Wall contacts within reach of each particle.
    pub wall_list: WallList,
    /// Neighbour-list builds so far (the first one included).
    pub rebuilds: u64,
    /// Positions at the last build.
    x_ref: Vec<[f32; 3]>,
    /// Largest squared displacement from `x_ref` seen since the last build, m^2.
    pub(crate) max_disp2: f32,
    /// Whether every particle is free (no body or scenery particles).
    all_free: bool,
    /// Persistent ids run below this (every particle of the scene, also
    /// when this engine holds a rank's part of them).
    pub(crate) id_count: usize,
    /// When this engine is one rank of several: the particles it owns
    /// and where its slabs sit among every rank's.
    pub(crate) span: Option<RankSpan>,
    /// RK2 start-of-step copies.
    pos0: Vec<[f32; 4]>,
    vel0: Vec<[f32; 4]>,
    angvel0: Vec<[f32; 4]>,
}

impl PairListSim {
    /// The engine for `setup`, particles in input order (sorted at the first build).
    pub fn new(setup: &SimSetup) -> Self {
        let params = setup.params();
        let n = setup.particles.len();
        let sim = Self {
            params,
            pairs: setup.pairs.clone(),
            walls: setup.walls.clone(),
            bodies: setup.bodies.clone(),
            body_force: vec![[0.0; 4]; setup.bodies.len()],
            body_torque: vec![[0.0; 4]; setup.bodies.len()],
            inv_index: (0..n as u32).collect(),
            state: HostState::new(&setup.particles, 0),
            counters: std::array::from_fn(|_| AtomicU32::new(0)),
            step: 0,
            integrator: setup.integrator,
            skin: setup.skin.max(0.0),
            list: NeighbourList::new(setup),
            wall_list: WallList::default(),
            rebuilds: 0,
            x_ref: Vec::new(),
            max_disp2: f32::INFINITY,
            all_free: setup
                .particles
                .meta
                .iter()
                .all(|m| m[2] == crate::setup::FREE),
            id_count: n,
            span: None,
            pos0: Vec::new(),
            vel0: Vec::new(),
            angvel0: Vec::new(),
        };
        for c in [
            Counter::NanStep,
            Counter::NanId,
            Counter::EscapeStep,
            Counter::EscapeId,
        ] {
            sim.counters[c as usize].store(u32::MAX, Ordering::Relaxed);
        }
        sim
    }

    /// The particles this engine integrates: all of them, or a rank's own.
    pub fn own_range(&self) -> Range<usize> {
        self.span
            .as_ref()
            .map_or(0..self.state.len(), |s| s.own.clone())
    }

    /// The global index of this engine's first slab (0 on one rank).
    /// Current simulated time, seconds (`f32(step) * dt`, as the kernels see it).
    pub fn kernel_time(&self) -> f32 {
        self.step as f32 * self.params.dt
    }

    /// Counter value.
    pub fn counter(&self, c: Counter) -> u32 {
        self.counters[c as usize].load(Ordering::Relaxed)
    }

    /// Builds the first list and evaluates the first forces (velocity
    /// Verlet needs them before its first half kick).
    pub fn prime(&mut self) {
        self.rebuild();
        self.compute_forces(ForceKind::Prime);
        self.body_reduce();
    }

    /// The largest displacement of any particle since the last build that
    /// the engine has seen, metres (infinite before the first build).
    pub fn max_displacement(&self) -> f32 {
        self.max_disp2.sqrt()
    }

    /// Whether the next force evaluation rebuilds the list: some particle
    /// has moved more than half the skin since the last build.
    pub fn needs_rebuild(&self) -> bool {
        let half = 0.5 * self.skin;
        // NaN (a non-finite particle) rebuilds too.
        self.max_disp2.is_nan() || self.max_disp2 > half * half
    }

    /// Rebuilds the list when [`PairListSim::needs_rebuild`].
    fn rebuild_if_needed(&mut self) {
        if self.needs_rebuild() {
            self.rebuild();
        }
    }

    /// Takes `steps` whole steps.
    pub fn advance(&mut self, steps: u32) {
        // The whole loop runs on a worker of the thread pool: every parallel
        // stage then starts from a worker, instead of being injected from
        // outside with the caller put to sleep and woken again (several
        // times a step; a third of a small scene's time went to the kernel
        // scheduler).
        if rayon::current_thread_index().is_none() {
            return rayon::scope(|_| self.advance(steps));
        }
        match self.advance_with(steps, &mut OwnForces) {
            Ok(()) => {}
            Err(never) => match never {},
        }
    }

    /// Applies new gravity and time step (of `params`; the rest stays this
    /// simulation's) and material pairs without restarting (the viewer's
    /// live controls). The list caches its pairs' constants, so the next
    /// evaluation rebuilds it.
    pub fn update_parameters(&mut self, params: &Params, pairs: &[PairParams]) {
        self.params.gravity = params.gravity;
        self.params.dt = params.dt;
        self.pairs = pairs.to_vec();
        self.max_disp2 = f32::INFINITY;
    }

    /// Builds the first list and evaluates the first forces with `source`.
    pub fn prime_with<S: ForceSource>(&mut self, source: &mut S) -> Result<(), S::Error> {
        self.rebuild();
        source.forces(self, ForceKind::Prime)?;
        self.body_reduce();
        Ok(())
    }

    /// Takes `steps` whole steps with the forces of `source`: the same
    /// integration, lists, rebuilds and checks as [`PairListSim::advance`],
    /// the force pass outside (velocity Verlet's closing and opening kicks
    /// then take a pass of their own).
    pub fn advance_with<S: ForceSource>(
        &mut self,
        steps: u32,
        source: &mut S,
    ) -> Result<(), S::Error> {
        for s in 0..steps {
            self.clear_step_counters();
            match self.integrator {
                Integrator::VelocityVerlet => {
                    if s == 0 {
                        self.verlet_open();
                    }
                    if !self.bodies.is_empty() {
                        self.body_begin();
                        self.body_particles(true);
                    }
                    self.rebuild_if_needed();
                    if source.fuses_update() && !self.list.major_periodic() {
                        // The closing half kick of this step (and the opening
                        // kick and drift of the next) run slab by slab as the
                        // forces finish.
                        let update = self.verlet_update(true, s + 1 < steps);
                        self.forces_then(ForceKind::Commit, Some(update));
                    } else {
                        // Forces from outside, or pairs across the major
                        // axis' periodic face that come after the slabs: the
                        // update waits for all of them.
                        source.forces(self, ForceKind::Commit)?;
                        self.verlet_pass(true, s + 1 < steps);
                    }
                    if !self.bodies.is_empty() {
                        self.body_reduce();
                        self.body_end();
                        self.body_particles(false);
                    }
                }
                Integrator::Rk2 => {
                    self.update_max_displacement();
                    self.rebuild_if_needed();
                    source.forces(self, ForceKind::Trial)?;
                    self.rk2_mid();
                    self.update_max_displacement();
                    self.rebuild_if_needed();
                    source.forces(self, ForceKind::Commit)?;
                    self.rk2_end();
                }
            }
            self.step += 1;
        }
        Ok(())
    }

    /// Resets the per-step counters.
    pub(crate) fn clear_step_counters(&self) {
        for c in [
            Counter::Contacts,
            Counter::WallContacts,
            Counter::MaxOccupancy,
        ] {
            self.counters[c as usize].store(0, Ordering::Relaxed);
        }
        self.counters[Counter::MaxOccupancy as usize]
            .store(self.list.max_occupancy, Ordering::Relaxed);
    }

    /// Records a non-finite value (`nan`) or an escape at `step` for the
    /// particle with the lowest id among those found, as the kernels'
    /// `check_finite` does.
    fn report(&self, nan: bool, step: u32, id: u32) {
        let (step_counter, id_counter) = if nan {
            (Counter::NanStep, Counter::NanId)
        } else {
            (Counter::EscapeStep, Counter::EscapeId)
        };
        let prev = self.counters[step_counter as usize].fetch_min(step, Ordering::Relaxed);
        if prev > step {
            self.counters[id_counter as usize].store(id, Ordering::Relaxed);
        } else if prev == step {
            self.counters[id_counter as usize].fetch_min(id, Ordering::Relaxed);
        }
    }
}

/// Forces evaluated outside the engine, on its lists (block-wise stepping
/// evaluates them on the GPU, a block at a time).
pub trait ForceSource {
    /// What a failed evaluation gives.
    type Error;

    /// Sets `force` and `torque` of every particle of `sim.state` (gravity,
    /// walls, listed pairs), advances the springs of `sim.list` and
    /// `sim.wall_list` as `kind` says, and adds the contacts to `sim.counters`.
    fn forces(&mut self, sim: &mut PairListSim, kind: ForceKind) -> Result<(), Self::Error>;

    /// Whether velocity Verlet's update may run inside the engine's own
    /// force pass, slab by slab (only the engine's own forces).
    fn fuses_update(&self) -> bool {
        false
    }
}

/// The engine's own forces ([`PairListSim::compute_forces`]), which
/// [`PairListSim::advance`] steps with.
struct OwnForces;

impl ForceSource for OwnForces {
    type Error = std::convert::Infallible;

    fn forces(&mut self, sim: &mut PairListSim, kind: ForceKind) -> Result<(), Self::Error> {
        sim.compute_forces(kind);
        Ok(())
    }

    fn fuses_update(&self) -> bool {
        true
    }
}

impl PairListSim {
    /// Elastic energy of all normal springs (listed pairs and walls),
    /// joules: `kn delta^2 / 2` (Hooke), `2/5 kn delta^(5/2)` with the
    /// pair's Hertz coefficient. Tangential springs are not included.
    pub fn spring_energy(&self) -> f64 {
        let s = &self.state;
        let time = self.kernel_time();
        let hertz = self.params.contact_model == crate::stages::common::HERTZ;
        let energy = |kn: f32, delta: f64| {
            if hertz {
                0.4 * f64::from(kn) * delta * delta * delta.sqrt()
            } else {
                0.5 * f64::from(kn) * delta * delta
            }
        };
        let mut total = 0.0;
        for i in 0..s.len() {
            let a = s.pos[i];
            for k in self.list.row[i] as usize..self.list.row[i + 1] as usize {
                let b = s.pos[self.list.partner[k] as usize];
                let d = [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
                let dist = f64::from(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
                let delta = f64::from(a[3] + b[3]) - dist;
                if delta > 0.0 {
                    let kn = self.list.uniform.map_or_else(|| self.list.kn[k], |u| u[0]);
                    total += energy(kn, delta);
                }
            }
            for k in self.wall_list.row[i] as usize..self.wall_list.row[i + 1] as usize {
                let wall = &self.walls[self.wall_list.wall[k] as usize];
                if time >= wall.remove_at {
                    continue;
                }
                let n = wall.normal;
                let dist = f64::from(n[0] * a[0] + n[1] * a[1] + n[2] * a[2] - wall.offset);
                let delta = f64::from(a[3]) - dist;
                if delta > 0.0 {
                    total += energy(self.wall_list.constants[k][0], delta);
                }
            }
        }
        total
    }
}
