//! # pellet-sim
//!
//! The particle simulation: granular particles with the discrete element
//! method, on the GPU (the WGSL kernels of [`stages`], driven by
//! [`gpu::GpuSim`]) or on CPU threads ([`cpu::CpuSim`], the GPU's twin and
//! test oracle, its kernels in the same stage files' Rust twins).
//!
//! # One step
//! Velocity Verlet (the default), kernels in order:
//! 1. `verlet_begin`: half kick with the last forces, drift.
//! 2. Counting sort by cell: `cell_keys` (key per particle, count per key),
//!    `scan_block`/`scan_add` (prefix sum: each key's first slot), `scatter`
//!    (each particle takes a slot), `sort_cells` (each key's particles by
//!    persistent id, so the order never depends on thread timing),
//!    `reorder_particles` and `reorder_history` (gather all particle data and
//!    contact history into cell order, for memory coherence).
//! 3. `compute_forces`: per particle, every candidate in the 27 cells around
//!    it (no cap per cell), walls, gravity; the new contact history.
//! 4. `verlet_end`: second half kick.
//!
//! RK2 (the seed's midpoint scheme) sorts, evaluates forces, moves to the
//! midpoint (`rk2_mid`), sorts again, evaluates again and takes the full step
//! from the start (`rk2_end`).
//!
//! # Determinism
//! Every particle computes its own force from its own candidates, in a fixed
//! order; nothing sums floats atomically. Integer atomics only count (cell
//! occupancy, contacts, overflows). So a run is bit-identical on the same
//! backend and machine.

use pellet_formats::SceneError;
use pellet_formats::assets::{BodyState, FREE_PARTICLE, SimState};
use pellet_formats::blob::PodVec;
use thiserror::Error;

pub mod blocks;
pub mod cpu;
pub mod engine;
pub mod gpu;
pub mod grid;
pub mod pairlist;
pub mod ranks;
pub mod setup;
pub mod stages;

pub use engine::{Engine, RanksLine, Simulation, StepStats};
pub use grid::{GridMode, GridSpec};
pub use setup::{ParticleArrays, SimOptions, SimSetup};

