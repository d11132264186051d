//! [`GpuSim`]: drives `sim.wgsl`. Buffers live on the GPU for the whole run;
//! a batch of steps is one command buffer with no readback in between.
//!
//! Bindings are declared once in the shader; which ones each kernel uses is
//! read from the shader itself (naga's reflection), so a kernel's bind group
//! always matches its code.

use std::collections::BTreeMap;
use std::sync::Arc;

use pellet_formats::scene::Integrator;
use pellet_gpu::readback::read_buffer;
use pellet_gpu::wgpu::util::DeviceExt;
use pellet_gpu::{Gpu, GpuError, dispatch_2d, wgpu};

use super::body::BodyGpu;
use super::setup::{Params, SimSetup};
use super::{Counter, ForceKind, HostState, NUM_COUNTERS, SimError};

/// Every simulation kernel (`sim.wgsl`), for validation and layout tests.
pub const SHADER: &str = include_str!("sim.wgsl");
const WG: u32 = 256;

// Binding numbers of `sim.wgsl`.
const B_PARAMS: u32 = 0;
const B_MODE: u32 = 1;
const B_POS: u32 = 2;
const B_VEL: u32 = 3;
const B_ANGVEL: u32 = 4;
const B_META: u32 = 5;
const B_FORCE: u32 = 6;
const B_TORQUE: u32 = 7;
const B_HIST_COUNT: u32 = 8;
const B_HIST: u32 = 9;
const B_HIST_COUNT_OLD: u32 = 10;
const B_HIST_OLD: u32 = 11;
const B_KEYS: u32 = 12;
const B_CELL_COUNT: u32 = 13;
const B_CELL_START: u32 = 14;
const B_CURSOR: u32 = 15;
const B_SORTED_INDEX: u32 = 16;
const B_PAIRS: u32 = 17;
const B_WALLS: u32 = 18;
const B_COUNTERS: u32 = 19;
const B_CLOCK: u32 = 20;
const B_POS_OUT: u32 = 21;
const B_VEL_OUT: u32 = 22;
const B_ANGVEL_OUT: u32 = 23;
const B_META_OUT: u32 = 24;
const B_POS0: u32 = 25;
const B_VEL0: u32 = 26;
const B_ANGVEL0: u32 = 27;
const B_SCAN_LEN: u32 = 28;
const B_SCAN_IN: u32 = 29;
const B_SCAN_OUT: u32 = 30;
const B_SCAN_SUMS: u32 = 31;
const B_PARTIALS: u32 = 32;
const B_BODIES: u32 = 35;
const B_BODY_FORCE: u32 = 36;
const B_BODY_TORQUE: u32 = 37;
const B_LOCAL: u32 = 38;
const B_LOCAL_OUT: u32 = 39;
const B_INV_INDEX: u32 = 40;

const PARTICLE_KERNELS: [&str; 12] = [
    "body_particles",
    "cell_keys",
    "scatter",
    "reorder_particles",
    "reorder_rk2",
    "reorder_history",
    "compute_forces",
    "verlet_begin",
    "verlet_end",
    "rk2_mid",
    "rk2_end",
    "stats",
];

struct Kernel {
    pipeline: wgpu::ComputePipeline,
    bindings: Vec<u32>,
}

struct ScanLevel {
    len: u32,
    block: wgpu::BindGroup,
    /// Adds the level above's scanned sums back (absent on the top level).
    add: Option<wgpu::BindGroup>,
}

/// The GPU simulation's buffers and kernels.
/// A block's particles in cell order, for [`GpuSim::upload_block`].
#[derive(Debug, Clone, Copy)]
pub struct BlockInput<'a> {
    /// Positions and radii.
    pub pos: &'a [[f32; 4]],
    /// Velocities and inverse masses.
    pub vel: &'a [[f32; 4]],
    /// Angular velocities and inverse moments.
    pub angvel: &'a [[f32; 4]],
    /// Ids, materials, bodies.
    pub meta: &'a [[u32; 4]],
    /// Body offsets.
    pub local: &'a [[f32; 4]],
    /// Used history slots per particle (in this order).
    pub hist_count: &'a [u32],
    /// History, `slots` entries per particle.
    pub hist: &'a [[f32; 4]],
}

/// What [`GpuSim::download_forces`] reads back.
#[derive(Debug, Clone, Default)]
pub struct BlockOutput {
    /// Total force per particle, N.
    pub force: Vec<[f32; 4]>,
    /// Torque per particle, N m.
    pub torque: Vec<[f32; 4]>,
    /// New used history slots.
    pub hist_count: Vec<u32>,
    /// New history, `slots` per particle.
    pub hist: Vec<[f32; 4]>,
}

