//! The GPU side of the search: one block at a time, in two passes (count,
//! then fill at host-computed offsets), with the borderline pairs decided
//! on the CPU. `nns.wgsl` holds the kernels; `cpu.rs` is their twin.

use std::sync::Arc;
use std::time::Instant;

use pellet_gpu::wgpu::util::DeviceExt;
use pellet_gpu::{Gpu, GpuError, dispatch_2d, wgpu};

use super::NnsError;
use super::cpu::{Lists, within};
use super::grid::{CellGrid, id_of};
use super::tree::{Block, border_pairs};

const SHADER: &str = include_str!("nns.wgsl");
const WG: u32 = 256;

/// Relative half-width of the band of squared distances around eps^2 that
/// the GPU leaves to the CPU.
pub const BAND: f64 = 1.0 / 16384.0;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    dims: [u32; 3],
    n: u32,
    inner_lo: [u32; 3],
    border_cap: u32,
    inner_hi: [u32; 3],
    out_cap: u32,
    eps2_lo: f32,
    eps2_hi: f32,
    pad: [u32; 2],
}

/// What one block cost.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct BlockCost {
    /// Bytes uploaded.
    pub bytes_up: u64,
    /// Bytes read back.
    pub bytes_down: u64,
    /// Bytes the block really used on the device.
    pub real_bytes: u64,
    /// Seconds gathering the block's points on the host.
    pub gather_s: f64,
    /// Seconds on the GPU (both passes, with transfers).
    pub gpu_s: f64,
    /// Borderline pairs decided on the CPU.
    pub border_pairs: u64,
}

/// A block's outcome.
#[derive(Debug)]
pub enum BlockOutcome {
    /// The lists of the block's inner points.
    Done(Lists, BlockCost),
    /// The real output is larger than the capacity: split and redo.
    Overflow {
        /// Neighbour slots needed.
        needed: u64,
    },
}

/// Compiled kernels on one device.
#[derive(Debug)]
pub struct GpuSearcher {
    gpu: Arc<Gpu>,
    layout: wgpu::BindGroupLayout,
    count: wgpu::ComputePipeline,
    fill: wgpu::ComputePipeline,
}

