//! The pair-list path's buffers: created for the first capacity with the
//! list state, dispatch slots and bind groups, and replaced by larger ones
//! (keeping the old list's springs) when a rebuild outgrows them.

use std::collections::BTreeMap;

use pellet_gpu::wgpu;

use super::dispatch::slot_template;
use super::{LIST_STATE_LEN, ListGpu, ListState, PAIRS_PER_PARTICLE, scan_lens};
use crate::SimError;
use crate::gpu::bindings::*;
use crate::gpu::buffers::{STORAGE, create_scan_levels, init_buffer, zeroed_buffer};
use crate::gpu::{GpuSim, Group, Slot};
use crate::stages::common::{Params, ROLL_EPSD2, ROLL_NONE};

/// The buffers only the pair-list path binds, for `capacity` pairs.
pub(super) fn create_list_buffers(
    device: &wgpu::Device,
    params: &Params,
    capacity: u32,
    template: &[[u32; 4]],
) -> Vec<(u32, wgpu::Buffer)> {
    let n = params.n as usize;
    let rows = (n + 1) * 4;
    let walls = n * params.wall_count as usize * 16;
    // Stored rolling torques at walls only with epsd2 (the kernels read
    // them only then; a binding still needs a buffer).
    let wall_rolls = if params.rolling_model == ROLL_EPSD2 {
        walls
    } else {
        16
    };
    let mut state = [0u32; LIST_STATE_LEN];
    state[ListState::Rebuild as usize] = 1;
    state[ListState::Capacity as usize] = capacity;
    state[ListState::Slots as usize] = template.len() as u32;
    let args: Vec<u32> = template.iter().flat_map(|t| [t[0], t[1], t[2]]).collect();
    let indirect = STORAGE | wgpu::BufferUsages::INDIRECT;
    let mut out = vec![
        (B_POS_REF, zeroed_buffer(device, "sim/pos_ref", n * 16)),
        (B_ROW_COUNT, zeroed_buffer(device, "sim/row_count", rows)),
        (B_PAIR_START, zeroed_buffer(device, "sim/pair_start", rows)),
        (B_LOW_COUNT, zeroed_buffer(device, "sim/low_count", rows)),
        (B_LOW_START, zeroed_buffer(device, "sim/low_start", rows)),
        (B_OLD_START, zeroed_buffer(device, "sim/old_start", rows)),
        (B_WALL_HIST, zeroed_buffer(device, "sim/wall_hist", walls)),
        (B_WALL_MASK, zeroed_buffer(device, "sim/wall_mask", n * 4)),
        (
            B_WALL_HIST_OLD,
            zeroed_buffer(device, "sim/wall_hist_old", walls),
        ),
        (
            B_WALL_ROLL,
            zeroed_buffer(device, "sim/wall_roll", wall_rolls),
        ),
        (
            B_WALL_ROLL_OLD,
            zeroed_buffer(device, "sim/wall_roll_old", wall_rolls),
        ),
        (
            B_LIST_STATE,
            init_buffer(
                device,
                "sim/list_state",
                bytemuck::cast_slice(&state),
                STORAGE,
            ),
        ),
        (
            B_DISPATCH_ARGS,
            init_buffer(
                device,
                "sim/dispatch_args",
                bytemuck::cast_slice(&args),
                indirect,
            ),
        ),
        (
            B_DISPATCH_TEMPLATE,
            init_buffer(
                device,
                "sim/dispatch_template",
                bytemuck::cast_slice(template),
                STORAGE,
            ),
        ),
    ];
    out.extend(pair_buffers(device, capacity, params.rolling_model));
    out
}

/// The buffers sized by the pair capacity.
fn pair_buffers(device: &wgpu::Device, capacity: u32, rolling: u32) -> Vec<(u32, wgpu::Buffer)> {
    let c = capacity as usize;
    // Rolling resistance: the torque per pair (both models) and the stored
    // torques of this list and the last (epsd2); 16 bytes when unused.
    let (m, stored) = match rolling {
        ROLL_NONE => (16, 16),
        ROLL_EPSD2 => (c * 16, c * 16),
        _ => (c * 16, 16),
    };
    vec![
        (B_PAIR_ROLL, zeroed_buffer(device, "sim/pair_roll", stored)),
        (B_PAIR_ROLL_M, zeroed_buffer(device, "sim/pair_roll_m", m)),
        (B_OLD_ROLL, zeroed_buffer(device, "sim/old_roll", stored)),
        (B_PAIR_I, zeroed_buffer(device, "sim/pair_i", c * 4)),
        (B_PAIR_J, zeroed_buffer(device, "sim/pair_j", c * 4)),
        (
            B_PAIR_CONST,
            zeroed_buffer(device, "sim/pair_const", c * 16),
        ),
        (B_PAIR_HIST, zeroed_buffer(device, "sim/pair_hist", c * 16)),
        (
            B_PAIR_FORCE,
            zeroed_buffer(device, "sim/pair_force", c * 16),
        ),
        (
            B_PAIR_TORQUE,
            zeroed_buffer(device, "sim/pair_torque", c * 16),
        ),
        (B_LOW_INDEX, zeroed_buffer(device, "sim/low_index", c * 4)),
        (B_OLD_HIST, zeroed_buffer(device, "sim/old_hist", c * 16)),
    ]
}