pub struct GpuSim {
    gpu: Arc<Gpu>,
    /// Constant parameters.
    pub params: Params,
    integrator: Integrator,
    buffers: BTreeMap<u32, wgpu::Buffer>,
    mode_buffers: [wgpu::Buffer; 3],
    kernels: BTreeMap<&'static str, Kernel>,
    groups: BTreeMap<&'static str, wgpu::BindGroup>,
    force_groups: [wgpu::BindGroup; 3],
    scan_levels: Vec<ScanLevel>,
    sort_group: wgpu::BindGroup,
    tick_group: wgpu::BindGroup,
    _scan_buffers: Vec<wgpu::Buffer>,
    step: u32,
    /// `compute_forces` evaluates particles `first..end` (all by default).
    force_range: (u32, u32),
}

impl std::fmt::Debug for GpuSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuSim")
            .field("adapter", &self.gpu.report.name)
            .field("particles", &self.params.n)
            .field("step", &self.step)
            .finish()
    }
}

/// Simulation buffers other GPU work may read (the renderer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimBuffer {
    /// `vec4<f32>` per particle: position (m), radius (m).
    Positions,
    /// `vec4<f32>` per particle: velocity (m/s), inverse mass.
    Velocities,
    /// `vec4<u32>` per particle: id, material, body, unused.
    Info,
}

/// Per body: force (N) and torque (N m).
pub type BodyForces = (Vec<[f32; 4]>, Vec<[f32; 4]>);

/// Keys (pre-sort order), cell starts and the sorted order.
pub type GridBuffers = (Vec<u32>, Vec<u32>, Vec<u32>);

/// The built-in simulation shader (`sim.wgsl`).
pub const SIM_SHADER: &str = SHADER;

pub use pellet_gpu::validate_wgsl;

/// Which bindings each entry point uses, read from the shader.
fn reflect_bindings(source: &str) -> Result<BTreeMap<String, Vec<u32>>, SimError> {
    let (module, info) = validate_wgsl("sim.wgsl", source)?;
    let mut out = BTreeMap::new();
    for (index, ep) in module.entry_points.iter().enumerate() {
        let fi = info.get_entry_point(index);
        let mut used = Vec::new();
        for (handle, var) in module.global_variables.iter() {
            if let Some(binding) = &var.binding
                && !fi[handle].is_empty()
            {
                used.push(binding.binding);
            }
        }
        used.sort_unstable();
        out.insert(ep.name.clone(), used);
    }
    Ok(out)
}

fn groups_for(count: u32) -> [u32; 3] {
    dispatch_2d(count.div_ceil(WG).max(1))
}

impl GpuSim {
    /// Uploads `setup` (particles in input order, no history) to `gpu`.
    pub fn new(gpu: Arc<Gpu>, setup: &SimSetup) -> Result<Self, SimError> {
        Self::with_shader(gpu, setup, SHADER)
    }

    /// As [`GpuSim::new`], with the kernels compiled from `source` instead of
    /// the built-in `sim.wgsl` (shader hot reload). The source is validated
    /// with naga first, and the pipelines are built inside a wgpu validation
    /// error scope: any error is returned, and nothing of the old simulation
    /// is touched.
    pub fn with_shader(gpu: Arc<Gpu>, setup: &SimSetup, source: &str) -> Result<Self, SimError> {
        let reflected = reflect_bindings(source)?;
        let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let built = Self::build(gpu.clone(), setup, source, reflected);
        let scope = pollster::block_on(scope.pop());
        match (built, scope) {
            (Err(e), _) => Err(e),
            (Ok(_), Some(e)) => Err(SimError::Invalid(format!("sim.wgsl: {e}"))),
            (Ok(sim), None) => Ok(sim),
        }
    }

