//! Block-wise stepping, for scenes whose state does not fit the device
//! budget (the simulation side of the out-of-core issue).
//!
//! The state lives on the host, in the CPU engine ([`PairListSim`]), which
//! also keeps the neighbour list with its skin (sorted and rebuilt only when
//! a particle has moved half the skin), integrates and moves the bodies. The
//! force evaluation runs on the GPU block by block, with the in-core pair
//! path's kernels (`pair_forces`, `particle_forces`) on the host's list:
//! 1. The build sorts the particles by layers of cells along the major axis
//!    (cells of edge `d_max + skin`), and a listed pair reaches at most the
//!    next layer. [`plan_layers`] cuts the layers into runs whose particles,
//!    with one layer of halo on each side, and whose pairs fit the device.
//! 2. Each block uploads its particles and halo as they lie in host memory,
//!    the pairs owned by the layer before it and by its own particles (with
//!    their constants and springs), and the partner index of its own
//!    particles; indices are made local to the block.
//! 3. `pair_forces` evaluates every uploaded pair; `particle_forces` sums,
//!    for the block's own particles only, gravity, their pairs in list order
//!    and their walls. Pairs owned by the layer before are evaluated again
//!    here from the same inputs (the springs of the evaluation's start), so
//!    a particle's force is the same whatever the blocks.
//! 4. Forces, torques, the springs of the block's own pairs and its wall
//!    springs come back into the host state.
//!
//! Every particle's sum has the order of the list: the forces are
//! bit-identical however the scene is cut into blocks, and bit-identical
//! to the in-core kernels on the same list (`tests/sim_blocks.rs`). The
//! device holds one block at a time: its buffers are sized once for the
//! largest block the budget allows.
//!
//! Limits: one layer of cells with its two neighbours must fit the budget.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use pellet_formats::scene::Integrator;
use pellet_gpu::Gpu;

use super::gpu::{GpuSim, PairBlockInput};
use super::pairlist::{ForceSource, PairListSim};
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
    block_device_bytes(setup, setup.particles.len() as u64)
}

/// Device bytes of the block device for `n` particles: the in-core
/// pair-list model, with the cell tables of the whole scene (an upper bound
/// for a hashed grid, whose tables follow the particle count).
fn block_device_bytes(setup: &SimSetup, n: u64) -> u64 {
    let walls = setup.walls.len() as u64;
    // Rolling resistance: the torque per pair, and (epsd2) the stored
    // torques of the list, of the last one and at each wall.
    let (roll_pair, roll_walls) = match setup.rolling_model {
        crate::stages::common::ROLL_NONE => (0, 0),
        crate::stages::common::ROLL_EPSD2 => (48, 2 * 16 * walls),
        _ => (16, 0),
    };
    let rows = 5 * 4 + 16 + 4 + 2 * 16 * walls + roll_walls;
    let pairs = (8 * n).max(1024) * (BYTES_PER_PAIR + roll_pair);
    let cells = setup
        .for_pair_list()
        .map(|s| fixed_bytes(&s))
        .unwrap_or_else(|_| fixed_bytes(setup));
    cells + n * (bytes_per_particle(1, setup.integrator) + rows) + pairs + 2 * (n + 1) / 255 * 12
}

/// The budget in bytes that holds blocks of `particles` (with their halo)
/// at once: the inverse of what [`BlockSim::new`] makes of a budget.
pub fn budget_for_block(setup: &SimSetup, particles: u64) -> u64 {
    block_device_bytes(setup, particles)
}

/// One block: the particles it computes (`inner`) and those it uploads
/// (`halo`, which contains `inner`), as ranges of the host's sorted order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerBlock {
    /// First and one-past-last layer of cells it computes.
    pub layers: (u32, u32),
    /// Sorted particles it computes.
    pub inner: std::ops::Range<usize>,
    /// Sorted particles it uploads: `inner` and one layer on each side.
    pub halo: std::ops::Range<usize>,
    /// Listed pairs it uploads: those owned by the layer before and by
    /// `inner` (whose partners all lie in `halo`).
    pub pairs: std::ops::Range<usize>,
}