impl GpuSearcher {
    /// Compiles the kernels.
    pub fn new(gpu: Arc<Gpu>) -> Result<Self, NnsError> {
        pellet_gpu::validate_wgsl("nns.wgsl", SHADER)?;
        let device = &gpu.device;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("nns.wgsl"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let entry = |binding: u32, ty: wgpu::BufferBindingType| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let read = wgpu::BufferBindingType::Storage { read_only: true };
        let write = wgpu::BufferBindingType::Storage { read_only: false };
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("nns/layout"),
            entries: &[
                entry(0, wgpu::BufferBindingType::Uniform),
                entry(1, read),
                entry(2, read),
                entry(3, read),
                entry(4, write),
                entry(5, read),
                entry(6, write),
                entry(7, write),
                entry(8, write),
            ],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("nns/pipeline-layout"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = |name: &str| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(name),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(name),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let count = pipeline("count");
        let fill = pipeline("fill");
        Ok(Self {
            gpu,
            layout,
            count,
            fill,
        })
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Searches the inner points of `block` with room for `capacity`
    /// neighbours in all: [`prepare`](Self::prepare), [`submit_count`](Self::submit_count)
    /// and [`finish`](Self::finish) in a row.
    pub fn run_block(
        &self,
        grid: &CellGrid,
        block: &Block,
        eps2: f64,
        capacity: u64,
    ) -> Result<BlockOutcome, NnsError> {
        let prepared = self.prepare(grid, block, eps2, capacity);
        self.submit_count(&prepared);
        self.finish(prepared)
    }

    /// Gathers `block`'s points and uploads them with every buffer the
    /// search needs. Done for the next block while the GPU still counts the
    /// current one (double buffering: two blocks are resident at once, so
    /// blocks are planned for half the budget).
    pub fn prepare(&self, grid: &CellGrid, block: &Block, eps2: f64, capacity: u64) -> Prepared {
        let started = Instant::now();
        let gathered = gather(grid, block);
        let n = gathered.points.len() as u32;
        let border_cap = border_pairs(u64::from(n));
        let device = &self.gpu.device;
        let (inner_lo, inner_hi) = block.inner(grid.dims);
        let local = |c: [u32; 3]| std::array::from_fn(|k| c[k] - block.lo[k]);
        let out_cap = capacity.clamp(1, u64::from(u32::MAX)) as u32;
        let params = Params {
            dims: std::array::from_fn(|k| block.hi[k] - block.lo[k]),
            n,
            inner_lo: local(inner_lo),
            border_cap: border_cap as u32,
            inner_hi: local(inner_hi),
            out_cap,
            eps2_lo: (eps2 * (1.0 - BAND)) as f32,
            eps2_hi: (eps2 * (1.0 + BAND)) as f32,
            pad: [0; 2],
        };
        let storage = wgpu::BufferUsages::STORAGE;
        let init = |label: &str, bytes: &[u8], usage: wgpu::BufferUsages| {
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: if bytes.is_empty() { &[0u8; 4] } else { bytes },
                usage,
            })
        };
        let zeroed = |label: &str, size: u64, usage: wgpu::BufferUsages| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: size.max(4),
                usage,
                mapped_at_creation: false,
            })
        };
        let copy_out = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC;
        let buffers = Buffers {
            params: init(
                "nns/params",
                bytemuck::bytes_of(&params),
                wgpu::BufferUsages::UNIFORM,
            ),
            points: init(
                "nns/points",
                bytemuck::cast_slice(&gathered.points),
                storage,
            ),
            cell_of: init(
                "nns/cell_of",
                bytemuck::cast_slice(&gathered.cell_of),
                storage,
            ),
            starts: init(
                "nns/starts",
                bytemuck::cast_slice(&gathered.starts),
                storage,
            ),
            counts: zeroed("nns/counts", u64::from(n) * 4, copy_out),
            offsets: zeroed(
                "nns/offsets",
                u64::from(n) * 4,
                storage | wgpu::BufferUsages::COPY_DST,
            ),
            out: zeroed("nns/out", u64::from(out_cap) * 4, copy_out),
            border: zeroed("nns/border", border_cap * 8, copy_out),
            border_count: zeroed("nns/border_count", 4, copy_out),
        };
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("nns/bindings"),
            layout: &self.layout,
            entries: &buffers
                .all()
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: b.as_entire_binding(),
                })
                .collect::<Vec<_>>(),
        });
        let cost = BlockCost {
            gather_s: started.elapsed().as_secs_f64(),
            bytes_up: (size_of::<Params>()
                + gathered.points.len() * 16
                + gathered.cell_of.len() * 4
                + gathered.starts.len() * 4) as u64,
            ..Default::default()
        };
        Prepared {
            gathered,
            params,
            buffers,
            bind,
            cost,
            eps2,
            submitted: Instant::now(),
        }
    }

    fn dispatch(&self, bind: &wgpu::BindGroup, n: u32, pipeline: &wgpu::ComputePipeline) {
        let groups = dispatch_2d(n.div_ceil(WG));
        let mut enc = self.gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, bind, &[]);
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        }
        self.gpu.queue.submit([enc.finish()]);
    }

    /// Starts the counting pass (returns at once).
    pub fn submit_count(&self, prepared: &Prepared) {
        if prepared.params.n > 0 {
            self.dispatch(&prepared.bind, prepared.params.n, &self.count);
        }
    }

    /// Waits for the counts, decides the borderline pairs, runs the fill
    /// pass and reads the lists back.
    pub fn finish(&self, prepared: Prepared) -> Result<BlockOutcome, NnsError> {
        let Prepared {
            gathered,
            params,
            buffers,
            bind,
            mut cost,
            eps2,
            submitted,
        } = prepared;
        let n = params.n;
        if n == 0 {
            return Ok(BlockOutcome::Done(Lists::default(), cost));
        }
        let counts: Vec<u32> = read(&self.gpu, &buffers.counts, u64::from(n))?;
        let borders: u32 = read::<u32>(&self.gpu, &buffers.border_count, 1)?[0];
        cost.bytes_down += u64::from(n) * 4 + 4;
        let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        if borders > params.border_cap {
            // More borderline pairs than room (a lattice searched at exactly
            // its spacing): treated like an overflow.
            return Ok(BlockOutcome::Overflow {
                needed: total + u64::from(borders),
            });
        }
        if total > u64::from(params.out_cap) {
            return Ok(BlockOutcome::Overflow { needed: total });
        }
        cost.bytes_down += u64::from(borders) * 8;
        let border_pairs: Vec<[u32; 2]> = read(&self.gpu, &buffers.border, u64::from(borders) * 2)?
            .chunks_exact(2)
            .map(|c: &[u32]| [c[0], c[1]])
            .collect();
        // Offsets from the counts, then the fill pass.
        let mut offsets = Vec::with_capacity(n as usize);
        let mut at = 0u32;
        for &c in &counts {
            offsets.push(at);
            at += c;
        }
        self.gpu
            .queue
            .write_buffer(&buffers.offsets, 0, bytemuck::cast_slice(&offsets));
        cost.bytes_up += u64::from(n) * 4;
        self.dispatch(&bind, n, &self.fill);
        let flat: Vec<u32> = read(&self.gpu, &buffers.out, total)?;
        cost.bytes_down += total * 4;
        cost.real_bytes =
            cost.bytes_up + u64::from(n) * 4 + total * 4 + u64::from(params.border_cap) * 8 + 4;
        cost.gpu_s = submitted.elapsed().as_secs_f64();
        // Borderline pairs, decided exactly.
        let mut extra: Vec<Vec<u32>> = vec![Vec::new(); n as usize];
        for [i, j] in &border_pairs {
            let (a, b) = (&gathered.host[*i as usize], &gathered.host[*j as usize]);
            if within(a, b, eps2) {
                extra[*i as usize].push(id_of(b));
            }
        }
        cost.border_pairs = border_pairs.len() as u64;
        // The inner points' lists, in block order.
        let mut lists = Lists::default();
        let (ilo, ihi) = (params.inner_lo, params.inner_hi);
        for i in 0..n as usize {
            let c = gathered.coords(gathered.cell_of[i]);
            if (0..3).any(|k| c[k] < ilo[k] || c[k] >= ihi[k]) {
                continue;
            }
            let (from, count) = (offsets[i] as usize, counts[i] as usize);
            lists.ids.push(id_of(&gathered.host[i]));
            lists.indices.extend_from_slice(&flat[from..from + count]);
            lists.indices.extend_from_slice(&extra[i]);
            lists.counts.push((count + extra[i].len()) as u32);
        }
        Ok(BlockOutcome::Done(lists, cost))
    }
}