    fn build(
        gpu: Arc<Gpu>,
        setup: &SimSetup,
        source: &str,
        reflected: BTreeMap<String, Vec<u32>>,
    ) -> Result<Self, SimError> {
        let device = &gpu.device;
        let params = setup.params();
        let n = params.n as usize;
        let slots = params.slots as usize;
        let keys = params.num_keys as usize;
        let limits = device.limits();
        let biggest = [
            ("contact history", (n * slots * 16) as u64),
            ("particle data", (n * 16) as u64),
            ("cell table", ((keys + 1) * 4) as u64),
        ];
        for (what, size) in biggest {
            if size > limits.max_storage_buffer_binding_size || size > limits.max_buffer_size {
                return Err(SimError::TooLarge(format!(
                    "{what} needs a {:.1} MiB buffer; this GPU ({}) binds at most {:.1} MiB (fewer particles or fewer contact_slots)",
                    size as f64 / 1048576.0,
                    gpu.report.name,
                    limits
                        .max_storage_buffer_binding_size
                        .min(limits.max_buffer_size) as f64
                        / 1048576.0
                )));
            }
        }

        let storage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST;
        let init = |label: &str, bytes: &[u8], usage: wgpu::BufferUsages| {
            // Zero-sized bindings are invalid, and a binding holds at least
            // one element of its array (a body is 160 bytes): pad small arrays.
            let mut padded;
            let contents = if bytes.len() < 256 {
                padded = bytes.to_vec();
                padded.resize(256, 0);
                &padded[..]
            } else {
                bytes
            };
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage,
            })
        };
        let zeroed = |label: &str, size: usize| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: size.max(16) as u64,
                usage: storage,
                mapped_at_creation: false,
            })
        };
        let state = HostState::new(&setup.particles, params.slots);
        let rk2 = setup.integrator == Integrator::Rk2;
        let mut counters = [0u32; NUM_COUNTERS];
        counters[Counter::NanStep as usize] = u32::MAX;
        counters[Counter::NanId as usize] = u32::MAX;
        counters[Counter::EscapeStep as usize] = u32::MAX;
        counters[Counter::EscapeId as usize] = u32::MAX;
        let mut buffers = BTreeMap::new();
        let uniform = wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST;
        buffers.insert(
            B_PARAMS,
            init("sim/params", bytemuck::bytes_of(&params), uniform),
        );
        buffers.insert(
            B_POS,
            init("sim/pos", bytemuck::cast_slice(&state.pos), storage),
        );
        buffers.insert(
            B_VEL,
            init("sim/vel", bytemuck::cast_slice(&state.vel), storage),
        );
        buffers.insert(
            B_ANGVEL,
            init("sim/angvel", bytemuck::cast_slice(&state.angvel), storage),
        );
        buffers.insert(
            B_META,
            init("sim/meta", bytemuck::cast_slice(&state.meta), storage),
        );
        buffers.insert(B_FORCE, zeroed("sim/force", n * 16));
        buffers.insert(B_TORQUE, zeroed("sim/torque", n * 16));

        buffers.insert(B_HIST_COUNT, zeroed("sim/hist_count", n * 4));
        buffers.insert(B_HIST, zeroed("sim/hist", n * slots * 16));
        buffers.insert(B_HIST_COUNT_OLD, zeroed("sim/hist_count_old", n * 4));
        buffers.insert(B_HIST_OLD, zeroed("sim/hist_old", n * slots * 16));
        buffers.insert(B_KEYS, zeroed("sim/keys", n * 4));
        buffers.insert(B_CELL_COUNT, zeroed("sim/cell_count", (keys + 1) * 4));
        buffers.insert(B_CELL_START, zeroed("sim/cell_start", (keys + 1) * 4));
        buffers.insert(B_CURSOR, zeroed("sim/cursor", keys * 4));
        buffers.insert(B_SORTED_INDEX, zeroed("sim/sorted_index", n * 4));
        buffers.insert(
            B_PAIRS,
            init("sim/pairs", bytemuck::cast_slice(&setup.pairs), storage),
        );
        buffers.insert(
            B_WALLS,
            init("sim/walls", bytemuck::cast_slice(&setup.walls), storage),
        );
        buffers.insert(
            B_COUNTERS,
            init("sim/counters", bytemuck::cast_slice(&counters), storage),
        );
        buffers.insert(B_CLOCK, zeroed("sim/clock", 16));
        buffers.insert(B_POS_OUT, zeroed("sim/pos_out", n * 16));
        buffers.insert(B_VEL_OUT, zeroed("sim/vel_out", n * 16));
        buffers.insert(B_ANGVEL_OUT, zeroed("sim/angvel_out", n * 16));
        buffers.insert(B_META_OUT, zeroed("sim/meta_out", n * 16));
        let rk2_len = if rk2 { n * 16 } else { 16 };
        buffers.insert(B_POS0, zeroed("sim/pos0", rk2_len));
        buffers.insert(B_VEL0, zeroed("sim/vel0", rk2_len));
        buffers.insert(B_ANGVEL0, zeroed("sim/angvel0", rk2_len));
        buffers.insert(
            B_PARTIALS,
            zeroed("sim/partials", n.div_ceil(WG as usize) * 8),
        );
        let bodies = setup.bodies.len();
        buffers.insert(
            B_BODIES,
            init("sim/bodies", bytemuck::cast_slice(&setup.bodies), storage),
        );
        buffers.insert(B_BODY_FORCE, zeroed("sim/body_force", bodies * 16));
        buffers.insert(B_BODY_TORQUE, zeroed("sim/body_torque", bodies * 16));
        buffers.insert(
            B_LOCAL,
            init("sim/local", bytemuck::cast_slice(&state.local), storage),
        );
        buffers.insert(B_LOCAL_OUT, zeroed("sim/local_out", n * 16));
        buffers.insert(B_INV_INDEX, zeroed("sim/inv_index", n * 4));

        let dt = params.dt;
        let modes = [(dt, 1u32), (0.5 * dt, 0), (0.0, 1)];
        let mode_buffers = modes.map(|(dt_hist, commit)| {
            let words = [dt_hist.to_bits(), commit, 0, u32::MAX];
            init("sim/mode", bytemuck::cast_slice(&words), uniform)
        });

        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("sim.wgsl"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let mut kernels = BTreeMap::new();
        for name in PARTICLE_KERNELS.iter().chain(&[
            "scan_block",
            "scan_add",
            "sort_cells",
            "tick",
            "body_begin",
            "body_end",
            "body_reduce",
        ]) {
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(name),
                layout: None,
                module: &module,
                entry_point: Some(name),
                compilation_options: Default::default(),
                cache: None,
            });
            let bindings = reflected.get(*name).cloned().unwrap_or_default();
            kernels.insert(*name, Kernel { pipeline, bindings });
        }

        let make_group = |name: &str, overrides: &[(u32, &wgpu::Buffer)]| -> wgpu::BindGroup {
            let kernel = &kernels[name];
            let entries: Vec<wgpu::BindGroupEntry<'_>> = kernel
                .bindings
                .iter()
                .map(|&b| {
                    let buffer = overrides
                        .iter()
                        .find(|(ob, _)| *ob == b)
                        .map(|(_, buf)| *buf)
                        .or_else(|| buffers.get(&b))
                        .unwrap_or_else(|| panic!("sim.wgsl binding {b} of {name} has no buffer"));
                    wgpu::BindGroupEntry {
                        binding: b,
                        resource: buffer.as_entire_binding(),
                    }
                })
                .collect();
            device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(name),
                layout: &kernel.pipeline.get_bind_group_layout(0),
                entries: &entries,
            })
        };

        let mut groups = BTreeMap::new();
        for name in PARTICLE_KERNELS {
            if name == "compute_forces" {
                continue;
            }
            groups.insert(name, make_group(name, &[(B_MODE, &mode_buffers[0])]));
        }
        let force_groups =
            [0, 1, 2].map(|k| make_group("compute_forces", &[(B_MODE, &mode_buffers[k])]));
        let sort_group = make_group("sort_cells", &[]);
        for name in ["body_begin", "body_end", "body_reduce"] {
            groups.insert(name, make_group(name, &[]));
        }
        let tick_group = make_group("tick", &[]);

        // Prefix-sum levels over cell_count (num_keys + 1 entries).
        let mut scan_buffers = Vec::new();
        let mut lens = vec![params.num_keys + 1];
        while *lens.last().unwrap_or(&1) > WG {
            let last = *lens.last().unwrap_or(&1);
            lens.push(last.div_ceil(WG));
        }
        // sums[l]: block totals of level l (= input of level l + 1); outs[l]: scan of level l.
        let sums: Vec<wgpu::Buffer> = lens
            .iter()
            .map(|&len| zeroed("sim/scan_sums", len.div_ceil(WG) as usize * 4))
            .collect();
        let outs: Vec<Option<wgpu::Buffer>> = lens
            .iter()
            .enumerate()
            .map(|(l, &len)| (l > 0).then(|| zeroed("sim/scan_out", len as usize * 4)))
            .collect();
        let len_buffers: Vec<wgpu::Buffer> = lens
            .iter()
            .map(|&len| {
                init(
                    "sim/scan_len",
                    bytemuck::cast_slice(&[len, 0, 0, 0]),
                    uniform,
                )
            })
            .collect();
        let mut scan_levels = Vec::new();
        for l in 0..lens.len() {
            let input = if l == 0 {
                &buffers[&B_CELL_COUNT]
            } else {
                &sums[l - 1]
            };
            let output = outs[l].as_ref().unwrap_or(&buffers[&B_CELL_START]);
            let block = make_group(
                "scan_block",
                &[
                    (B_SCAN_LEN, &len_buffers[l]),
                    (B_SCAN_IN, input),
                    (B_SCAN_OUT, output),
                    (B_SCAN_SUMS, &sums[l]),
                ],
            );
            let add = outs.get(l + 1).and_then(|o| o.as_ref()).map(|above| {
                make_group(
                    "scan_add",
                    &[
                        (B_SCAN_LEN, &len_buffers[l]),
                        (B_SCAN_IN, above),
                        (B_SCAN_OUT, output),
                    ],
                )
            });
            scan_levels.push(ScanLevel {
                len: lens[l],
                block,
                add,
            });
        }
        scan_buffers.extend(sums);
        scan_buffers.extend(outs.into_iter().flatten());
        scan_buffers.extend(len_buffers);

        Ok(Self {
            gpu,
            params,
            integrator: setup.integrator,
            buffers,
            mode_buffers,
            kernels,
            groups,
            force_groups,
            scan_levels,
            sort_group,
            tick_group,
            _scan_buffers: scan_buffers,
            step: 0,
            force_range: (0, u32::MAX),
        })
    }

    /// The adapter in use.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The adapter in use, shared.
    pub fn gpu_arc(&self) -> Arc<Gpu> {
        self.gpu.clone()
    }

    /// One of the particle buffers, in the current (cell) order.
    pub fn buffer(&self, which: SimBuffer) -> &wgpu::Buffer {
        let binding = match which {
            SimBuffer::Positions => B_POS,
            SimBuffer::Velocities => B_VEL,
            SimBuffer::Info => B_META,
        };
        &self.buffers[&binding]
    }

    fn dispatch(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        name: &str,
        group: &wgpu::BindGroup,
        count: u32,
    ) {
        let g = groups_for(count);
        pass.set_pipeline(&self.kernels[name].pipeline);
        pass.set_bind_group(0, group, &[]);
        pass.dispatch_workgroups(g[0], g[1], g[2]);
    }

    fn particle_kernel(&self, pass: &mut wgpu::ComputePass<'_>, name: &'static str) {
        self.dispatch(pass, name, &self.groups[name], self.params.n);
    }

    fn copy(&self, enc: &mut wgpu::CommandEncoder, from: u32, to: u32) {
        let size = self.buffers[&to].size().min(self.buffers[&from].size());
        enc.copy_buffer_to_buffer(&self.buffers[&from], 0, &self.buffers[&to], 0, size);
    }

    /// Records the counting sort (and the reorder of all particle data).
    fn encode_sort(&self, enc: &mut wgpu::CommandEncoder, rk2: bool) {
        enc.clear_buffer(&self.buffers[&B_CELL_COUNT], 0, None);
        enc.clear_buffer(&self.buffers[&B_CURSOR], 0, None);
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("sort"),
                timestamp_writes: None,
            });
            self.particle_kernel(&mut pass, "cell_keys");
            for level in &self.scan_levels {
                self.dispatch(&mut pass, "scan_block", &level.block, level.len);
            }
            for level in self.scan_levels.iter().rev() {
                if let Some(add) = &level.add {
                    self.dispatch(&mut pass, "scan_add", add, level.len);
                }
            }
            self.particle_kernel(&mut pass, "scatter");
            self.dispatch(
                &mut pass,
                "sort_cells",
                &self.sort_group,
                self.params.num_keys,
            );
            self.particle_kernel(&mut pass, "reorder_particles");
            self.particle_kernel(&mut pass, "reorder_history");
        }
        for (from, to) in [
            (B_POS_OUT, B_POS),
            (B_VEL_OUT, B_VEL),
            (B_ANGVEL_OUT, B_ANGVEL),
            (B_META_OUT, B_META),
            (B_LOCAL_OUT, B_LOCAL),
        ] {
            self.copy(enc, from, to);
        }
        if rk2 {
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("reorder_rk2"),
                    timestamp_writes: None,
                });
                self.particle_kernel(&mut pass, "reorder_rk2");
            }
            for (from, to) in [
                (B_POS_OUT, B_POS0),
                (B_VEL_OUT, B_VEL0),
                (B_ANGVEL_OUT, B_ANGVEL0),
            ] {
                self.copy(enc, from, to);
            }
        }
    }

    fn encode_pass(
        &self,
        enc: &mut wgpu::CommandEncoder,
        label: &str,
        f: impl FnOnce(&Self, &mut wgpu::ComputePass<'_>),
    ) {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(label),
            timestamp_writes: None,
        });
        f(self, &mut pass);
    }

    fn body_kernel(&self, pass: &mut wgpu::ComputePass<'_>, name: &'static str) {
        let bodies = self.params.body_count;
        if bodies == 0 {
            return;
        }
        match name {
            // One workgroup per body.
            "body_reduce" => {
                let g = dispatch_2d(bodies);
                pass.set_pipeline(&self.kernels[name].pipeline);
                pass.set_bind_group(0, &self.groups[name], &[]);
                pass.dispatch_workgroups(g[0], g[1], g[2]);
            }
            "body_particles" => self.particle_kernel(pass, name),
            _ => self.dispatch(pass, name, &self.groups[name], bodies),
        }
    }

    fn encode_forces(&self, pass: &mut wgpu::ComputePass<'_>, kind: ForceKind) {
        self.dispatch(
            pass,
            "compute_forces",
            &self.force_groups[kind as usize],
            self.params.n,
        );
    }

    fn encode_step(&self, enc: &mut wgpu::CommandEncoder) {
        enc.clear_buffer(&self.buffers[&B_COUNTERS], 0, Some(12));
        match self.integrator {
            Integrator::VelocityVerlet => {
                self.encode_pass(enc, "verlet_begin", |s, p| {
                    s.particle_kernel(p, "verlet_begin");
                    s.body_kernel(p, "body_begin");
                    s.body_kernel(p, "body_particles");
                });
                self.encode_sort(enc, false);
                self.encode_pass(enc, "forces", |s, p| {
                    s.encode_forces(p, ForceKind::Commit);
                    s.particle_kernel(p, "verlet_end");
                    s.body_kernel(p, "body_reduce");
                    s.body_kernel(p, "body_end");
                    s.body_kernel(p, "body_particles");
                    s.dispatch(p, "tick", &s.tick_group, 1);
                });
            }
            Integrator::Rk2 => {
                self.encode_sort(enc, false);
                self.encode_pass(enc, "trial", |s, p| {
                    s.encode_forces(p, ForceKind::Trial);
                    s.particle_kernel(p, "rk2_mid");
                });
                self.encode_sort(enc, true);
                self.encode_pass(enc, "forces", |s, p| {
                    s.encode_forces(p, ForceKind::Commit);
                    s.particle_kernel(p, "rk2_end");
                    s.dispatch(p, "tick", &s.tick_group, 1);
                });
            }
        }
    }

    fn submit(&self, enc: wgpu::CommandEncoder) {
        self.gpu.queue.submit([enc.finish()]);
    }

    fn encoder(&self) -> wgpu::CommandEncoder {
        self.gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("sim") })
    }

    /// Sorts and evaluates the first forces (velocity Verlet needs them
    /// before its first half kick); new contacts start with no tangential stretch.
    pub fn prime(&mut self) {
        let mut enc = self.encoder();
        self.encode_sort(&mut enc, false);
        self.encode_pass(&mut enc, "prime", |s, p| {
            s.encode_forces(p, ForceKind::Prime);
            s.body_kernel(p, "body_reduce");
        });
        self.submit(enc);
    }

    /// Records and submits `steps` whole steps in one command buffer.
    pub fn advance(&mut self, steps: u32) {
        let mut enc = self.encoder();
        for _ in 0..steps {
            self.encode_step(&mut enc);
        }
        self.submit(enc);
        self.step += steps;
    }

    /// Blocks until the GPU has finished everything submitted.
    pub fn wait(&self) -> Result<(), SimError> {
        self.gpu
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| SimError::Gpu(GpuError::Readback(e.to_string())))?;
        Ok(())
    }

    // ---- single stages, for the parity tests --------------------------------

    /// Runs the counting sort alone.
    pub fn stage_sort(&mut self, rk2: bool) {
        let mut enc = self.encoder();
        self.encode_sort(&mut enc, rk2);
        self.submit(enc);
    }

    /// Runs `compute_forces` alone.
    pub fn stage_forces(&mut self, kind: ForceKind) {
        let mut enc = self.encoder();
        self.encode_pass(&mut enc, "forces", |s, p| s.encode_forces(p, kind));
        self.submit(enc);
    }

    /// Runs one integration kernel alone (`verlet_begin`, `verlet_end`,
    /// `rk2_mid`, `rk2_end`, `body_begin`, `body_end`, `body_particles`, `body_reduce`).
    pub fn stage_integrate(&mut self, name: &'static str) {
        let mut enc = self.encoder();
        self.encode_pass(&mut enc, name, |s, p| {
            if name.starts_with("body_") {
                s.body_kernel(p, name);
            } else {
                s.particle_kernel(p, name);
            }
        });
        self.submit(enc);
    }

    /// The bodies' state.
    pub fn download_bodies(&self) -> Result<Vec<BodyGpu>, SimError> {
        self.read(B_BODIES, self.params.body_count as usize)
    }

    /// Body forces and torques from the last `body_reduce`.
    pub fn download_body_forces(&self) -> Result<BodyForces, SimError> {
        let b = self.params.body_count as usize;
        Ok((self.read(B_BODY_FORCE, b)?, self.read(B_BODY_TORQUE, b)?))
    }

    /// Replaces the bodies' state and forces (parity tests).
    pub fn upload_bodies(&mut self, bodies: &[BodyGpu], force: &[[f32; 4]], torque: &[[f32; 4]]) {
        let q = &self.gpu.queue;
        q.write_buffer(&self.buffers[&B_BODIES], 0, bytemuck::cast_slice(bodies));
        q.write_buffer(&self.buffers[&B_BODY_FORCE], 0, bytemuck::cast_slice(force));
        q.write_buffer(
            &self.buffers[&B_BODY_TORQUE],
            0,
            bytemuck::cast_slice(torque),
        );
    }

    /// Current index of each particle id (written by the sort).
    pub fn download_inv_index(&self) -> Result<Vec<u32>, SimError> {
        self.read(B_INV_INDEX, self.params.n as usize)
    }

    /// Replaces all particle state (current order) with `state`, e.g. the
    /// CPU twin's, so a stage can be compared from identical inputs.
    pub fn upload(&mut self, state: &HostState) {
        let q = &self.gpu.queue;
        let b = &self.buffers;
        q.write_buffer(&b[&B_POS], 0, bytemuck::cast_slice(&state.pos));
        q.write_buffer(&b[&B_VEL], 0, bytemuck::cast_slice(&state.vel));
        q.write_buffer(&b[&B_ANGVEL], 0, bytemuck::cast_slice(&state.angvel));
        q.write_buffer(&b[&B_META], 0, bytemuck::cast_slice(&state.meta));
        q.write_buffer(&b[&B_FORCE], 0, bytemuck::cast_slice(&state.force));
        q.write_buffer(&b[&B_TORQUE], 0, bytemuck::cast_slice(&state.torque));
        q.write_buffer(
            &b[&B_HIST_COUNT],
            0,
            bytemuck::cast_slice(&state.hist_count),
        );
        q.write_buffer(&b[&B_HIST], 0, bytemuck::cast_slice(&state.hist));
        q.write_buffer(&b[&B_LOCAL], 0, bytemuck::cast_slice(&state.local));
    }

    /// Applies new parameters (gravity, time step) and material pairs at
    /// once, without restarting (the viewer's live controls).
    pub fn update_parameters(&mut self, params: &Params, pairs: &[super::setup::PairParams]) {
        let q = &self.gpu.queue;
        q.write_buffer(&self.buffers[&B_PARAMS], 0, bytemuck::bytes_of(params));
        q.write_buffer(&self.buffers[&B_PAIRS], 0, bytemuck::cast_slice(pairs));
        let dt = params.dt;
        for (buffer, (dt_hist, commit)) in
            self.mode_buffers
                .iter()
                .zip([(dt, 1u32), (0.5 * dt, 0), (0.0, 1)])
        {
            q.write_buffer(
                buffer,
                0,
                bytemuck::cast_slice(&[
                    dt_hist.to_bits(),
                    commit,
                    self.force_range.0,
                    self.force_range.1,
                ]),
            );
        }
        self.params = *params;
    }

    /// Sets the step counter (the kernels' clock) on both sides.
    pub fn set_step(&mut self, step: u32) {
        self.gpu
            .queue
            .write_buffer(&self.buffers[&B_CLOCK], 0, bytemuck::bytes_of(&step));
        self.step = step;
    }

    /// Resets the per-step counters, as each step does.
    pub fn clear_step_counters(&mut self) {
        let mut enc = self.encoder();
        enc.clear_buffer(&self.buffers[&B_COUNTERS], 0, Some(12));
        self.submit(enc);
    }

    // ---- block-wise stepping (`super::blocks`) -------------------------------

    /// Particles the kernels work on: at most the count this simulation was
    /// built for (a block's particles and halo).
    pub fn set_particle_count(&mut self, n: u32) {
        assert!(
            u64::from(n) * 16 <= self.buffers[&B_POS].size(),
            "{n} particles exceed the buffers"
        );
        self.params.n = n;
        self.gpu.queue.write_buffer(
            &self.buffers[&B_PARAMS],
            0,
            bytemuck::bytes_of(&self.params),
        );
    }

    /// `compute_forces` evaluates only particles `first..end` (their
    /// neighbours may lie outside: a block's halo).
    pub fn set_force_range(&mut self, first: u32, end: u32) {
        self.force_range = (first, end);
        let dt = self.params.dt;
        for (buffer, (dt_hist, commit)) in
            self.mode_buffers
                .iter()
                .zip([(dt, 1u32), (0.5 * dt, 0), (0.0, 1)])
        {
            self.gpu.queue.write_buffer(
                buffer,
                0,
                bytemuck::cast_slice(&[dt_hist.to_bits(), commit, first, end]),
            );
        }
    }

    /// Uploads a block in cell order: positions, velocities, angular
    /// velocities, ids, body offsets, and the contact history the forces
    /// start from (`hist_count`, `slots` entries per particle in `hist`).
    pub fn upload_block(&mut self, block: &BlockInput<'_>) {
        let q = &self.gpu.queue;
        let b = &self.buffers;
        q.write_buffer(&b[&B_POS], 0, bytemuck::cast_slice(block.pos));
        q.write_buffer(&b[&B_VEL], 0, bytemuck::cast_slice(block.vel));
        q.write_buffer(&b[&B_ANGVEL], 0, bytemuck::cast_slice(block.angvel));
        q.write_buffer(&b[&B_META], 0, bytemuck::cast_slice(block.meta));
        q.write_buffer(&b[&B_LOCAL], 0, bytemuck::cast_slice(block.local));
        q.write_buffer(&b[&B_HIST_COUNT], 0, bytemuck::cast_slice(block.hist_count));
        q.write_buffer(&b[&B_HIST], 0, bytemuck::cast_slice(block.hist));
    }

    /// Sorts the uploaded block and evaluates the forces of its range, in
    /// one submission.
    pub fn sort_and_forces(&mut self, kind: ForceKind) {
        let mut enc = self.encoder();
        self.encode_sort(&mut enc, false);
        self.encode_pass(&mut enc, "forces", |s, p| s.encode_forces(p, kind));
        self.submit(enc);
    }

    /// Forces, torques, contact counts and history of particles
    /// `first..end` (the force range), read back.
    pub fn download_forces(&self, first: u32, end: u32) -> Result<BlockOutput, SimError> {
        let (a, n) = (first as u64, u64::from(end - first));
        let slots = u64::from(self.params.slots);
        let read = |binding: u32, stride: u64| -> Result<Vec<u8>, SimError> {
            Ok(pellet_gpu::readback::read_buffer_range(
                &self.gpu.device,
                &self.gpu.queue,
                &self.buffers[&binding],
                a * stride,
                n * stride,
            )?)
        };
        Ok(BlockOutput {
            force: bytemuck::pod_collect_to_vec(&read(B_FORCE, 16)?),
            torque: bytemuck::pod_collect_to_vec(&read(B_TORQUE, 16)?),
            hist_count: bytemuck::pod_collect_to_vec(&read(B_HIST_COUNT, 4)?),
            hist: bytemuck::pod_collect_to_vec(&read(B_HIST, 16 * slots)?),
        })
    }

    /// Bytes of every buffer this simulation allocated.
    pub fn allocated_bytes(&self) -> u64 {
        self.buffers.values().map(wgpu::Buffer::size).sum::<u64>()
            + self
                .mode_buffers
                .iter()
                .map(wgpu::Buffer::size)
                .sum::<u64>()
            + self
                ._scan_buffers
                .iter()
                .map(wgpu::Buffer::size)
                .sum::<u64>()
    }

    // ---- readback -----------------------------------------------------------

    fn read<T: bytemuck::Pod>(&self, binding: u32, len: usize) -> Result<Vec<T>, SimError> {
        let bytes = read_buffer(&self.gpu.device, &self.gpu.queue, &self.buffers[&binding])?;
        let mut v: Vec<T> = bytemuck::pod_collect_to_vec(&bytes);
        v.truncate(len);
        Ok(v)
    }

    /// All particle state, in the current (cell) order.
    pub fn download(&self) -> Result<HostState, SimError> {
        let n = self.params.n as usize;
        let slots = self.params.slots as usize;
        Ok(HostState {
            pos: self.read(B_POS, n)?,
            vel: self.read(B_VEL, n)?,
            angvel: self.read(B_ANGVEL, n)?,
            meta: self.read(B_META, n)?,
            force: self.read(B_FORCE, n)?,
            torque: self.read(B_TORQUE, n)?,
            hist_count: self.read(B_HIST_COUNT, n)?,
            hist: self.read(B_HIST, n * slots)?,
            local: self.read(B_LOCAL, n)?,
        })
    }

    /// The counting sort's outputs: keys (in the pre-sort order), cell
    /// starts and the sorted order.
    pub fn download_grid(&self) -> Result<GridBuffers, SimError> {
        let n = self.params.n as usize;
        Ok((
            self.read(B_KEYS, n)?,
            self.read(B_CELL_START, self.params.num_keys as usize + 1)?,
            self.read(B_SORTED_INDEX, n)?,
        ))
    }

    /// The counters (see [`Counter`]).
    pub fn counters(&self) -> Result<[u32; NUM_COUNTERS], SimError> {
        let v: Vec<u32> = self.read(B_COUNTERS, NUM_COUNTERS)?;
        let mut out = [0; NUM_COUNTERS];
        out.copy_from_slice(&v);
        Ok(out)
    }

    /// Kinetic energy (J, workgroup partial sums added in order in f64) and
    /// the largest speed (m/s).
    pub fn kinetic_energy(&self) -> Result<(f64, f64), SimError> {
        let mut enc = self.encoder();
        self.encode_pass(&mut enc, "stats", |s, p| s.particle_kernel(p, "stats"));
        self.submit(enc);
        let groups = (self.params.n as usize).div_ceil(WG as usize);
        let partials: Vec<[f32; 2]> = self.read(B_PARTIALS, groups)?;
        let ke = partials.iter().map(|p| f64::from(p[0])).sum();
        let v2 = partials.iter().map(|p| p[1]).fold(0.0f32, f32::max);
        Ok((ke, f64::from(v2).sqrt()))
    }

    /// Steps recorded so far.
    pub fn steps(&self) -> u32 {
        self.step
    }
}
