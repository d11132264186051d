//! Block-wise stepping, for scenes whose state does not fit the device
//! budget (the simulation side of the out-of-core issue).
//!
//! The state lives on the host, in the CPU twin's buffers, which also
//! integrate and sort ([`CpuSim`]: the same kernels, the same order). The
//! work that reads neighbours, `compute_forces`, runs on the GPU block by
//! block:
//! 1. After the host's counting sort, particles are in cell order (x fastest,
//!    then y, then z), so a run of z-slabs of cells is one contiguous range of
//!    particles. [`plan_slabs`] cuts the grid into runs of slabs whose
//!    particles, with one slab of halo on each side (every neighbour of a
//!    particle lies in its own cell or the 26 around it), fit the device.
//! 2. Each block is uploaded as it lies in host memory (no gather), the GPU
//!    sorts it (the same order: keys, then persistent ids) and evaluates the
//!    forces of the block's own particles only (`Mode.first..end`), reading
//!    the halo as neighbours.
//! 3. Forces, torques and the new contact history of the block's own
//!    particles come back into the host state.
//!
//! A particle sees exactly the candidates it sees in core, in the same
//! order, so a block's forces are bit-identical to the in-core GPU's
//! (`tests/sim_blocks.rs`). The device holds one block at a time: its
//! buffers are sized once for the largest block the budget allows.
//!
//! Limits: dense grids only (a hashed grid's keys are not slabs), and one
//! slab of cells with its two neighbours must fit the budget.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use pellet_formats::scene::Integrator;
use pellet_gpu::Gpu;

use super::cpu::CpuSim;
use super::gpu::{BlockInput, GpuSim};
use super::grid::GridSpec;
use super::{Counter, ForceKind, SimError, SimSetup};

/// Device bytes per particle of a [`GpuSim`] with `slots` history slots:
/// state, sort and reorder buffers, both history copies, RK2 copies.
pub fn bytes_per_particle(slots: u32, integrator: Integrator) -> u64 {
    let vec4 = 16u64;
    let state = 6 * vec4; // pos, vel, angvel, meta, force, torque
    let reorder = 5 * vec4 + vec4; // *_out (pos, vel, angvel, meta, local) and local
    let history = 2 * (4 + u64::from(slots) * vec4); // current and old
    let sort = 3 * 4; // keys, sorted_index, inv_index
    let partials = 1; // 8 bytes per 256 particles, rounded up
    let rk2 = if integrator == Integrator::Rk2 {
        3 * vec4
    } else {
        0
    };
    state + reorder + history + sort + partials + rk2
}

/// Device bytes that do not grow with the particles: the cell tables
/// (count, start, cursor and the prefix-sum levels) plus a margin for the
/// small buffers (parameters, walls, materials, bodies).
pub fn fixed_bytes(setup: &SimSetup) -> u64 {
    let keys = u64::from(setup.grid.num_keys) + 1;
    let scan = keys / 255 * 4 * 3 + 4096;
    let small = 64 * 1024
        + setup.bodies.len() as u64 * 3 * 160
        + (setup.walls.len() + setup.pairs.len()) as u64 * 128;
    3 * keys * 4 + scan + small
}

/// Device bytes the whole scene needs in core, sorting every step with
/// `slots` history slots ([`Listing::SortEveryStep`](crate::gpu::Listing)).
pub fn sorting_bytes(setup: &SimSetup) -> u64 {
    fixed_bytes(setup)
        + setup.particles.len() as u64 * bytes_per_particle(setup.slots, setup.integrator)
}

/// Pair buffers' bytes per pair: owner, partner, constants, spring, force,
/// torque term, partner entry, the old spring.
pub const BYTES_PER_PAIR: u64 = 4 + 4 + 16 + 16 + 16 + 16 + 4 + 16;

/// Device bytes the whole scene needs in core on the pair-list path (the
/// default): [`sorting_bytes`] with one slot, the list's rows, build
/// positions and wall springs, and the pair buffers at their first capacity
/// of eight pairs per particle (they grow if a build needs more).
pub fn in_core_bytes(setup: &SimSetup) -> u64 {
    let n = setup.particles.len() as u64;
    let walls = setup.walls.len() as u64;
    let rows = 5 * 4 + 16 + 4 + 2 * 16 * walls; // counts, starts, old starts; pos_ref; wall mask and springs
    let pairs = (8 * n).max(1024) * BYTES_PER_PAIR;
    let cells = setup
        .for_pair_list()
        .map(|s| fixed_bytes(&s))
        .unwrap_or_else(|_| fixed_bytes(setup));
    cells + n * (bytes_per_particle(1, setup.integrator) + rows) + pairs + 2 * (n + 1) / 255 * 12
}

