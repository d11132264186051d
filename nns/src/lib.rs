//! Out-of-core epsilon-nearest-neighbour search (Kim et al., HPG 2014):
//! every point's neighbours within `eps`, for more points than the device
//! holds at once.
//!
//! 1. [`grid::CellGrid`]: a uniform grid of cells at least `eps` wide, points
//!    counting-sorted by cell.
//! 2. The expected-neighbour model (`pellet_formats::estimate`, from the
//!    overlap table) gives each cell's expected neighbours; [`tree`] builds
//!    the workload tree over boxes of cells and picks the front: the largest
//!    boxes whose estimated device footprint fits the budget.
//! 3. [`schedule`] shares the blocks between the GPU and CPU threads by
//!    their measured rates (one queue: the GPU takes the largest while it
//!    would finish before the CPU threads finish the rest, CPU threads the
//!    smallest). For a GPU block, the device ([`gpu::GpuSearcher`]) finds
//!    the neighbours of the points whose search sphere stays inside the
//!    block and CPU threads do the points of its face cells; CPU threads
//!    search their own blocks whole ([`cpu::search_box`], half-shell). A
//!    block whose real output overflows its allocation is split and redone.
//!    Without a GPU, or when the adapter runs on the host's own cores and
//!    is the slower, CPU threads search the whole grid at once
//!    ([`cpu::search_all`]).
//! 4. The lists are assembled in input order as CSR ([`Neighbours`]).
//!
//! Results are exact: the pairs whose squared distance (summed in f64) is at
//! most `eps^2`, whatever the blocks; tests compare with brute force.

pub mod cpu;
pub mod generate;
pub mod gpu;
pub mod grid;
pub mod kernel;
pub mod model;
pub mod output;
pub mod schedule;
pub(crate) mod simd;
pub mod tree;

pub use simd::simd_level;

use std::sync::Arc;
use std::time::Instant;

use pellet_formats::assets::OverlapTable;
use thiserror::Error;

use cpu::Lists;
use gpu::{BlockCost, GpuSearcher};
use grid::CellGrid;
pub use model::EstimateMode;
use pellet_gpu::{Gpu, GpuError};
pub use schedule::{Schedule, Share};
use tree::{Block, Footprint, Workload};

/// Why a search could not run.
#[derive(Debug, Error)]
pub enum NnsError {
    /// More points than the search indexes.
    #[error("{points} points: at most {max} are supported")]
    TooManyPoints {
        /// Points given.
        points: u64,
        /// The most supported.
        max: u64,
    },
    /// A point with a NaN or infinite coordinate.
    #[error("point {index} has a coordinate that is not finite")]
    NonFinitePoint {
        /// Index of the point.
        index: u64,
    },
    /// A search radius that is not a positive number.
    #[error("the radius must be a positive number, not {0}")]
    BadRadius(f32),
    /// A point distribution name that is not one of the generators'.
    #[error("unknown distribution {name:?} (one of {known})")]
    UnknownDistribution {
        /// The name given.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// One cell of the grid alone needs more than a block may use.
    #[error(
        "one cell holds {points} points and needs about {bytes} bytes, more than the {budget} bytes a block may use (half the device budget: two blocks are resident at once)"
    )]
    CellTooLarge {
        /// Points in the cell.
        points: u64,
        /// Its estimated footprint, bytes.
        bytes: u64,
        /// Bytes one block may use.
        budget: u64,
    },
    /// A fixed block (`--block N`) needs more than a block may use.
    #[error(
        "a fixed block of {side}^3 cells at {at:?} needs about {bytes} bytes, more than the {budget} bytes a block may use (half the device budget: two blocks are resident at once); use smaller blocks or --block auto"
    )]
    FixedBlockTooLarge {
        /// Cells per side.
        side: u32,
        /// Its first cell.
        at: [u32; 3],
        /// Its estimated footprint, bytes.
        bytes: u64,
        /// Bytes one block may use.
        budget: u64,
    },
    /// A search thread panicked (a bug).
    #[error("a search thread panicked")]
    ThreadPanicked,
    /// The assembled lists do not cover every point once (a bug).
    #[error("internal: {searched} searches for {points} points (first unsearched: {missing:?})")]
    Incomplete {
        /// Searches done.
        searched: u64,
        /// Points.
        points: u64,
        /// The first point with no search, if any.
        missing: Option<u64>,
    },
    /// The GPU failed.
    #[error("GPU: {0}")]
    Gpu(#[from] GpuError),
}