/// The device buffers of one block, in binding order.
#[derive(Debug)]
struct Buffers {
    params: wgpu::Buffer,
    points: wgpu::Buffer,
    cell_of: wgpu::Buffer,
    starts: wgpu::Buffer,
    counts: wgpu::Buffer,
    offsets: wgpu::Buffer,
    out: wgpu::Buffer,
    border: wgpu::Buffer,
    border_count: wgpu::Buffer,
}

impl Buffers {
    fn all(&self) -> [&wgpu::Buffer; 9] {
        [
            &self.params,
            &self.points,
            &self.cell_of,
            &self.starts,
            &self.counts,
            &self.offsets,
            &self.out,
            &self.border,
            &self.border_count,
        ]
    }
}

/// A block uploaded and bound, ready to search.
#[derive(Debug)]
pub struct Prepared {
    gathered: Gathered,
    params: Params,
    buffers: Buffers,
    bind: wgpu::BindGroup,
    cost: BlockCost,
    eps2: f64,
    submitted: Instant,
}

/// A block's points in local cell order.
#[derive(Debug)]
struct Gathered {
    dims: [u32; 3],
    host: Vec<[f32; 4]>,
    points: Vec<[u32; 4]>,
    cell_of: Vec<u32>,
    starts: Vec<u32>,
}

impl Gathered {
    fn coords(&self, c: u32) -> [u32; 3] {
        let [nx, ny, _] = self.dims;
        [c % nx, (c / nx) % ny, c / (nx * ny)]
    }
}

/// Copies the points of `block` out of the grid, row by row of cells.
fn gather(grid: &CellGrid, block: &Block) -> Gathered {
    let dims: [u32; 3] = std::array::from_fn(|k| block.hi[k] - block.lo[k]);
    let mut host = Vec::with_capacity(block.points as usize);
    let mut cell_of = Vec::with_capacity(block.points as usize);
    let mut starts = Vec::with_capacity(block.cells() as usize + 1);
    let mut local = 0u32;
    for z in block.lo[2]..block.hi[2] {
        for y in block.lo[1]..block.hi[1] {
            for x in block.lo[0]..block.hi[0] {
                let c = grid.index([x, y, z]);
                starts.push(host.len() as u32);
                let (from, to) = (grid.starts[c] as usize, grid.starts[c + 1] as usize);
                host.extend((from..to).map(|s| grid.point(s)));
                cell_of.extend(std::iter::repeat_n(local, to - from));
                local += 1;
            }
        }
    }
    starts.push(host.len() as u32);
    let points = host
        .iter()
        .map(|p| {
            [
                p[0].to_bits(),
                p[1].to_bits(),
                p[2].to_bits(),
                p[3].to_bits(),
            ]
        })
        .collect();
    Gathered {
        dims,
        host,
        points,
        cell_of,
        starts,
    }
}

/// Reads the first `len` elements of `buffer`.
fn read<T: bytemuck::Pod>(gpu: &Gpu, buffer: &wgpu::Buffer, len: u64) -> Result<Vec<T>, NnsError> {
    let bytes = len * size_of::<T>() as u64;
    if bytes == 0 {
        return Ok(Vec::new());
    }
    let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("nns/readback"),
        size: bytes,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buffer, 0, &staging, 0, bytes);
    gpu.queue.submit([enc.finish()]);
    let slice = staging.slice(..);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    let fail = |e: String| NnsError::Gpu(GpuError::Readback(e));
    gpu.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| fail(e.to_string()))?;
    rx.recv()
        .map_err(|e| fail(e.to_string()))?
        .map_err(|e| fail(e.to_string()))?;
    let out =
        bytemuck::cast_slice::<u8, T>(&slice.get_mapped_range().map_err(|e| fail(e.to_string()))?)
            .to_vec();
    staging.unmap();
    Ok(out)
}

#[cfg(test)]
mod shader_tests {
    /// The kernels validate with naga, offline, on any machine.
    #[test]
    fn the_shader_validates() {
        pellet_gpu::validate_wgsl("nns.wgsl", super::SHADER).unwrap_or_else(|e| panic!("{e}"));
    }
}
