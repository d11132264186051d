//! The simulation's GPU buffers: their creation (checked against the
//! device's limits), the prefix-sum levels, and the writes that replace
//! their contents (uploads and live parameter changes).

use std::collections::BTreeMap;

use pellet_formats::scene::Integrator;
use pellet_gpu::wgpu::util::DeviceExt;
use pellet_gpu::{Gpu, wgpu};

use super::bindings::*;
use super::{GpuSim, Group, Slot, WG};
use crate::setup::{PairParams, SimSetup};
use crate::stages::common::{BodyGpu, ModeGpu, Params, ScanLenGpu};
use crate::{Counter, HostState, NUM_COUNTERS, SimError};

pub(super) const STORAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);
const UNIFORM: wgpu::BufferUsages = wgpu::BufferUsages::UNIFORM.union(wgpu::BufferUsages::COPY_DST);

pub(super) struct ScanLevel {
    pub(super) len: u32,
    pub(super) block: Group,
    /// Adds the level above's scanned sums back (absent on the top level).
    pub(super) add: Option<Group>,
}

/// Refuses a setup whose largest buffers this GPU cannot bind.
pub(super) fn check_limits(gpu: &Gpu, params: &Params) -> Result<(), SimError> {
    let n = params.n as usize;
    let slots = params.slots as usize;
    let keys = params.num_keys as usize;
    let limits = gpu.device.limits();
    let biggest = [
        ("contact history", (n * slots * 16) as u64),
        ("particle data", (n * 16) as u64),
        ("cell table", ((keys + 1) * 4) as u64),
    ];
    for (what, size) in biggest {
        if size > limits.max_storage_buffer_binding_size || size > limits.max_buffer_size {
            return Err(SimError::BufferTooLarge {
                what: what.to_owned(),
                needed: size,
                max: limits
                    .max_storage_buffer_binding_size
                    .min(limits.max_buffer_size),
                adapter: gpu.report.name.clone(),
            });
        }
    }
    Ok(())
}

/// A buffer holding `bytes`.
pub(super) fn init_buffer(
    device: &wgpu::Device,
    label: &str,
    bytes: &[u8],
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
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
}

/// A zeroed storage buffer of `size` bytes (at least 16).
pub(super) fn zeroed_buffer(device: &wgpu::Device, label: &str, size: usize) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size.max(16) as u64,
        usage: STORAGE,
        mapped_at_creation: false,
    })
}