/// How blocks are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockMode {
    /// The workload tree: the largest boxes that fit the budget.
    Auto,
    /// Boxes of this many cells per side (the paper's fixed blocks).
    Fixed(u32),
}

/// Search settings.
#[derive(Debug, Clone)]
pub struct NnsOptions {
    /// Search radius `eps`, metres (or the points' units).
    pub radius: f32,
    /// Device memory the blocks may use, bytes. Default 1 GiB.
    pub device_budget: u64,
    /// CPU threads for boundary points (and everything without a GPU).
    pub threads: usize,
    /// Block choice. Default auto.
    pub block: BlockMode,
    /// How expected neighbours are estimated. Default: fitted.
    pub estimate: EstimateMode,
    /// How blocks are shared between the GPU and CPU threads. Default: auto.
    pub schedule: Schedule,
    /// Safety margin per point, in neighbours, on top of the expected count
    /// (the paper's `4.8 x RMSE`). Default: 4.8 x the RMSE measured on the
    /// fitting sample (at least 1), or 4.8 x (1 + 10 % of the mean expected
    /// count) when the error is not measured.
    pub aux_neighbours: Option<f64>,
}

impl Default for NnsOptions {
    fn default() -> Self {
        Self {
            radius: 1.0,
            device_budget: 1 << 30,
            threads: std::thread::available_parallelism().map_or(1, usize::from),
            block: BlockMode::Auto,
            estimate: EstimateMode::default(),
            aux_neighbours: None,
            schedule: Schedule::default(),
        }
    }
}

/// Neighbour lists in CSR form, in input order: the neighbours of point `i`
/// are `indices[offsets[i]..offsets[i + 1]]` (input indices, the point
/// itself excluded, in no particular order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Neighbours {
    /// `points + 1` offsets into `indices`.
    pub offsets: Vec<u64>,
    /// The lists, one after another.
    pub indices: Vec<u32>,
}

impl Neighbours {
    /// Points.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether there are no points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The neighbours of point `i`.
    pub fn of(&self, i: usize) -> &[u32] {
        &self.indices[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Each list sorted (for comparisons).
    pub fn sorted(mut self) -> Self {
        for i in 0..self.len() {
            let (a, b) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
            self.indices[a..b].sort_unstable();
        }
        self
    }
}

/// One block in the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BlockReport {
    /// The block.
    #[serde(flatten)]
    pub block: Block,
    /// Neighbours its inner points really have.
    pub real_neighbours: u64,
    /// What it cost.
    #[serde(flatten)]
    pub cost: BlockCost,
}

/// Seconds per phase.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Phases {
    /// Sorting points into cells.
    pub grid_s: f64,
    /// Expected neighbours per cell and the workload tree.
    pub plan_s: f64,
    /// The search (GPU blocks and CPU threads together).
    pub search_s: f64,
    /// Assembling the CSR lists.
    pub assemble_s: f64,
}

