//! The binding numbers of `common.wgsl`, the kernels [`GpuSim`](super::GpuSim)
//! builds from the compiled stages, and their bind groups: each kernel binds
//! what naga's reflection says it uses, so its bind group always matches its code.

use std::collections::BTreeMap;

use pellet_gpu::wgpu;

use pellet_gpu::wgpu::util::DeviceExt;

use super::slots::{Packing, Slot};
use crate::stages::CompiledStage;
use crate::stages::common::Params;
use crate::stages::packed::{Arena, B_ARENA_ATOMIC, B_ARENA_F4, B_ARENA_U1, B_ARENA_U4, B_LAYOUT};

// Binding numbers of `common.wgsl`.
pub(super) const B_PARAMS: u32 = 0;
pub(super) const B_MODE: u32 = 1;
pub(super) const B_POS: u32 = 2;
pub(super) const B_VEL: u32 = 3;
pub(super) const B_ANGVEL: u32 = 4;
pub(super) const B_META: u32 = 5;
pub(super) const B_FORCE: u32 = 6;
pub(super) const B_TORQUE: u32 = 7;
pub(super) const B_HIST_COUNT: u32 = 8;
pub(super) const B_HIST: u32 = 9;
pub(super) const B_HIST_COUNT_OLD: u32 = 10;
pub(super) const B_HIST_OLD: u32 = 11;
pub(super) const B_KEYS: u32 = 12;
pub(super) const B_CELL_COUNT: u32 = 13;
pub(super) const B_CELL_START: u32 = 14;
pub(super) const B_CURSOR: u32 = 15;
pub(super) const B_SORTED_INDEX: u32 = 16;
pub(super) const B_PAIRS: u32 = 17;
pub(super) const B_WALLS: u32 = 18;
pub(super) const B_COUNTERS: u32 = 19;
pub(super) const B_CLOCK: u32 = 20;
pub(super) const B_POS_OUT: u32 = 21;
pub(super) const B_VEL_OUT: u32 = 22;
pub(super) const B_ANGVEL_OUT: u32 = 23;
pub(super) const B_META_OUT: u32 = 24;
pub(super) const B_POS0: u32 = 25;
pub(super) const B_VEL0: u32 = 26;
pub(super) const B_ANGVEL0: u32 = 27;
pub(super) const B_SCAN_LEN: u32 = 28;
pub(super) const B_SCAN_IN: u32 = 29;
pub(super) const B_SCAN_OUT: u32 = 30;
pub(super) const B_SCAN_SUMS: u32 = 31;
pub(super) const B_PARTIALS: u32 = 32;
pub(super) const B_BODIES: u32 = 35;
pub(super) const B_BODY_FORCE: u32 = 36;
pub(super) const B_BODY_TORQUE: u32 = 37;
pub(super) const B_LOCAL: u32 = 38;
pub(super) const B_LOCAL_OUT: u32 = 39;
pub(super) const B_INV_INDEX: u32 = 40;
pub(super) const B_POS_REF: u32 = 41;
pub(super) const B_ROW_COUNT: u32 = 42;
pub(super) const B_PAIR_START: u32 = 43;
pub(super) const B_LOW_COUNT: u32 = 44;
pub(super) const B_LOW_START: u32 = 45;
pub(super) const B_PAIR_J: u32 = 46;
pub(super) const B_PAIR_HIST: u32 = 47;
pub(super) const B_PAIR_FORCE: u32 = 48;
pub(super) const B_PAIR_TORQUE: u32 = 49;
pub(super) const B_LOW_INDEX: u32 = 50;
pub(super) const B_OLD_START: u32 = 51;
pub(super) const B_OLD_HIST: u32 = 52;
pub(super) const B_WALL_HIST: u32 = 53;
pub(super) const B_WALL_HIST_OLD: u32 = 54;
pub(super) const B_LIST_STATE: u32 = 55;
pub(super) const B_DISPATCH_ARGS: u32 = 56;
pub(super) const B_DISPATCH_TEMPLATE: u32 = 57;
pub(super) const B_PAIR_CONST: u32 = 58;
pub(super) const B_WALL_MASK: u32 = 59;
pub(super) const B_PAIR_I: u32 = 60;
pub(super) const B_PAIR_ROLL: u32 = 61;
pub(super) const B_PAIR_ROLL_M: u32 = 62;
pub(super) const B_OLD_ROLL: u32 = 63;
pub(super) const B_WALL_ROLL: u32 = 64;
pub(super) const B_WALL_ROLL_OLD: u32 = 65;

/// The kernels of stage `pairs` (each gets one bind group per force kind),
/// as the stage registers them.
pub(super) fn pair_kernels() -> &'static [&'static str] {
    crate::stages::STAGES
        .iter()
        .find(|s| s.name == "pairs")
        .map_or(&[], |s| s.kernels)
}