/// One block: the particles it computes (`inner`) and those it uploads
/// (`halo`, which contains `inner`), as ranges of the host's sorted order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlabBlock {
    /// First and one-past-last z-slab of cells it computes.
    pub slabs: (u32, u32),
    /// Sorted particles it computes.
    pub inner: std::ops::Range<usize>,
    /// Sorted particles it uploads: `inner` and one slab on each side.
    pub halo: std::ops::Range<usize>,
}

/// Blocks are slabs of a dense grid's keys; a hashed grid's keys are not.
fn require_dense(grid: &GridSpec) -> Result<(), SimError> {
    if grid.hashed {
        return Err(SimError::Unsupported(
            "block-wise stepping needs a dense grid (--grid dense); this scene's grid is hashed",
        ));
    }
    Ok(())
}

/// Cuts a dense grid into runs of z-slabs whose particles, with one slab of
/// halo on each side, number at most `capacity`. `cell_start` is the
/// counting sort's table (one entry per key, plus one).
pub fn plan_slabs(
    cell_start: &[u32],
    grid: &GridSpec,
    capacity: usize,
) -> Result<Vec<SlabBlock>, SimError> {
    require_dense(grid)?;
    let slab = (grid.dims[0] as usize) * (grid.dims[1] as usize);
    let nz = grid.dims[2] as u32;
    let at = |z: u32| cell_start[(z as usize * slab).min(cell_start.len() - 1)] as usize;
    let halo = |z0: u32, z1: u32| at(z0.saturating_sub(1))..at((z1 + 1).min(nz));
    let mut blocks = Vec::new();
    let mut z0 = 0;
    while z0 < nz {
        let mut z1 = z0 + 1;
        if halo(z0, z1).len() > capacity {
            return Err(SimError::SlabTooLarge {
                particles: halo(z0, z1).len(),
                capacity,
            });
        }
        while z1 < nz && halo(z0, z1 + 1).len() <= capacity {
            z1 += 1;
        }
        blocks.push(SlabBlock {
            slabs: (z0, z1),
            inner: at(z0)..at(z1),
            halo: halo(z0, z1),
        });
        z0 = z1;
    }
    Ok(blocks)
}

/// What block-wise stepping did, for `--stats` and the run summary.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct BlockStats {
    /// Device budget, bytes.
    pub budget: u64,
    /// What the scene would need in core, bytes.
    pub in_core_bytes: u64,
    /// Particles one block may upload (inner and halo).
    pub capacity: usize,
    /// Bytes the device buffers take.
    pub device_bytes: u64,
    /// Blocks in the last force evaluation.
    pub blocks: usize,
    /// Force evaluations so far.
    pub evaluations: u64,
    /// Blocks evaluated so far.
    pub block_evaluations: u64,
    /// Halo particles uploaded on top of the inner ones, so far.
    pub halo_particles: u64,
    /// Bytes uploaded so far.
    pub bytes_up: u64,
    /// Bytes read back so far.
    pub bytes_down: u64,
    /// Seconds in block uploads, GPU work and read-backs.
    pub device_s: f64,
    /// Seconds in host work (integration, sorting, bodies).
    pub host_s: f64,
}

/// A simulation stepped block by block: host state, GPU forces.
pub struct BlockSim {
    /// The host state and kernels.
    pub host: CpuSim,
    device: GpuSim,
    /// What it did.
    pub stats: BlockStats,
}