/// What a search did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct NnsReport {
    /// Points.
    pub points: u64,
    /// Search radius.
    pub radius: f32,
    /// Neighbours found (each pair counted from both sides).
    pub neighbours: u64,
    /// Grid cells along x, y, z, and the cell edge.
    pub grid_dims: [u32; 3],
    /// Cell edge.
    pub cell: f64,
    /// `eps / cell`, the table ratio used.
    pub ratio: f64,
    /// Mean expected neighbours per point (the model; `None` without a GPU,
    /// where nothing is planned).
    pub expected_mean: Option<f64>,
    /// The estimate: `table`, `fitted`, or `none` (CPU threads only).
    pub estimate: String,
    /// The fitted weights, when the estimate was fitted.
    pub fit: Option<pellet_formats::estimate::fit::FittedEstimate>,
    /// RMSE of the estimate per cell mean on the fitting sample, neighbours.
    pub measured_rmse: Option<f64>,
    /// Safety margin used per inner point, neighbours.
    pub aux_neighbours: f64,
    /// Where the search ran: `gpu` or `cpu`.
    pub backend: String,
    /// Device budget, bytes.
    pub device_budget: u64,
    /// Block mode: `auto` or `fixed:N`.
    pub block_mode: String,
    /// Blocks searched (after splits).
    pub blocks: usize,
    /// Blocks split because their output overflowed the estimate.
    pub splits: usize,
    /// Points searched on the GPU.
    pub gpu_points: u64,
    /// Points searched on CPU threads.
    pub cpu_points: u64,
    /// Seconds the GPU side was busy.
    pub gpu_s: f64,
    /// Seconds of CPU-thread search, summed over threads.
    pub cpu_thread_s: f64,
    /// Bytes uploaded to the device.
    pub bytes_up: u64,
    /// Bytes read back.
    pub bytes_down: u64,
    /// Time per phase.
    pub phases: Phases,
    /// Total seconds.
    pub total_s: f64,
    /// Queries (points) per second over the whole search.
    pub queries_per_s: f64,
    /// How blocks were shared: `auto`, `rates` or `gpu`.
    pub schedule: String,
    /// What the schedule decided, in words.
    pub decision: String,
    /// The GPU's share: points, blocks, busy and idle seconds, rate.
    pub gpu: Share,
    /// CPU threads' share (blocks and faces).
    pub cpu: Share,
    /// Peak resident memory of the process, bytes (Linux).
    pub peak_memory_bytes: Option<u64>,
    /// Every block.
    pub block_list: Vec<BlockReport>,
}

impl NnsReport {
    /// How the points were shared, in one sentence: each processor's
    /// points, blocks, rate and idle time (`player nns --report` and the
    /// benchmark rows print it).
    pub fn split(&self) -> String {
        let (g, c) = (&self.gpu, &self.cpu);
        format!(
            "GPU {} points in {} blocks at {:.2} M/s (idle {:.2} s), CPU threads {} points ({} whole blocks) at {:.2} M/s (idle {:.2} s)",
            g.points,
            g.blocks,
            g.rate / 1e6,
            g.idle_s,
            c.points,
            c.blocks,
            c.rate / 1e6,
            c.idle_s
        )
    }
}

