//! Who searches what: blocks of the workload tree shared between the GPU
//! and CPU threads by their measured rates.
//!
//! [`run`] hands out blocks from one queue, largest first to the GPU and
//! smallest first to CPU threads. The GPU calibrates on the smallest block
//! first; then it takes the next largest only while its measured rate says
//! it would finish that block before the CPU threads (at their measured
//! rate) finish everything still queued, so neither waits long for the
//! other at the end. CPU threads search a block whole (half-shell,
//!   [`crate::cpu::search_box`]); when the GPU takes a block, its inner
//!   points are searched on the device and its face cells by CPU threads,
//!   which do those first.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use super::NnsError;
use super::cpu::{self, Lists};
use super::gpu::{BlockCost, BlockOutcome, GpuSearcher};
use super::grid::CellGrid;
use super::tree::{self, Block, Footprint, Workload};

/// How blocks are shared between the GPU and CPU threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schedule {
    /// Blocks shared by measured rates ([`Schedule::Rates`]), unless the
    /// adapter runs on the host's own cores (a software rasterizer such as
    /// llvmpipe): then its work would only take cores from the CPU
    /// threads, and CPU threads search everything.
    #[default]
    Auto,
    /// Blocks shared by measured rates, whatever the adapter.
    Rates,
    /// Every block's inner points on the GPU, its faces on CPU threads (the
    /// paper's split by geometry).
    Gpu,
}

impl Schedule {
    /// The name `--schedule` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Rates => "rates",
            Self::Gpu => "gpu",
        }
    }
}

/// One processor's share of a search.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Share {
    /// Points it searched.
    pub points: u64,
    /// Blocks it searched (for CPU threads: whole blocks, not faces).
    pub blocks: u64,
    /// Seconds it was busy (summed over CPU threads).
    pub busy_s: f64,
    /// Seconds it waited for work while the search went on (summed over
    /// CPU threads).
    pub idle_s: f64,
    /// Its rate while busy, points per second (all CPU threads together).
    pub rate: f64,
}

/// Whether `gpu`'s adapter runs on the host's own cores (a software
/// rasterizer such as llvmpipe or SwiftShader): its work would take those
/// cores from the CPU threads, so the two cannot add up.
pub fn shares_host_cores(gpu: &pellet_gpu::Gpu) -> bool {
    gpu.adapter.get_info().device_type == pellet_gpu::wgpu::DeviceType::Cpu
}

/// Splits the front until no block holds more than `max_points` points, so
/// that the queue can balance the processors.
pub fn refine(
    mut blocks: Vec<Block>,
    work: &Workload,
    dims: [u32; 3],
    model: &Footprint,
    max_points: u64,
) -> Vec<Block> {
    let mut out = Vec::with_capacity(blocks.len());
    while let Some(b) = blocks.pop() {
        if b.points > max_points
            && let Some((a, c)) = tree::split(&b, work, dims, model)
        {
            blocks.push(a);
            blocks.push(c);
            continue;
        }
        if b.points > 0 {
            out.push(b);
        }
    }
    out
}

/// Face cells per job handed to a CPU thread.
const FACE_CHUNK: usize = 512;

/// A unit of work in the queue.
#[derive(Debug, Clone, Copy)]
enum Work {
    /// A block either processor may take.
    Block(Block),
    /// A block only CPU threads take (one cell that overflowed the GPU).
    CpuOnly(Block),
}

impl Work {
    fn block(&self) -> &Block {
        match self {
            Work::Block(b) | Work::CpuOnly(b) => b,
        }
    }
}

/// The shared state of a scheduled search.
struct Queue {
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    /// Blocks, largest first.
    blocks: VecDeque<Work>,
    /// Face cells of the GPU's blocks, waiting for CPU threads.
    faces: Vec<Vec<usize>>,
    /// Points in `blocks`.
    queued_points: u64,
    /// Whether the GPU takes no more work.
    gpu_done: bool,
    /// CPU threads' block points and busy seconds so far (for the rate).
    cpu_block_points: u64,
    cpu_block_s: f64,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What [`run`] produced.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The lists, in any order of parts.
    pub lists: Vec<Lists>,
    /// The GPU's share.
    pub gpu: Share,
    /// CPU threads' share (blocks and faces).
    pub cpu: Share,
    /// Each GPU block with what it cost.
    pub gpu_blocks: Vec<(Block, u64, BlockCost)>,
    /// Blocks split after overflowing on the GPU.
    pub splits: usize,
}