/// Every buffer bound by its number in `common.wgsl`, holding `setup` (particles
/// in input order, no history).
pub(super) fn create_buffers(
    device: &wgpu::Device,
    setup: &SimSetup,
    params: &Params,
) -> BTreeMap<u32, wgpu::Buffer> {
    let n = params.n as usize;
    let slots = params.slots as usize;
    let keys = params.num_keys as usize;
    let init = |label: &str, bytes: &[u8], usage: wgpu::BufferUsages| {
        init_buffer(device, label, bytes, usage)
    };
    let zeroed = |label: &str, size: usize| zeroed_buffer(device, label, size);
    let storage = STORAGE;
    let uniform = UNIFORM;
    let state = HostState::new(&setup.particles, params.slots);
    let rk2 = setup.integrator == Integrator::Rk2;
    let mut counters = [0u32; NUM_COUNTERS];
    counters[Counter::NanStep as usize] = u32::MAX;
    counters[Counter::NanId as usize] = u32::MAX;
    counters[Counter::EscapeStep as usize] = u32::MAX;
    counters[Counter::EscapeId as usize] = u32::MAX;
    let mut buffers = BTreeMap::new();
    buffers.insert(
        B_PARAMS,
        init("sim/params", bytemuck::bytes_of(params), uniform),
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
    buffers
}

/// The three `B_MODE` uniforms of `compute_forces` (one per
/// [`ForceKind`](crate::ForceKind)), for time step `dt`.
pub(super) fn create_mode_buffers(device: &wgpu::Device, dt: f32) -> [wgpu::Buffer; 3] {
    let modes = [(dt, 1u32), (0.5 * dt, 0), (0.0, 1)];
    modes.map(|(dt_hist, commit)| {
        let mode = ModeGpu {
            dt_hist,
            commit,
            first: 0,
            end: u32::MAX,
        };
        init_buffer(device, "sim/mode", bytemuck::bytes_of(&mode), UNIFORM)
    })
}

/// Prefix-sum levels over binding `input` (`len` entries) into binding
/// `output`, and the buffers they alone hold.
pub(super) fn create_scan_levels(
    binder: &Binder<'_>,
    (input, output): (u32, u32),
    len: u32,
) -> (Vec<ScanLevel>, Vec<wgpu::Buffer>) {
    let device = binder.device;
    let buffers = binder.buffers;
    let (input_binding, output_binding) = (input, output);
    let make_group = |name: &'static str, overrides: &[(u32, &Slot)]| binder.group(name, overrides);
    let mut scan_buffers = Vec::new();
    let mut lens = vec![len];
    while *lens.last().unwrap_or(&1) > WG {
        let last = *lens.last().unwrap_or(&1);
        lens.push(last.div_ceil(WG));
    }
    // sums[l]: block totals of level l (= input of level l + 1); outs[l]: scan of level l.
    let sums: Vec<Slot> = lens
        .iter()
        .map(|&len| {
            Slot::whole(zeroed_buffer(
                device,
                "sim/scan_sums",
                len.div_ceil(WG) as usize * 4,
            ))
        })
        .collect();
    let outs: Vec<Option<Slot>> = lens
        .iter()
        .enumerate()
        .map(|(l, &len)| {
            (l > 0).then(|| Slot::whole(zeroed_buffer(device, "sim/scan_out", len as usize * 4)))
        })
        .collect();
    let len_buffers: Vec<Slot> = lens
        .iter()
        .map(|&len| {
            Slot::whole(init_buffer(
                device,
                "sim/scan_len",
                bytemuck::bytes_of(&ScanLenGpu { len, pad: [0; 3] }),
                UNIFORM,
            ))
        })
        .collect();
    let mut scan_levels = Vec::new();
    for l in 0..lens.len() {
        let input = if l == 0 {
            &buffers[&input_binding]
        } else {
            &sums[l - 1]
        };
        let output = outs[l].as_ref().unwrap_or(&buffers[&output_binding]);
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
    scan_buffers.extend(sums.into_iter().map(|s| s.buffer));
    scan_buffers.extend(outs.into_iter().flatten().map(|s| s.buffer));
    scan_buffers.extend(len_buffers.into_iter().map(|s| s.buffer));
    (scan_levels, scan_buffers)
}

impl GpuSim {
    /// Replaces the bodies' state and forces (parity tests).
    pub fn upload_bodies(&mut self, bodies: &[BodyGpu], force: &[[f32; 4]], torque: &[[f32; 4]]) {
        let q = &self.gpu.queue;
        let b = &self.buffers;
        b[&B_BODIES].write(q, 0, bytemuck::cast_slice(bodies));
        b[&B_BODY_FORCE].write(q, 0, bytemuck::cast_slice(force));
        b[&B_BODY_TORQUE].write(q, 0, bytemuck::cast_slice(torque));
    }

    /// Replaces all particle state (current order) with `state`, e.g. the
    /// CPU twin's, so a stage can be compared from identical inputs.
    pub fn upload(&mut self, state: &HostState) {
        let q = &self.gpu.queue;
        let b = &self.buffers;
        b[&B_POS].write(q, 0, bytemuck::cast_slice(&state.pos));
        b[&B_VEL].write(q, 0, bytemuck::cast_slice(&state.vel));
        b[&B_ANGVEL].write(q, 0, bytemuck::cast_slice(&state.angvel));
        b[&B_META].write(q, 0, bytemuck::cast_slice(&state.meta));
        b[&B_FORCE].write(q, 0, bytemuck::cast_slice(&state.force));
        b[&B_TORQUE].write(q, 0, bytemuck::cast_slice(&state.torque));
        b[&B_HIST_COUNT].write(q, 0, bytemuck::cast_slice(&state.hist_count));
        b[&B_HIST].write(q, 0, bytemuck::cast_slice(&state.hist));
        b[&B_LOCAL].write(q, 0, bytemuck::cast_slice(&state.local));
    }

    /// Applies new parameters (gravity and time step of `params`; the rest
    /// of it, the grid, stays this simulation's) and material pairs at once,
    /// without restarting (the viewer's live controls). On the pair-list
    /// path the next evaluation rebuilds the list, whose pairs cache their
    /// materials' constants.
    pub fn update_parameters(&mut self, params: &Params, pairs: &[PairParams]) {
        let mut live = self.params;
        live.gravity = params.gravity;
        live.dt = params.dt;
        let params = &live;
        let q = &self.gpu.queue;
        self.buffers[&B_PARAMS].write(q, 0, bytemuck::bytes_of(params));
        self.buffers[&B_PAIRS].write(q, 0, bytemuck::cast_slice(pairs));
        if let Some(state) = self.buffers.get(&B_LIST_STATE) {
            state.write(q, 0, bytemuck::bytes_of(&1u32));
        }
        let dt = params.dt;
        for (buffer, (dt_hist, commit)) in
            self.mode_buffers
                .iter()
                .zip([(dt, 1u32), (0.5 * dt, 0), (0.0, 1)])
        {
            buffer.write(
                q,
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
        self.buffers[&B_CLOCK].write(&self.gpu.queue, 0, bytemuck::bytes_of(&step));
        self.step = step;
    }

    // ---- block-wise stepping (`crate::blocks`) -------------------------------

    /// Particles the kernels work on: at most the count this simulation was
    /// built for (a block's particles and halo).
    pub fn set_particle_count(&mut self, n: u32) {
        assert!(
            u64::from(n) * 16 <= self.buffers[&B_POS].size,
            "{n} particles exceed the buffers"
        );
        self.params.n = n;
        self.buffers[&B_PARAMS].write(&self.gpu.queue, 0, bytemuck::bytes_of(&self.params));
    }

    /// The force kernels evaluate only particles `first..end` (their
    /// neighbours may lie outside: a block's halo); pairs are counted by
    /// the block of their owner.
    pub fn set_force_range(&mut self, first: u32, end: u32) {
        self.force_range = (first, end);
        let dt = self.params.dt;
        for (buffer, (dt_hist, commit)) in
            self.mode_buffers
                .iter()
                .zip([(dt, 1u32), (0.5 * dt, 0), (0.0, 1)])
        {
            buffer.write(
                &self.gpu.queue,
                0,
                bytemuck::cast_slice(&[dt_hist.to_bits(), commit, first, end]),
            );
        }
    }

    /// Bytes of every buffer this simulation allocated.
    pub fn allocated_bytes(&self) -> u64 {
        self.buffers.values().map(|s| s.size).sum::<u64>()
            + self.mode_buffers.iter().map(|s| s.size).sum::<u64>()
            + self
                ._scan_buffers
                .iter()
                .map(wgpu::Buffer::size)
                .sum::<u64>()
    }
}