/// Finds every point's neighbours within `options.radius`: on `gpu` in
/// blocks that fit `options.device_budget` with CPU threads alongside, or
/// on CPU threads only when `gpu` is `None`. `table` is the overlap table
/// that sizes the blocks.
pub fn search(
    points: &[[f32; 3]],
    options: &NnsOptions,
    table: &OverlapTable,
    gpu: Option<Arc<Gpu>>,
) -> Result<(Neighbours, NnsReport), NnsError> {
    let total_start = Instant::now();
    if !(options.radius.is_finite() && options.radius > 0.0) {
        return Err(NnsError::BadRadius(options.radius));
    }
    let threads = options.threads.max(1);
    let mut report = NnsReport {
        points: points.len() as u64,
        radius: options.radius,
        device_budget: options.device_budget,
        block_mode: match options.block {
            BlockMode::Auto => "auto".into(),
            BlockMode::Fixed(n) => format!("fixed:{n}"),
        },
        backend: if gpu.is_some() { "gpu" } else { "cpu" }.into(),
        ..Default::default()
    };
    let started = Instant::now();
    let max_cells = (points.len() as u64 * 4).max(1 << 16);
    let grid = CellGrid::new(points, options.radius, max_cells, threads)?;
    report.phases.grid_s = started.elapsed().as_secs_f64();
    report.grid_dims = grid.dims;
    report.cell = grid.cell;
    let eps2 = f64::from(options.radius) * f64::from(options.radius);

    report.ratio = f64::from(options.radius) / grid.cell;
    report.schedule = options.schedule.name().into();
    let Some(gpu) = gpu else {
        // CPU threads only: the whole grid as one box, half-shell, written
        // straight into input order.
        let neighbours = cpu_alone(&grid, eps2, threads, &mut report);
        return Ok(finish(neighbours, report, total_start));
    };
    if options.schedule == Schedule::Auto && schedule::shares_host_cores(&gpu) {
        // The "GPU" is these same cores: sharing them cannot beat CPU
        // threads alone (docs/nns.md measures it).
        report.decision = format!(
            "the adapter ({}) runs on this machine's CPU cores, so GPU work would only take them from the CPU threads: CPU threads searched everything (--schedule rates or gpu use it anyway)",
            gpu.adapter.get_info().name
        );
        let neighbours = cpu_alone(&grid, eps2, threads, &mut report);
        return Ok(finish(neighbours, report, total_start));
    }
    let searcher = GpuSearcher::new(gpu.clone())?;
    let by_rates = options.schedule != Schedule::Gpu;

    let started = Instant::now();
    let model::CellEstimate {
        expected,
        fit,
        measured_rmse,
    } = model::estimate(&grid, table, options.radius, options.estimate, threads);
    report.estimate = match options.estimate {
        EstimateMode::Table => "table",
        EstimateMode::Fitted => "fitted",
    }
    .into();
    report.fit = fit;
    report.measured_rmse = measured_rmse;
    let total_expected: f64 = grid
        .counts()
        .iter()
        .zip(&expected)
        .map(|(&n, e)| f64::from(n) * e)
        .sum();
    let mean = total_expected / points.len().max(1) as f64;
    report.expected_mean = Some(mean);
    let work = Workload::new(&grid, &expected);
    report.aux_neighbours = options.aux_neighbours.unwrap_or(match measured_rmse {
        Some(rmse) => (4.8 * rmse).max(1.0),
        None => 4.8 * (1.0 + 0.1 * mean),
    });
    let model = Footprint {
        aux_neighbours: report.aux_neighbours,
        max_binding: gpu.device.limits().max_storage_buffer_binding_size,
    };
    // Two blocks are resident at once (double buffering): each gets half.
    let mut blocks = match options.block {
        BlockMode::Auto => tree::plan_auto(&work, grid.dims, &model, options.device_budget / 2)?,
        BlockMode::Fixed(side) => {
            tree::plan_fixed(&work, grid.dims, &model, options.device_budget / 2, side)?
        }
    };
    if by_rates && options.block == BlockMode::Auto {
        // Enough blocks for the queue to balance the two.
        let most = (points.len() as u64 / 16).max(1);
        blocks = schedule::refine(blocks, &work, grid.dims, &model, most);
    }
    report.phases.plan_s = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let outcome = schedule::run(
        &grid, blocks, &work, &model, &searcher, eps2, threads, by_rates,
    )?;
    report.phases.search_s = started.elapsed().as_secs_f64();
    report.splits = outcome.splits;
    for (block, real_neighbours, cost) in &outcome.gpu_blocks {
        report.bytes_up += cost.bytes_up;
        report.bytes_down += cost.bytes_down;
        report.block_list.push(BlockReport {
            block: *block,
            real_neighbours: *real_neighbours,
            cost: *cost,
        });
    }
    report.blocks = report.block_list.len();
    report.gpu = outcome.gpu;
    report.cpu = outcome.cpu;
    report.gpu_points = outcome.gpu.points;
    report.cpu_points = outcome.cpu.points;
    report.gpu_s = outcome.gpu.busy_s;
    report.cpu_thread_s = outcome.cpu.busy_s;

    let started = Instant::now();
    let neighbours = assemble(points.len(), outcome.lists.into_iter())?;
    report.phases.assemble_s = started.elapsed().as_secs_f64();
    Ok(finish(neighbours, report, total_start))
}

/// CPU threads search the whole grid at once (half-shell, lists straight
/// into input order); the report gets their share.
fn cpu_alone(grid: &CellGrid, eps2: f64, threads: usize, report: &mut NnsReport) -> Neighbours {
    let started = Instant::now();
    report.estimate = "none".into();
    let neighbours = cpu::search_all(grid, eps2, threads);
    report.phases.search_s = started.elapsed().as_secs_f64();
    report.cpu.points = grid.len() as u64;
    report.cpu.busy_s = report.phases.search_s * threads as f64;
    report.cpu.rate = grid.len() as f64 / report.phases.search_s.max(1e-9);
    report.cpu_points = report.cpu.points;
    report.cpu_thread_s = report.cpu.busy_s;
    neighbours
}