pub(super) const PARTICLE_KERNELS: [&str; 12] = [
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

pub(super) struct Kernel {
    pub(super) pipeline: wgpu::ComputePipeline,
    pub(super) bindings: Vec<u32>,
}

/// Builds a pipeline for every kernel of every compiled stage (one shader
/// module per stage), each with the bindings reflection says it uses.
pub(super) fn create_kernels(
    device: &wgpu::Device,
    stages: &[CompiledStage],
    params: &Params,
) -> BTreeMap<&'static str, Kernel> {
    let mut kernels = BTreeMap::new();
    // The laws of this simulation, as the shaders' overridable constants.
    let constants = [
        ("CONTACT_MODEL", f64::from(params.contact_model)),
        ("ROLLING_MODEL", f64::from(params.rolling_model)),
        ("PERIODIC", f64::from(params.periodic)),
    ];
    for compiled in stages {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(compiled.stage.file),
            source: wgpu::ShaderSource::Wgsl(compiled.source.as_str().into()),
        });
        for (&name, bindings) in &compiled.bindings {
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(name),
                layout: None,
                module: &module,
                entry_point: Some(name),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    ..Default::default()
                },
                cache: None,
            });
            kernels.insert(
                name,
                Kernel {
                    pipeline,
                    bindings: bindings.clone(),
                },
            );
        }
    }
    kernels
}

/// A kernel's bind group and what it was made from: the packed layout
/// rebuilds it whenever the arenas move.
pub(super) struct Group {
    kernel: &'static str,
    overrides: Vec<(u32, Slot)>,
    group: Option<wgpu::BindGroup>,
}

impl Group {
    /// The bind group.
    pub(super) fn get(&self) -> &wgpu::BindGroup {
        self.group
            .as_ref()
            .unwrap_or_else(|| unreachable!("bind group of `{}` before packing", self.kernel))
    }

    /// The slots this group binds in place of the simulation's own.
    pub(super) fn overrides_mut(&mut self) -> &mut Vec<(u32, Slot)> {
        &mut self.overrides
    }

    /// The slots this group binds in place of the simulation's own.
    pub(super) fn overrides(&self) -> &[(u32, Slot)] {
        &self.overrides
    }
}

/// What every bind group is made from.
pub(super) struct Binder<'a> {
    pub(super) device: &'a wgpu::Device,
    pub(super) kernels: &'a BTreeMap<&'static str, Kernel>,
    pub(super) buffers: &'a BTreeMap<u32, Slot>,
    pub(super) packing: &'a Packing,
}

impl Binder<'_> {
    /// The bind group of kernel `name`: each binding it uses gets the slot
    /// of that number from `overrides`, else the simulation's own. In the
    /// packed layout the arenas are bound whole and a table gives each
    /// array's range; until the slots are packed the group is pending.
    pub(super) fn group(&self, name: &'static str, overrides: &[(u32, &Slot)]) -> Group {
        let mut group = Group {
            kernel: name,
            overrides: overrides.iter().map(|(b, s)| (*b, (*s).clone())).collect(),
            group: None,
        };
        self.rebuild(&mut group);
        group
    }

    /// Remakes `group`'s bind group from its slots.
    pub(super) fn rebuild(&self, group: &mut Group) {
        let name = group.kernel;
        let kernel = &self.kernels[name];
        let slot_of = |b: u32| -> Option<&Slot> {
            group
                .overrides
                .iter()
                .find(|(ob, _)| *ob == b)
                .map(|(_, s)| s)
                .or_else(|| self.buffers.get(&b))
        };
        let packed = !self.packing.arena_of.is_empty();
        let table = if packed {
            let Some(table) = self.packing.table(slot_of) else {
                group.group = None;
                return;
            };
            Some(
                self.device
                    .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                        label: Some("sim/packing"),
                        contents: bytemuck::cast_slice(&table),
                        usage: wgpu::BufferUsages::UNIFORM,
                    }),
            )
        } else {
            None
        };
        let arena = |a: Arena| -> wgpu::BindingResource<'_> {
            self.packing
                .arenas
                .as_ref()
                .map(|m| m[&a].as_entire_binding())
                .unwrap_or_else(|| unreachable!("arenas exist once the table does"))
        };
        let entries: Vec<wgpu::BindGroupEntry<'_>> = kernel
            .bindings
            .iter()
            .map(|&b| {
                let resource = match (b, &table) {
                    (B_LAYOUT, Some(t)) => t.as_entire_binding(),
                    (B_ARENA_F4, Some(_)) => arena(Arena::F4),
                    (B_ARENA_U4, Some(_)) => arena(Arena::U4),
                    (B_ARENA_U1, Some(_)) => arena(Arena::U1),
                    (B_ARENA_ATOMIC, Some(_)) => arena(Arena::A1),
                    _ => slot_of(b)
                        .unwrap_or_else(|| panic!("binding {b} of kernel {name} has no buffer"))
                        .binding(),
                };
                wgpu::BindGroupEntry {
                    binding: b,
                    resource,
                }
            })
            .collect();
        group.group = Some(self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(name),
            layout: &kernel.pipeline.get_bind_group_layout(0),
            entries: &entries,
        }));
    }
}