impl std::fmt::Debug for BlockSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockSim")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl BlockSim {
    /// Sets up `setup` with the device holding at most `budget` bytes.
    pub fn new(gpu: Arc<Gpu>, setup: &SimSetup, budget: u64) -> Result<Self, SimError> {
        require_dense(&setup.grid)?;
        let per = bytes_per_particle(setup.slots, setup.integrator);
        let fixed = fixed_bytes(setup);
        let limits = gpu.device.limits();
        let binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        // The largest buffer is the history: `slots` x 16 bytes per particle.
        let by_binding = binding / (u64::from(setup.slots.max(1)) * 16);
        let by_budget = budget.saturating_sub(fixed) / per;
        let capacity = by_budget.min(by_binding).min(setup.particles.len() as u64) as usize;
        if capacity == 0 {
            return Err(SimError::BudgetTooSmall { budget, fixed });
        }
        // The device side: a simulation of `capacity` particles, whose
        // contents every block replaces.
        let mut block_setup = setup.clone();
        block_setup.particles.pos.truncate(capacity);
        block_setup.particles.vel.truncate(capacity);
        block_setup.particles.angvel.truncate(capacity);
        block_setup.particles.meta.truncate(capacity);
        block_setup.particles.local.truncate(capacity);
        let device = GpuSim::sorting(gpu, &block_setup)?;
        let stats = BlockStats {
            budget,
            in_core_bytes: in_core_bytes(setup),
            capacity,
            device_bytes: device.allocated_bytes(),
            ..BlockStats::default()
        };
        Ok(Self {
            host: CpuSim::new(setup),
            device,
            stats,
        })
    }

    /// The adapter's name.
    pub fn device_name(&self) -> String {
        self.device.gpu().report.name.clone()
    }

    /// Sorts and evaluates the first forces.
    pub fn prime(&mut self) -> Result<(), SimError> {
        self.host_work(|h| h.sort(false));
        self.forces(ForceKind::Prime)?;
        self.host_work(CpuSim::body_reduce);
        Ok(())
    }

    /// Takes `steps` whole steps, kernels in the GPU's order.
    pub fn advance(&mut self, steps: u32) -> Result<(), SimError> {
        for _ in 0..steps {
            self.host.clear_step_counters();
            match self.host.integrator {
                Integrator::VelocityVerlet => {
                    self.host_work(|h| {
                        h.verlet_begin();
                        h.body_begin();
                        h.body_particles();
                        h.sort(false);
                    });
                    self.forces(ForceKind::Commit)?;
                    self.host_work(|h| {
                        h.verlet_end();
                        h.body_reduce();
                        h.body_end();
                        h.body_particles();
                    });
                }
                Integrator::Rk2 => {
                    self.host_work(|h| h.sort(false));
                    self.forces(ForceKind::Trial)?;
                    self.host_work(|h| {
                        h.rk2_mid();
                        h.sort(true);
                    });
                    self.forces(ForceKind::Commit)?;
                    self.host_work(CpuSim::rk2_end);
                }
            }
            self.host.step += 1;
        }
        Ok(())
    }

    fn host_work(&mut self, f: impl FnOnce(&mut CpuSim)) {
        let t = Instant::now();
        f(&mut self.host);
        self.stats.host_s += t.elapsed().as_secs_f64();
    }

    /// `compute_forces` for every particle, block by block on the GPU.
    pub fn forces(&mut self, kind: ForceKind) -> Result<(), SimError> {
        let t = Instant::now();
        let blocks = plan_slabs(&self.host.cell_start, &self.host.grid, self.stats.capacity)?;
        let slots = self.host.params.slots as usize;
        self.device.set_step(self.host.step);
        self.device.clear_step_counters();
        for b in &blocks {
            let h = b.halo.clone();
            let s = &self.host.state;
            let input = BlockInput {
                pos: &s.pos[h.clone()],
                vel: &s.vel[h.clone()],
                angvel: &s.angvel[h.clone()],
                meta: &s.meta[h.clone()],
                local: &s.local[h.clone()],
                hist_count: &self.host.hist_count_old[h.clone()],
                hist: &self.host.hist_old[h.start * slots..h.end * slots],
            };
            self.device.upload_block(&input);
            let (first, end) = (
                (b.inner.start - h.start) as u32,
                (b.inner.end - h.start) as u32,
            );
            self.device.set_particle_count(h.len() as u32);
            self.device.set_force_range(first, end);
            self.device.sort_and_forces(kind);
            let out = self.device.download_forces(first, end)?;
            let i = b.inner.clone();
            let s = &mut self.host.state;
            s.force[i.clone()].copy_from_slice(&out.force);
            s.torque[i.clone()].copy_from_slice(&out.torque);
            s.hist_count[i.clone()].copy_from_slice(&out.hist_count);
            s.hist[i.start * slots..i.end * slots].copy_from_slice(&out.hist);
            let n = h.len() as u64;
            self.stats.bytes_up += n * (5 * 16 + 4 + slots as u64 * 16);
            self.stats.bytes_down += i.len() as u64 * (2 * 16 + 4 + slots as u64 * 16);
            self.stats.halo_particles += (h.len() - i.len()) as u64;
        }
        let c = self.device.counters()?;
        let host = &self.host.counters;
        host[Counter::Contacts as usize]
            .fetch_add(c[Counter::Contacts as usize], Ordering::Relaxed);
        host[Counter::WallContacts as usize]
            .fetch_add(c[Counter::WallContacts as usize], Ordering::Relaxed);
        host[Counter::Overflows as usize].store(c[Counter::Overflows as usize], Ordering::Relaxed);
        self.stats.blocks = blocks.len();
        self.stats.evaluations += 1;
        self.stats.block_evaluations += blocks.len() as u64;
        self.stats.device_s += t.elapsed().as_secs_f64();
        Ok(())
    }
}