/// The report's totals, and the lists.
fn finish(
    neighbours: Neighbours,
    mut report: NnsReport,
    total_start: Instant,
) -> (Neighbours, NnsReport) {
    report.neighbours = neighbours.indices.len() as u64;
    report.total_s = total_start.elapsed().as_secs_f64();
    report.queries_per_s = report.points as f64 / report.total_s.max(1e-12);
    report.peak_memory_bytes = peak_memory_bytes();
    (neighbours, report)
}

/// The process's peak resident memory so far, bytes (Linux: `VmHWM`;
/// `None` elsewhere).
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The cells of `b`'s outer layer (those not inner), non-empty only.
pub(crate) fn boundary_cells(grid: &CellGrid, b: &Block, out: &mut Vec<usize>) {
    let (ilo, ihi) = b.inner(grid.dims);
    for z in b.lo[2]..b.hi[2] {
        for y in b.lo[1]..b.hi[1] {
            for x in b.lo[0]..b.hi[0] {
                let inner = x >= ilo[0]
                    && x < ihi[0]
                    && y >= ilo[1]
                    && y < ihi[1]
                    && z >= ilo[2]
                    && z < ihi[2];
                let c = grid.index([x, y, z]);
                if !inner && grid.starts[c + 1] > grid.starts[c] {
                    out.push(c);
                }
            }
        }
    }
}

/// CSR in input order from lists in any order; every point must appear once.
fn assemble(n: usize, parts: impl Iterator<Item = Lists>) -> Result<Neighbours, NnsError> {
    use rayon::prelude::*;
    let parts: Vec<Lists> = parts.collect();
    // Threads own contiguous ranges of points (and so of the output); each
    // scans every part and takes the lists of its own points.
    let threads = rayon::current_num_threads().max(1);
    let chunk = n.div_ceil(threads).max(1);
    let mut counts = vec![u32::MAX; n];
    counts
        .par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(t, mine)| {
            let base = t * chunk;
            for p in &parts {
                for (&id, &c) in p.ids.iter().zip(&p.counts) {
                    if let Some(slot) = (id as usize)
                        .checked_sub(base)
                        .and_then(|i| mine.get_mut(i))
                    {
                        *slot = c;
                    }
                }
            }
        });
    let searched: usize = parts.iter().map(|p| p.ids.len()).sum();
    let missing = counts.iter().position(|&c| c == u32::MAX);
    if missing.is_some() || searched != n {
        return Err(NnsError::Incomplete {
            searched: searched as u64,
            points: n as u64,
            missing: missing.map(|m| m as u64),
        });
    }
    let mut offsets = Vec::with_capacity(n + 1);
    let mut at = 0u64;
    offsets.push(0);
    for &c in &counts {
        at += u64::from(c);
        offsets.push(at);
    }
    drop(counts);
    let mut indices = vec![0u32; at as usize];
    // Split the output at the thread boundaries.
    let mut slices = Vec::with_capacity(threads);
    let mut rest: &mut [u32] = &mut indices;
    for t in 0..threads {
        let (lo, hi) = ((t * chunk).min(n), ((t + 1) * chunk).min(n));
        let (mine, tail) =
            std::mem::take(&mut rest).split_at_mut((offsets[hi] - offsets[lo]) as usize);
        rest = tail;
        slices.push((lo, hi, mine));
    }
    slices.into_par_iter().for_each(|(lo, hi, out)| {
        let base = offsets[lo];
        for p in &parts {
            let mut from = 0usize;
            for (&id, &c) in p.ids.iter().zip(&p.counts) {
                let (id, c) = (id as usize, c as usize);
                if id >= lo && id < hi {
                    let to = (offsets[id] - base) as usize;
                    out[to..to + c].copy_from_slice(&p.indices[from..from + c]);
                }
                from += c;
            }
        }
    });
    Ok(Neighbours { offsets, indices })
}