/// Why a simulation could not be set up or had to stop.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SimError {
    /// The scene is invalid.
    #[error(transparent)]
    Scene(#[from] SceneError),
    /// A setting the simulation cannot use.
    #[error("{field} is {value}, {expected}")]
    BadValue {
        /// The setting, e.g. `simulation.time_step`.
        field: String,
        /// Its value.
        value: f64,
        /// What it must be, e.g. `must be positive`.
        expected: String,
    },
    /// More of something than the kernels support.
    #[error("{count} {what}; at most {max} are supported")]
    TooMany {
        /// What, plural: `materials`, `walls`, `particles`, `dense grid cells`.
        what: &'static str,
        /// How many the scene has.
        count: u64,
        /// The most supported.
        max: u64,
    },
    /// Another rank of a ranked run failed or stopped, or its message did
    /// not decode.
    #[error("ranks: {0}")]
    Comm(#[from] ranks::CommError),
    /// A feature this player does not have yet, with what to do instead.
    #[error("{0}")]
    Unsupported(&'static str),
    /// A material name that the scene does not define.
    #[error("{user} names unknown material `{name}`")]
    UnknownMaterial {
        /// What names it, e.g. `particles[2]`.
        user: String,
        /// The name.
        name: String,
    },
    /// A wall with no direction.
    #[error("walls[{wall}].normal has zero length")]
    ZeroNormal {
        /// The `[[walls]]` entry.
        wall: usize,
    },
    /// A particle or body that starts beyond a closed face of the domain.
    #[error("{what} starts at {position:?}, beyond the {face} wall of the domain {min:?}..{max:?}")]
    StartsOutside {
        /// `particle 3` or `body NAME (particle 7)`.
        what: String,
        /// Where, metres.
        position: [f32; 3],
        /// The face, e.g. `y min`.
        face: String,
        /// Domain lower corner, metres.
        min: [f32; 3],
        /// Domain upper corner, metres.
        max: [f32; 3],
    },
    /// A `[[bodies]]` entry that cannot become a rigid body.
    #[error("bodies[{index}] ({mesh}) {problem}")]
    Body {
        /// The entry.
        index: usize,
        /// Its mesh, as the scene names it.
        mesh: String,
        /// What is wrong, e.g. `has a singular inertia tensor (a line of particles?)`.
        problem: String,
    },
    /// A [`setup::BodySource`] could not provide a body (baking its mesh
    /// failed, or a baked folder lacks it); `error` says why and names the file.
    #[error("bodies[{index}]: {error}")]
    BodyUnavailable {
        /// The `[[bodies]]` entry.
        index: usize,
        /// Why.
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A GPU buffer larger than the adapter binds.
    #[error(
        "{what} needs a {:.1} MiB buffer; this GPU ({adapter}) binds at most {:.1} MiB (fewer particles or fewer contact_slots)",
        *needed as f64 / 1048576.0,
        *max as f64 / 1048576.0
    )]
    BufferTooLarge {
        /// The buffer.
        what: String,
        /// Bytes it needs.
        needed: u64,
        /// Bytes the adapter binds.
        max: u64,
        /// The adapter.
        adapter: String,
    },
    /// Block-wise stepping: one layer of cells and its halo exceed what the
    /// budget holds.
    #[error(
        "one layer of cells with its neighbours holds {particles} particles and {pairs} listed pairs, more than the {capacity} particles and {pair_capacity} pairs the device budget allows at once; raise --device-budget"
    )]
    SlabTooLarge {
        /// Particles in the layer and its halo.
        particles: usize,
        /// Listed pairs the layer's block uploads.
        pairs: usize,
        /// Particles the budget holds.
        capacity: usize,
        /// Pairs the budget holds.
        pair_capacity: usize,
    },
    /// Block-wise stepping: the budget does not even hold the fixed tables.
    #[error(
        "a device budget of {:.1} MiB holds no particles: the cell tables alone take {:.1} MiB; raise --device-budget",
        *budget as f64 / 1048576.0,
        *fixed as f64 / 1048576.0
    )]
    BudgetTooSmall {
        /// The budget, bytes.
        budget: u64,
        /// The tables, bytes.
        fixed: u64,
    },
    /// GPU work failed.
    #[error(transparent)]
    Gpu(#[from] pellet_gpu::GpuError),
    /// A baked folder could not be read.
    #[error(transparent)]
    Folder(#[from] pellet_formats::baked_folder::BakedFolderError),
    /// A position or velocity became infinite or NaN.
    #[error(
        "the simulation blew up at step {step}: particle {particle} has a non-finite position or velocity (time step too large for the stiffness, or overlapping particles at the start?)"
    )]
    NonFinite {
        /// The step (1-based) in which it happened.
        step: u64,
        /// Persistent id (input order) of the lowest-numbered bad particle.
        particle: u32,
    },
    /// A particle went through a closed face of the domain.
    #[error(
        "the simulation blew up at step {step}: particle {particle} left the domain through the {face} wall, at {position:?} m moving {speed:.3e} m/s (time step too large for the stiffness, a body started through a wall, or gravity beyond what the walls hold?)"
    )]
    Escaped {
        /// The step (1-based) in which it happened.
        step: u64,
        /// Persistent id of the lowest-numbered escaped particle.
        particle: u32,
        /// The face, e.g. `y min`.
        face: String,
        /// Where it is now, metres.
        position: [f32; 3],
        /// Its speed now, m/s.
        speed: f32,
    },
    /// A statistic (kinetic energy, speed) overflowed or exceeds physics.
    #[error("the simulation blew up at step {step}: {what}")]
    BlewUp {
        /// Steps taken.
        step: u64,
        /// What was seen, e.g. `kinetic energy is inf J`.
        what: String,
    },
}

/// Slots of the counter buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Counter {
    /// Particle-particle contacts this step, counted by both partners.
    Contacts = 0,
    /// Particle-wall contacts this step.
    WallContacts = 1,
    /// Most particles under one cell key this step.
    MaxOccupancy = 2,
    /// Touching contacts that found no free history slot, since the start.
    Overflows = 3,
    /// First step (0-based clock) with a non-finite value, `u32::MAX` if none.
    NanStep = 4,
    /// Lowest id of a non-finite particle in that step.
    NanId = 5,
    /// First step (0-based clock) in which a particle went through a closed
    /// domain face, `u32::MAX` if none.
    EscapeStep = 6,
    /// Lowest id of such a particle in that step.
    EscapeId = 7,
}

/// Number of `u32` counters.
pub const NUM_COUNTERS: usize = 8;