/// The first capacity for `n` particles.
pub(super) fn first_capacity(n: u32) -> u32 {
    n.saturating_mul(PAIRS_PER_PARTICLE).max(1024)
}

impl GpuSim {
    /// Creates the list buffers, dispatch slots and bind groups (pair-list
    /// path only).
    pub(in crate::gpu) fn init_list(&mut self) -> Result<(), SimError> {
        let capacity = first_capacity(self.params.n);
        self.check_pair_capacity(capacity)?;
        let cell_levels: Vec<u32> = self.scan_levels.iter().map(|l| l.len).collect();
        let row_levels = scan_lens(self.params.n + 1);
        let template = slot_template(&self.params, &cell_levels, &row_levels, capacity);
        let device = &self.gpu.device;
        for (b, buffer) in create_list_buffers(device, &self.params, capacity, &template) {
            self.buffers.insert(b, Slot::whole(buffer));
        }
        let binder = self.binder();
        let (row_scan, mut scan_buffers) =
            create_scan_levels(&binder, (B_ROW_COUNT, B_PAIR_START), self.params.n + 1);
        let (low_scan, low_buffers) =
            create_scan_levels(&binder, (B_LOW_COUNT, B_LOW_START), self.params.n + 1);
        scan_buffers.extend(low_buffers);
        let slot_of = template
            .iter()
            .enumerate()
            .map(|(k, t)| (([t[0], t[1], t[2]], t[3]), k as u32))
            .collect();
        let groups = self.pair_groups();
        self.list = Some(ListGpu {
            capacity,
            template,
            slot_of,
            groups,
            row_scan,
            low_scan,
            _scan_buffers: scan_buffers,
            rebuild_on_demand: self.gpu.adapter.get_info().device_type == wgpu::DeviceType::Cpu,
        });
        Ok(())
    }

    fn pair_groups(&self) -> BTreeMap<&'static str, [Group; 3]> {
        let binder = self.binder();
        pair_kernels()
            .iter()
            .map(|&name| {
                let groups =
                    [0, 1, 2].map(|k| binder.group(name, &[(B_MODE, &self.mode_buffers[k])]));
                (name, groups)
            })
            .collect()
    }

    fn check_pair_capacity(&self, capacity: u32) -> Result<(), SimError> {
        let limits = self.gpu.device.limits();
        let max = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        let size = u64::from(capacity) * 16;
        if size > max {
            return Err(SimError::BufferTooLarge {
                what: format!("pair list ({capacity} pairs)"),
                needed: size,
                max,
                adapter: self.gpu.report.name.clone(),
            });
        }
        Ok(())
    }

    /// Replaces the pair buffers with ones for `capacity` pairs, keeping the
    /// old list's springs (the resumed rebuild carries them over).
    pub(super) fn grow_pairs(&mut self, capacity: u32) -> Result<(), SimError> {
        if capacity <= self.list().capacity {
            return Ok(());
        }
        self.resize_pairs(capacity)
    }

    pub(super) fn resize_pairs(&mut self, capacity: u32) -> Result<(), SimError> {
        self.check_pair_capacity(capacity)?;
        let fresh: Vec<(u32, Slot)> =
            pair_buffers(&self.gpu.device, capacity, self.params.rolling_model)
                .into_iter()
                .map(|(b, buffer)| (b, Slot::whole(buffer)))
                .collect();
        let mut enc = self.encoder();
        for (b, slot) in &fresh {
            if *b == B_OLD_HIST || *b == B_OLD_ROLL {
                self.buffers[b].copy_to(&mut enc, slot);
            }
        }
        self.submit(enc);
        for (b, slot) in fresh {
            self.buffers.insert(b, slot);
        }
        self.buffers[&B_LIST_STATE].write(
            &self.gpu.queue,
            ListState::Capacity as u64 * 4,
            bytemuck::bytes_of(&capacity),
        );
        let groups = self.pair_groups();
        if let Some(list) = self.list.as_mut() {
            list.capacity = capacity;
            list.groups = groups;
        }
        self.repack()?;
        Ok(())
    }
}