/// Searches `blocks` with the GPU and `threads` CPU threads sharing one
/// queue; `by_rates` false gives every block to the GPU (CPU threads then
/// do only faces). The GPU calibrates on its first (smallest) block and
/// then takes the largest while its rate says it finishes before CPU
/// threads would finish the rest at theirs.
#[allow(clippy::too_many_arguments)]
pub fn run(
    grid: &CellGrid,
    mut blocks: Vec<Block>,
    work: &Workload,
    model: &Footprint,
    searcher: &GpuSearcher,
    eps2: f64,
    threads: usize,
    by_rates: bool,
) -> Result<Outcome, NnsError> {
    blocks.sort_by(|a, b| b.points.cmp(&a.points).then(a.lo.cmp(&b.lo)));
    let queued_points = blocks.iter().map(|b| b.points).sum();
    let queue = Queue {
        state: Mutex::new(State {
            blocks: blocks.into_iter().map(Work::Block).collect(),
            faces: Vec::new(),
            queued_points,
            gpu_done: false,
            cpu_block_points: 0,
            cpu_block_s: 0.0,
        }),
        changed: Condvar::new(),
    };
    let search_started = Instant::now();
    std::thread::scope(|scope| -> Result<Outcome, NnsError> {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                let queue = &queue;
                scope.spawn(move || cpu_worker(grid, queue, eps2, by_rates))
            })
            .collect();
        let gpu_result = gpu_driver(
            grid,
            &queue,
            (work, model),
            searcher,
            eps2,
            threads.max(1) as f64,
            by_rates,
        );
        {
            let mut s = queue.lock();
            s.gpu_done = true;
        }
        queue.changed.notify_all();
        let mut out = Outcome::default();
        for w in workers {
            let (lists, share) = w.join().map_err(|_| NnsError::ThreadPanicked)?;
            out.lists.extend(lists);
            out.cpu.points += share.points;
            out.cpu.blocks += share.blocks;
            out.cpu.busy_s += share.busy_s;
            out.cpu.idle_s += share.idle_s;
        }
        let gpu = gpu_result?;
        out.lists.extend(gpu.lists);
        out.gpu = gpu.gpu;
        out.gpu.idle_s = (search_started.elapsed().as_secs_f64() - out.gpu.busy_s).max(0.0);
        out.gpu_blocks = gpu.gpu_blocks;
        out.splits = gpu.splits;
        out.cpu.rate = out.cpu.points as f64 / out.cpu.busy_s.max(1e-9) * threads.max(1) as f64;
        Ok(out)
    })
}

/// A CPU thread: faces first, then the smallest block (when sharing by
/// rates); waits while the GPU may still hand out faces.
fn cpu_worker(grid: &CellGrid, queue: &Queue, eps2: f64, by_rates: bool) -> (Vec<Lists>, Share) {
    let mut lists = Vec::new();
    let mut share = Share::default();
    loop {
        enum Job {
            Faces(Vec<usize>),
            Block(Block),
        }
        let job = {
            let mut s = queue.lock();
            loop {
                if let Some(cells) = s.faces.pop() {
                    break Some(Job::Faces(cells));
                }
                let take = match s.blocks.back() {
                    Some(Work::CpuOnly(_)) => true,
                    Some(Work::Block(_)) => by_rates || s.gpu_done,
                    None => false,
                };
                if take && let Some(w) = s.blocks.pop_back() {
                    s.queued_points -= w.block().points;
                    break Some(Job::Block(*w.block()));
                }
                if s.gpu_done && s.blocks.is_empty() {
                    break None;
                }
                let waited = Instant::now();
                s = queue
                    .changed
                    .wait(s)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                share.idle_s += waited.elapsed().as_secs_f64();
            }
        };
        let Some(job) = job else { break };
        let started = Instant::now();
        match job {
            Job::Faces(cells) => {
                let l = cpu::search_cells(grid, &cells, eps2);
                share.points += l.ids.len() as u64;
                lists.push(l);
                share.busy_s += started.elapsed().as_secs_f64();
            }
            Job::Block(b) => {
                let l = cpu::search_box(grid, b.lo, b.hi, eps2, 1);
                let seconds = started.elapsed().as_secs_f64();
                share.points += l.ids.len() as u64;
                share.blocks += 1;
                share.busy_s += seconds;
                lists.push(l);
                let mut s = queue.lock();
                s.cpu_block_points += b.points;
                s.cpu_block_s += seconds;
            }
        }
    }
    (lists, share)
}