/// How `compute_forces` treats contact history.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForceMode {
    /// Time over which the tangential spring is extended, seconds.
    pub dt_hist: f32,
    /// Whether the new history is kept (false: RK2's trial evaluation).
    pub commit: bool,
}

/// The three ways `compute_forces` runs (the `mode` uniforms, in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForceKind {
    /// A real step: history extended by `dt` and kept.
    Commit = 0,
    /// RK2's trial evaluation at the start of a step: extended by `dt / 2`, not kept.
    Trial = 1,
    /// The first evaluation before any step: new contacts start unstretched.
    Prime = 2,
}

impl ForceKind {
    /// The mode for a step of `dt` seconds.
    pub fn mode(self, dt: f32) -> ForceMode {
        match self {
            Self::Commit => ForceMode {
                dt_hist: dt,
                commit: true,
            },
            Self::Trial => ForceMode {
                dt_hist: 0.5 * dt,
                commit: false,
            },
            Self::Prime => ForceMode {
                dt_hist: 0.0,
                commit: true,
            },
        }
    }
}

/// Per-particle state on the host, in the simulation's current order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostState {
    /// `xyz` position (m), `w` radius (m).
    pub pos: Vec<[f32; 4]>,
    /// `xyz` velocity (m/s), `w` inverse mass (1/kg).
    pub vel: Vec<[f32; 4]>,
    /// `xyz` angular velocity (rad/s), `w` inverse moment of inertia.
    pub angvel: Vec<[f32; 4]>,
    /// Persistent id, material, body, unused.
    pub meta: Vec<[u32; 4]>,
    /// Total force incl. gravity, N (`w` unused).
    pub force: Vec<[f32; 4]>,
    /// Torque, N m (`w` unused).
    pub torque: Vec<[f32; 4]>,
    /// Used history slots per particle.
    pub hist_count: Vec<u32>,
    /// `slots` history entries per particle: tangential spring `xyz` (m), partner id bits in `w`.
    pub hist: Vec<[f32; 4]>,
    /// Body particles' offsets from their body's centre of mass, body axes (m).
    pub local: Vec<[f32; 4]>,
}

impl HostState {
    /// State of `particles` with zero forces and no history.
    pub fn new(particles: &ParticleArrays, slots: u32) -> Self {
        let n = particles.len();
        Self {
            pos: particles.pos.clone(),
            vel: particles.vel.clone(),
            angvel: particles.angvel.clone(),
            meta: particles.meta.clone(),
            force: vec![[0.0; 4]; n],
            torque: vec![[0.0; 4]; n],
            hist_count: vec![0; n],
            hist: vec![[0.0; 4]; n * slots as usize],
            local: particles.local.clone(),
        }
    }

    /// Number of particles.
    pub fn len(&self) -> usize {
        self.pos.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }

    /// The same particles in persistent-id order (input order), so states of
    /// engines that sort differently compare particle by particle. Contact
    /// history is left out (its layout belongs to the engine).
    pub fn by_id(&self) -> Self {
        let n = self.len();
        let mut order = vec![0usize; n];
        for (k, m) in self.meta.iter().enumerate() {
            order[m[0] as usize] = k;
        }
        let pick = |v: &[[f32; 4]]| order.iter().map(|&k| v[k]).collect::<Vec<_>>();
        Self {
            pos: pick(&self.pos),
            vel: pick(&self.vel),
            angvel: pick(&self.angvel),
            meta: order.iter().map(|&k| self.meta[k]).collect(),
            force: pick(&self.force),
            torque: pick(&self.torque),
            hist_count: vec![0; n],
            hist: Vec::new(),
            local: pick(&self.local),
        }
    }

