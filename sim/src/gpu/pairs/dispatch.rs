//! The dispatch slots (each distinct workgroup count and kind of a step,
//! whose counts `list_gate` writes on the device) and the dispatches of the
//! path's kernels through them.

use pellet_gpu::{dispatch_2d, wgpu};

use super::{ListGpu, SLOT_PAIRS, SLOT_REBUILD, SLOT_STEP, groups_for};
use crate::ForceKind;
use crate::gpu::bindings::*;
use crate::gpu::{GpuSim, Group};
use crate::stages::common::Params;

/// The dispatch slots a simulation of these sizes uses.
pub(super) fn slot_template(
    params: &Params,
    cell_levels: &[u32],
    row_levels: &[u32],
    capacity: u32,
) -> Vec<[u32; 4]> {
    let mut slots: Vec<[u32; 4]> = Vec::new();
    let mut add = |g: [u32; 3], kind: u32| {
        let s = [g[0], g[1], g[2], kind];
        if !slots.contains(&s) {
            slots.push(s);
        }
    };
    let n = params.n;
    for kind in [SLOT_STEP, SLOT_REBUILD] {
        add(groups_for(n), kind);
    }
    add(groups_for(1), SLOT_STEP);
    // The pair slot: the host writes it for the capacity (the kernel stops
    // at the list's end); list_gate and list_halt set it to the length.
    add(groups_for(capacity), SLOT_PAIRS);
    add(groups_for(params.body_count), SLOT_STEP);
    add(dispatch_2d(params.body_count), SLOT_STEP);
    add(groups_for(n + 1), SLOT_REBUILD);
    add(groups_for(params.num_keys + 1), SLOT_REBUILD);
    add(groups_for(params.num_keys), SLOT_REBUILD);
    for &len in cell_levels.iter().chain(row_levels) {
        add(groups_for(len), SLOT_REBUILD);
    }
    slots
}

impl GpuSim {
    pub(super) fn list(&self) -> &ListGpu {
        self.list
            .as_ref()
            .unwrap_or_else(|| unreachable!("pair-list path without its list"))
    }

    pub(super) fn indirect(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        name: &str,
        group: &Group,
        groups: [u32; 3],
        kind: u32,
    ) {
        let list = self.list();
        let slot = list.slot_of[&(groups, kind)];
        pass.set_pipeline(&self.kernels[name].pipeline);
        pass.set_bind_group(0, group.get(), &[]);
        let args = &self.buffers[&B_DISPATCH_ARGS];
        pass.dispatch_workgroups_indirect(&args.buffer, args.offset + u64::from(slot) * 12);
    }

    /// A particle kernel of the step (runs unless halted).
    pub(super) fn step_kernel(&self, pass: &mut wgpu::ComputePass<'_>, name: &'static str) {
        let group = self
            .groups
            .get(name)
            .unwrap_or_else(|| &self.list().groups[name][0]);
        self.indirect(pass, name, group, groups_for(self.params.n), SLOT_STEP);
    }

    /// A body kernel of the step (none without bodies).
    pub(super) fn step_body_kernel(&self, pass: &mut wgpu::ComputePass<'_>, name: &'static str) {
        let bodies = self.params.body_count;
        if bodies == 0 {
            return;
        }
        match name {
            "body_particles" => self.step_kernel(pass, name),
            "body_reduce" => self.indirect(
                pass,
                name,
                &self.groups[name],
                dispatch_2d(bodies),
                SLOT_STEP,
            ),
            _ => self.indirect(
                pass,
                name,
                &self.groups[name],
                groups_for(bodies),
                SLOT_STEP,
            ),
        }
    }

    pub(super) fn rebuild_kernel(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        name: &'static str,
        group: &Group,
        count: u32,
    ) {
        self.indirect(pass, name, group, groups_for(count), SLOT_REBUILD);
    }

    pub(super) fn pair_group(&self, name: &str, kind: ForceKind) -> &Group {
        &self.list().groups[name][kind as usize]
    }

    /// One workgroup of `name` with the bind group of `kind`'s mode.
    pub(super) fn direct(&self, pass: &mut wgpu::ComputePass<'_>, name: &str, kind: ForceKind) {
        pass.set_pipeline(&self.kernels[name].pipeline);
        pass.set_bind_group(0, self.pair_group(name, kind).get(), &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }

    /// The key of the pair slot in `slot_of` (its template counts).
    pub(super) fn pairs_slot_groups(&self) -> [u32; 3] {
        let list = self.list();
        list.template
            .iter()
            .find(|t| t[3] == SLOT_PAIRS)
            .map_or([1, 1, 1], |t| [t[0], t[1], t[2]])
    }

    /// Every dispatch slot's counts as the host writes them: the template's,
    /// the pair slot's for the whole capacity (the kernel stops at the end).
    pub(super) fn all_slots_on(&self) -> Vec<u32> {
        let list = self.list();
        let pairs = groups_for(list.capacity);
        list.template
            .iter()
            .flat_map(|t| {
                if t[3] == SLOT_PAIRS {
                    pairs
                } else {
                    [t[0], t[1], t[2]]
                }
            })
            .collect()
    }

    /// Writes every dispatch slot on (the stages below run alone).
    pub(super) fn enable_all_slots(&self) {
        let args = self.all_slots_on();
        self.buffers[&B_DISPATCH_ARGS].write(&self.gpu.queue, 0, bytemuck::cast_slice(&args));
    }
}