/// What the GPU driver did.
struct GpuPart {
    lists: Vec<Lists>,
    gpu: Share,
    gpu_blocks: Vec<(Block, u64, BlockCost)>,
    splits: usize,
}

/// The GPU's loop: takes blocks while the rule allows, double-buffered (the
/// next block is gathered and uploaded while the device counts the current
/// one); hands each finished block's faces to CPU threads; pushes the
/// halves of an overflowing block back into the queue.
fn gpu_driver(
    grid: &CellGrid,
    queue: &Queue,
    (work, model): (&Workload, &Footprint),
    searcher: &GpuSearcher,
    eps2: f64,
    threads: f64,
    by_rates: bool,
) -> Result<GpuPart, NnsError> {
    let mut part = GpuPart {
        lists: Vec::new(),
        gpu: Share::default(),
        gpu_blocks: Vec::new(),
        splits: 0,
    };
    // Inner points per second, once measured.
    let mut rate: Option<f64> = None;
    let next_block = |rate: Option<f64>| -> Option<Block> {
        let mut s = queue.lock();
        let w = match rate {
            // Calibrate on the smallest block first.
            None if by_rates => {
                let i = s.blocks.iter().rposition(|w| matches!(w, Work::Block(_)))?;
                s.blocks.remove(i)?
            }
            _ => {
                let i = s.blocks.iter().position(|w| matches!(w, Work::Block(_)))?;
                let b = *s.blocks[i].block();
                if by_rates && let Some(r) = rate {
                    // CPU threads' rate, all together; unknown until one
                    // block is done (then the GPU keeps going).
                    if s.cpu_block_s > 0.0 {
                        let cpu = s.cpu_block_points as f64 / s.cpu_block_s * threads;
                        let gpu_time = b.inner_points as f64 / r.max(1e-9);
                        let cpu_time = s.queued_points as f64 / cpu.max(1e-9);
                        if gpu_time > cpu_time {
                            return None;
                        }
                    }
                }
                s.blocks.remove(i)?
            }
        };
        s.queued_points -= w.block().points;
        Some(*w.block())
    };
    let prepare = |b: Block| {
        let capacity = model.capacity(b.inner_points, b.expected);
        (b, capacity, searcher.prepare(grid, &b, eps2, capacity))
    };
    // The GPU is busy from its first block to its last (blocks overlap).
    let started = Instant::now();
    let mut next = next_block(rate).map(prepare);
    while let Some((b, capacity, current)) = next.take() {
        searcher.submit_count(&current);
        // Double buffering: the next block is gathered and uploaded while
        // the device counts this one.
        next = next_block(rate).map(prepare);
        let outcome = searcher.finish(current)?;
        part.gpu.busy_s = started.elapsed().as_secs_f64();
        match outcome {
            BlockOutcome::Done(lists, cost) => {
                part.gpu.points += lists.ids.len() as u64;
                part.gpu.blocks += 1;
                rate = Some(part.gpu.points as f64 / part.gpu.busy_s.max(1e-9));
                part.gpu_blocks.push((b, lists.indices.len() as u64, cost));
                part.lists.push(lists);
                let mut cells = Vec::new();
                super::boundary_cells(grid, &b, &mut cells);
                if !cells.is_empty() {
                    // In chunks, so that every CPU thread can help.
                    queue
                        .lock()
                        .faces
                        .extend(cells.chunks(FACE_CHUNK).map(<[usize]>::to_vec));
                    queue.changed.notify_all();
                }
            }
            BlockOutcome::Overflow { needed } => {
                part.splits += 1;
                tracing::debug!(
                    "block {:?}..{:?} needs {needed} neighbour slots, has {capacity}: split",
                    b.lo,
                    b.hi
                );
                let mut s = queue.lock();
                match tree::split(&b, work, grid.dims, model) {
                    Some((a, c)) => {
                        // Back at the front: the GPU retries them next.
                        s.queued_points += a.points + c.points;
                        s.blocks.push_front(Work::Block(c));
                        s.blocks.push_front(Work::Block(a));
                    }
                    None => {
                        s.queued_points += b.points;
                        s.blocks.push_back(Work::CpuOnly(b));
                    }
                }
                drop(s);
                queue.changed.notify_all();
            }
        }
        if next.is_none() {
            next = next_block(rate).map(prepare);
        }
    }
    part.gpu.rate = rate.unwrap_or(0.0);
    Ok(part)
}