    /// A snapshot in input (id) order, with `bodies`.
    pub fn to_sim_state(
        &self,
        step: u64,
        time: f64,
        bodies: &[stages::common::BodyGpu],
    ) -> SimState {
        let n = self.len();
        let mut order = vec![0usize; n];
        for (k, m) in self.meta.iter().enumerate() {
            order[m[0] as usize] = k;
        }
        let pick3 = |v: &[[f32; 4]]| -> PodVec<[f32; 3]> {
            order
                .iter()
                .map(|&k| [v[k][0], v[k][1], v[k][2]])
                .collect::<Vec<_>>()
                .into()
        };
        SimState {
            time,
            step,
            positions: pick3(&self.pos),
            velocities: pick3(&self.vel),
            angular_velocities: pick3(&self.angvel),
            radii: order
                .iter()
                .map(|&k| self.pos[k][3])
                .collect::<Vec<_>>()
                .into(),
            body_of_particle: order
                .iter()
                .map(|&k| {
                    if self.meta[k][2] == setup::FREE {
                        FREE_PARTICLE
                    } else {
                        self.meta[k][2]
                    }
                })
                .collect::<Vec<_>>()
                .into(),
            bodies: bodies
                .iter()
                .map(|b| BodyState {
                    position: [b.position[0], b.position[1], b.position[2]],
                    orientation: b.orientation,
                    linear_momentum: [b.momentum[0], b.momentum[1], b.momentum[2]],
                    angular_momentum: [
                        b.angular_momentum[0],
                        b.angular_momentum[1],
                        b.angular_momentum[2],
                    ],
                })
                .collect::<Vec<_>>()
                .into(),
            body_velocities: bodies
                .iter()
                .map(|b| [b.velocity[0], b.velocity[1], b.velocity[2]])
                .collect::<Vec<_>>()
                .into(),
            body_angular_velocities: bodies
                .iter()
                .map(|b| [b.omega[0], b.omega[1], b.omega[2]])
                .collect::<Vec<_>>()
                .into(),
        }
    }
}

/// Receives the candidates [`for_each_neighbour`] finds.
pub trait NeighbourSink {
    /// Called for each candidate `j` (including `i` itself), in a fixed order.
    fn visit(&mut self, j: usize);
}

/// Visits every particle in the 27 cells around particle `i` (sorted order,
/// `cell_start` from the counting sort), z outer, then y, then x — the order
/// `compute_forces` in `forces.wgsl` uses. Dense grids visit each row of three
/// cells as one contiguous range; hashed grids skip particles of other cells
/// that share a bucket.
#[inline]
pub fn for_each_neighbour<S: NeighbourSink>(
    grid: &GridSpec,
    cell_start: &[u32],
    pos: &[[f32; 4]],
    i: usize,
    sink: &mut S,
) {
    let p = pos[i];
    let c = grid.cell_coord([p[0], p[1], p[2]]);
    let dims = grid.dims;
    if grid.is_periodic() {
        // The 27 cells one by one, coordinates wrapped along the periodic
        // axes (a wrapped row of cells is not one range of keys).
        for dz in -1..=1i32 {
            for dy in -1..=1i32 {
                'cells: for dx in -1..=1i32 {
                    let mut cc = [c[0] + dx, c[1] + dy, c[2] + dz];
                    for a in 0..3 {
                        if grid.period[a] > 0.0 {
                            cc[a] = cc[a].rem_euclid(dims[a]);
                        } else if !grid.hashed && (cc[a] < 0 || cc[a] >= dims[a]) {
                            continue 'cells;
                        }
                    }
                    let k = grid.cell_key(cc) as usize;
                    for j in cell_start[k]..cell_start[k + 1] {
                        let q = pos[j as usize];
                        if !grid.hashed || grid.cell_coord([q[0], q[1], q[2]]) == cc {
                            sink.visit(j as usize);
                        }
                    }
                }
            }
        }
        return;
    }
    for dz in -1..=1i32 {
        for dy in -1..=1i32 {
            if grid.hashed {
                for dx in -1..=1i32 {
                    let cc = [
                        c[0].wrapping_add(dx),
                        c[1].wrapping_add(dy),
                        c[2].wrapping_add(dz),
                    ];
                    let k = grid.cell_key(cc) as usize;
                    for j in cell_start[k]..cell_start[k + 1] {
                        let q = pos[j as usize];
                        if grid.cell_coord([q[0], q[1], q[2]]) == cc {
                            sink.visit(j as usize);
                        }
                    }
                }
            } else {
                let (cy, cz) = (c[1] + dy, c[2] + dz);
                if cy < 0 || cy >= dims[1] || cz < 0 || cz >= dims[2] {
                    continue;
                }
                let x0 = (c[0] - 1).max(0);
                let x1 = (c[0] + 1).min(dims[0] - 1);
                let k0 = grid.cell_key([x0, cy, cz]) as usize;
                let k1 = grid.cell_key([x1, cy, cz]) as usize;
                for j in cell_start[k0]..cell_start[k1 + 1] {
                    sink.visit(j as usize);
                }
            }
        }
    }
}