/// Cuts the layers of a list (`layer_start`: first particle of each layer,
/// `n` at the end; `row`: the pair rows) into runs whose particles, with one
/// layer of halo on each side, number at most `capacity`, and whose pairs
/// number at most `pair_capacity`.
pub fn plan_layers(
    layer_start: &[u32],
    row: &[u32],
    capacity: usize,
    pair_capacity: usize,
) -> Result<Vec<LayerBlock>, SimError> {
    let layers = layer_start.len().saturating_sub(1) as u32;
    let at = |z: u32| layer_start[z.min(layers) as usize] as usize;
    let halo = |z0: u32, z1: u32| at(z0.saturating_sub(1))..at(z1 + 1);
    let pairs = |z0: u32, z1: u32| row[at(z0.saturating_sub(1))] as usize..row[at(z1)] as usize;
    let fits =
        |z0: u32, z1: u32| halo(z0, z1).len() <= capacity && pairs(z0, z1).len() <= pair_capacity;
    let mut blocks = Vec::new();
    let mut z0 = 0;
    while z0 < layers {
        let mut z1 = z0 + 1;
        if !fits(z0, z1) {
            return Err(SimError::SlabTooLarge {
                particles: halo(z0, z1).len(),
                pairs: pairs(z0, z1).len(),
                capacity,
                pair_capacity,
            });
        }
        while z1 < layers && fits(z0, z1 + 1) {
            z1 += 1;
        }
        blocks.push(LayerBlock {
            layers: (z0, z1),
            inner: at(z0)..at(z1),
            halo: halo(z0, z1),
            pairs: pairs(z0, z1),
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
    /// Listed pairs one block may upload.
    pub pair_capacity: usize,
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
    /// Seconds in host work (integration, list builds, bodies).
    pub host_s: f64,
}

/// The pairs each particle is the partner of, in list order (CSR by
/// particle): what `particle_forces` subtracts.
#[derive(Debug, Default)]
struct PartnerIndex {
    /// Entries of particle `i` are `start[i]..start[i + 1]`.
    start: Vec<u32>,
    /// Pair index of each entry.
    pair: Vec<u32>,
    /// The list build this index belongs to.
    build: u64,
}

impl PartnerIndex {
    fn rebuild(&mut self, partner: &[u32], n: usize, build: u64) {
        self.start.clear();
        self.start.resize(n + 1, 0);
        for &j in partner {
            self.start[j as usize + 1] += 1;
        }
        for i in 0..n {
            self.start[i + 1] += self.start[i];
        }
        let mut fill = self.start.clone();
        self.pair.clear();
        self.pair.resize(partner.len(), 0);
        for (k, &j) in partner.iter().enumerate() {
            let slot = &mut fill[j as usize];
            self.pair[*slot as usize] = k as u32;
            *slot += 1;
        }
        self.build = build;
    }
}

/// One block's upload, made local to the block (reused between blocks).
#[derive(Debug, Default)]
struct BlockBuffers {
    pair_start: Vec<u32>,
    low_start: Vec<u32>,
    low_index: Vec<u32>,
    pair_i: Vec<u32>,
    pair_j: Vec<u32>,
    pair_const: Vec<[f32; 4]>,
    pair_hist: Vec<[f32; 4]>,
    wall_mask: Vec<u32>,
    wall_hist: Vec<[f32; 4]>,
    pair_roll: Vec<[f32; 4]>,
    wall_roll: Vec<[f32; 4]>,
}

/// The GPU side of block-wise stepping: a [`ForceSource`] for the host engine.
struct BlockForces {
    device: GpuSim,
    stats: BlockStats,
    partners: PartnerIndex,
    buffers: BlockBuffers,
    /// The springs and stored rolling torques after the evaluation, filled
    /// block by block (the list keeps those of its start until all blocks
    /// have read them).
    springs: [Vec<f32>; 3],
    rolls: [Vec<f32>; 3],
}

impl BlockForces {
    /// Fills `self.buffers` for block `b` of `sim`'s list.
    fn gather(&mut self, sim: &PairListSim, b: &LayerBlock) -> Result<(), SimError> {
        let list = &sim.list;
        let wl = &sim.wall_list;
        let meta = &sim.state.meta;
        let wall_count = sim.walls.len();
        let (hs, he) = (b.halo.start, b.halo.end);
        let (is, ie) = (b.inner.start, b.inner.end);
        let k0 = b.pairs.start;
        let local = |x: u32| x - hs as u32;
        let buf = &mut self.buffers;
        buf.pair_start.clear();
        buf.pair_start
            .extend((hs..=he).map(|i| list.row[i.min(ie)] - k0 as u32));
        buf.pair_i.clear();
        buf.pair_i
            .extend(list.owner[b.pairs.clone()].iter().map(|&i| local(i)));
        buf.pair_j.clear();
        buf.pair_j
            .extend(list.partner[b.pairs.clone()].iter().map(|&j| local(j)));
        buf.pair_const.clear();
        buf.pair_const.extend(b.pairs.clone().map(|k| {
            let [kn, kt, mu] = list
                .uniform
                .unwrap_or_else(|| [list.kn[k], list.kt[k], list.mu[k]]);
            let damping = list.uniform_damping.unwrap_or_else(|| list.damping[k]);
            [kn, kt, mu, damping]
        }));
        buf.pair_hist.clear();
        buf.pair_hist.extend(b.pairs.clone().map(|k| {
            let s = &list.spring;
            let partner_id = meta[list.partner[k] as usize][0];
            [s[0][k], s[1][k], s[2][k], f32::from_bits(partner_id)]
        }));
        // Stored rolling torques (epsd2).
        buf.pair_roll.clear();
        if !list.roll[0].is_empty() {
            let r = &list.roll;
            buf.pair_roll
                .extend(b.pairs.clone().map(|k| [r[0][k], r[1][k], r[2][k], 0.0]));
        }
        // The partner index of the block's own particles.
        let p = &self.partners;
        buf.low_start.clear();
        buf.low_index.clear();
        buf.low_start.push(0);
        for i in hs..he {
            if (is..ie).contains(&i) {
                for &k in &p.pair[p.start[i] as usize..p.start[i + 1] as usize] {
                    let k = k as usize;
                    if !b.pairs.contains(&k) {
                        return Err(SimError::Unsupported(
                            "block-wise stepping: a listed pair reaches beyond the next layer of cells",
                        ));
                    }
                    buf.low_index.push((k - k0) as u32);
                }
            }
            buf.low_start.push(buf.low_index.len() as u32);
        }
        // Walls of the block's own particles, as the kernels keep them.
        let h = he - hs;
        buf.wall_mask.clear();
        buf.wall_mask.resize(h, 0);
        buf.wall_hist.clear();
        buf.wall_hist.resize(h * wall_count, [0.0; 4]);
        let wall_rolls = !wl.roll.is_empty();
        buf.wall_roll.clear();
        if wall_rolls {
            buf.wall_roll.resize(h * wall_count, [0.0; 4]);
        }
        for i in is..ie {
            let l = i - hs;
            for k in wl.row[i] as usize..wl.row[i + 1] as usize {
                let w = wl.wall[k] as usize;
                if w < 32 {
                    buf.wall_mask[l] |= 1 << w;
                }
                let s = wl.spring[k];
                buf.wall_hist[l * wall_count + w] = [s[0], s[1], s[2], 0.0];
                if wall_rolls {
                    let m = wl.roll[k];
                    buf.wall_roll[l * wall_count + w] = [m[0], m[1], m[2], 0.0];
                }
            }
        }
        Ok(())
    }
}

impl ForceSource for BlockForces {
    type Error = SimError;

    fn forces(&mut self, sim: &mut PairListSim, kind: ForceKind) -> Result<(), SimError> {
        let t = Instant::now();
        if self.partners.build != sim.rebuilds {
            let n = sim.state.len();
            self.partners.rebuild(&sim.list.partner, n, sim.rebuilds);
        }
        let blocks = plan_layers(
            &sim.list.layer_start,
            &sim.list.row,
            self.stats.capacity,
            self.stats.pair_capacity,
        )?;
        let commit = kind.mode(sim.params.dt).commit;
        let wall_count = sim.walls.len();
        self.device.set_step(sim.step);
        self.device.clear_step_counters();
        for a in 0..3 {
            self.springs[a].clone_from(&sim.list.spring[a]);
            self.rolls[a].clone_from(&sim.list.roll[a]);
        }
        for b in &blocks {
            self.gather(sim, b)?;
            let h = b.halo.clone();
            let s = &sim.state;
            let buf = &self.buffers;
            let (first, end) = (
                (b.inner.start - h.start) as u32,
                (b.inner.end - h.start) as u32,
            );
            self.device.set_particle_count(h.len() as u32);
            self.device.set_force_range(first, end);
            self.device.upload_pair_block(&PairBlockInput {
                pos: &s.pos[h.clone()],
                vel: &s.vel[h.clone()],
                angvel: &s.angvel[h.clone()],
                meta: &s.meta[h.clone()],
                pair_start: &buf.pair_start,
                low_start: &buf.low_start,
                low_index: &buf.low_index,
                pair_i: &buf.pair_i,
                pair_j: &buf.pair_j,
                pair_const: &buf.pair_const,
                pair_hist: &buf.pair_hist,
                wall_mask: &buf.wall_mask,
                wall_hist: &buf.wall_hist,
                pair_roll: &buf.pair_roll,
                wall_roll: &buf.wall_roll,
            })?;
            self.device.block_pair_forces(kind, b.pairs.len() as u32);
            // The block's own pairs: from its first particle's row on.
            let own = sim.list.row[b.inner.start] as usize..b.pairs.end;
            let local = (own.start - b.pairs.start) as u32..(own.end - b.pairs.start) as u32;
            let local = if commit {
                local
            } else {
                local.start..local.start
            };
            let out = self.device.download_pair_block(first, end, local)?;
            let i = b.inner.clone();
            let s = &mut sim.state;
            s.force[i.clone()].copy_from_slice(&out.force);
            s.torque[i.clone()].copy_from_slice(&out.torque);
            for (k, x) in own.clone().zip(&out.pair_hist) {
                for a in 0..3 {
                    self.springs[a][k] = x[a];
                }
            }
            for (k, x) in own.clone().zip(&out.pair_roll) {
                for a in 0..3 {
                    self.rolls[a][k] = x[a];
                }
            }
            if commit {
                let wl = &mut sim.wall_list;
                for p in i.clone() {
                    let l = p - i.start;
                    for k in wl.row[p] as usize..wl.row[p + 1] as usize {
                        let x = out.wall_hist[l * wall_count + wl.wall[k] as usize];
                        wl.spring[k] = [x[0], x[1], x[2]];
                        if let Some(m) = out.wall_roll.get(l * wall_count + wl.wall[k] as usize) {
                            wl.roll[k] = [m[0], m[1], m[2]];
                        }
                    }
                }
            }
            let stats = &mut self.stats;
            let pairs = b.pairs.len() as u64;
            stats.bytes_up += h.len() as u64 * (4 * 16 + 2 * 4 + 4 + 16 * wall_count as u64)
                + pairs * (4 + 4 + 16 + 16)
                + buf.low_index.len() as u64 * 4;
            stats.bytes_down += i.len() as u64 * (2 * 16 + 16 * wall_count as u64)
                + out.pair_hist.len() as u64 * 16;
            stats.halo_particles += (h.len() - i.len()) as u64;
        }
        std::mem::swap(&mut sim.list.spring, &mut self.springs);
        std::mem::swap(&mut sim.list.roll, &mut self.rolls);
        // Pairs across the major axis' periodic face: on the host, after.
        let across = sim.wrap_pair_forces(kind);
        sim.counters[Counter::Contacts as usize].fetch_add(2 * across, Ordering::Relaxed);
        let c = self.device.counters()?;
        for k in [Counter::Contacts, Counter::WallContacts] {
            sim.counters[k as usize].fetch_add(c[k as usize], Ordering::Relaxed);
        }
        self.stats.blocks = blocks.len();
        self.stats.evaluations += 1;
        self.stats.block_evaluations += blocks.len() as u64;
        self.stats.device_s += t.elapsed().as_secs_f64();
        Ok(())
    }
}

/// A simulation stepped block by block: host state and lists, GPU forces.
pub struct BlockSim {
    /// The host state, lists and integration.
    pub host: PairListSim,
    forces: BlockForces,
}

impl std::fmt::Debug for BlockSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockSim")
            .field("stats", &self.forces.stats)
            .finish_non_exhaustive()
    }
}

impl BlockSim {
    /// Sets up `setup` with the device holding at most `budget` bytes.
    pub fn new(gpu: Arc<Gpu>, setup: &SimSetup, budget: u64) -> Result<Self, SimError> {
        let n = setup.particles.len() as u64;
        let fixed = block_device_bytes(setup, 0);
        if budget <= fixed {
            return Err(SimError::BudgetTooSmall { budget, fixed });
        }
        // The largest block the budget holds (the model grows with n).
        let (mut lo, mut hi) = (0u64, n.max(1));
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if block_device_bytes(setup, mid) <= budget {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let limits = gpu.device.limits();
        let binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        // The largest buffers hold 16 bytes per pair (eight per particle).
        let by_binding = binding / (8 * 16);
        let capacity = lo.min(by_binding).min(n) as usize;
        if capacity == 0 {
            return Err(SimError::BudgetTooSmall { budget, fixed });
        }
        // The device side: a pair-list simulation of `capacity` particles,
        // whose contents every block replaces.
        let mut block_setup = setup.clone();
        block_setup.particles.pos.truncate(capacity);
        block_setup.particles.vel.truncate(capacity);
        block_setup.particles.angvel.truncate(capacity);
        block_setup.particles.meta.truncate(capacity);
        block_setup.particles.local.truncate(capacity);
        let device = GpuSim::new(gpu, &block_setup)?;
        let pair_capacity = device.pair_capacity().unwrap_or(0) as usize;
        let stats = BlockStats {
            budget,
            in_core_bytes: in_core_bytes(setup),
            capacity,
            pair_capacity,
            device_bytes: device.allocated_bytes(),
            ..BlockStats::default()
        };
        Ok(Self {
            host: PairListSim::new(setup),
            forces: BlockForces {
                device,
                stats,
                partners: PartnerIndex {
                    build: u64::MAX,
                    ..PartnerIndex::default()
                },
                buffers: BlockBuffers::default(),
                springs: Default::default(),
                rolls: Default::default(),
            },
        })
    }

    /// The adapter's name.
    pub fn device_name(&self) -> String {
        self.forces.device.gpu().report.name.clone()
    }

    /// What block-wise stepping did so far.
    pub fn stats(&self) -> &BlockStats {
        &self.forces.stats
    }

    /// Builds the first list and evaluates the first forces.
    pub fn prime(&mut self) -> Result<(), SimError> {
        let t = Instant::now();
        let device_before = self.forces.stats.device_s;
        let out = self.host.prime_with(&mut self.forces);
        self.account(t, device_before);
        out
    }

    /// Takes `steps` whole steps.
    pub fn advance(&mut self, steps: u32) -> Result<(), SimError> {
        let t = Instant::now();
        let device_before = self.forces.stats.device_s;
        let out = self.host.advance_with(steps, &mut self.forces);
        self.account(t, device_before);
        out
    }

    /// Adds the host's share of the time since `t` to the statistics.
    fn account(&mut self, t: Instant, device_before: f64) {
        let stats = &mut self.forces.stats;
        let device = stats.device_s - device_before;
        stats.host_s += (t.elapsed().as_secs_f64() - device).max(0.0);
    }

    /// One force evaluation of the current state and list, block by block
    /// (tests compare it with the in-core kernels).
    pub fn evaluate(&mut self, kind: ForceKind) -> Result<(), SimError> {
        self.forces.forces(&mut self.host, kind)
    }
}
