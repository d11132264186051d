//! [`GpuSim`]: drives the stage kernels (`stages/*.wgsl`). Buffers live on the GPU for the whole run;
//! a batch of steps is one command buffer with no readback in between.
//!
//! Bindings are declared once in the shader; which ones each kernel uses is
//! read from the shader itself (naga's reflection), so a kernel's bind group
//! always matches its code.
//!
//! - `bindings.rs`: the binding numbers, the kernels, reflection and bind groups;
//! - `buffers.rs`: buffer creation (checked against the device's limits) and uploads;
//! - `encode.rs`: dispatches, the counting sort, steps and single stages;
//! - `pairs.rs`: the pair-list path (a neighbour list with a skin, rebuilt
//!   when the device finds it due, every dispatch gated on the device);
//! - `readback.rs`: downloads, counters and the kinetic energy.
//!
//! Two ways to find contacts ([`Listing`]): the pair list (the default; in
//! core the device builds it, stepping block by block the host builds it and
//! uploads it a block at a time), and sorting every step with per-particle
//! history slots (the kernels of the older stage tests and their twin).

use std::collections::BTreeMap;
use std::sync::Arc;

use pellet_formats::scene::Integrator;
use pellet_gpu::{Gpu, GpuError, wgpu};

use crate::SimError;
use crate::setup::SimSetup;
use crate::stages::SimShaders;
use crate::stages::common::Params;

mod bindings;
mod buffers;
mod encode;
mod pairs;
mod readback;
pub mod slots;

use bindings::{B_META, B_MODE, B_POS, B_VEL, Binder, Group, Kernel, PARTICLE_KERNELS};
use buffers::ScanLevel;
use slots::Packing;
pub use slots::{BindingLayout, Slot};

const WG: u32 = 256;

/// One block of a host-built pair list, for [`GpuSim::upload_pair_block`]
/// (block-wise stepping, `crate::blocks`): the block's particles with their
/// halo, indices local to the block.
#[derive(Debug, Clone, Copy)]
pub struct PairBlockInput<'a> {
    /// Positions and radii.
    pub pos: &'a [[f32; 4]],
    /// Velocities and inverse masses.
    pub vel: &'a [[f32; 4]],
    /// Angular velocities and inverse moments.
    pub angvel: &'a [[f32; 4]],
    /// Ids, materials, bodies.
    pub meta: &'a [[u32; 4]],
    /// First pair of each particle's row, `pos.len() + 1` entries.
    pub pair_start: &'a [u32],
    /// First entry of each particle's partner index, `pos.len() + 1` entries.
    pub low_start: &'a [u32],
    /// The pairs each particle is the partner of.
    pub low_index: &'a [u32],
    /// Owner of each pair.
    pub pair_i: &'a [u32],
    /// Partner of each pair.
    pub pair_j: &'a [u32],
    /// `kn`, `kt`, `mu` and the damping coefficient of each pair.
    pub pair_const: &'a [[f32; 4]],
    /// Spring (m, the owner's view) and the partner's id bits of each pair.
    pub pair_hist: &'a [[f32; 4]],
    /// Walls (below 32) within reach of each particle, as bits.
    pub wall_mask: &'a [u32],
    /// Spring with each wall, `wall_count` per particle.
    pub wall_hist: &'a [[f32; 4]],
    /// Stored rolling torque of each pair (`epsd2`, else empty).
    pub pair_roll: &'a [[f32; 4]],
    /// Stored rolling torque with each wall (`epsd2`, else empty).
    pub wall_roll: &'a [[f32; 4]],
}

/// What [`GpuSim::download_pair_block`] reads back.
#[derive(Debug, Clone, Default)]
pub struct PairBlockOutput {
    /// Total force per particle, N.
    pub force: Vec<[f32; 4]>,
    /// Torque per particle, N m.
    pub torque: Vec<[f32; 4]>,
    /// The pairs' springs after the evaluation.
    pub pair_hist: Vec<[f32; 4]>,
    /// The wall springs after the evaluation, `wall_count` per particle.
    pub wall_hist: Vec<[f32; 4]>,
    /// The pairs' stored rolling torques after it (`epsd2`, else empty).
    pub pair_roll: Vec<[f32; 4]>,
    /// The wall stored rolling torques after it (`epsd2`, else empty).
    pub wall_roll: Vec<[f32; 4]>,
}

/// How the GPU path finds contacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// A half pair list with a skin, springs beside the pairs, rebuilt when
    /// a particle has moved half the skin (`stages/pairs.wgsl`).
    PairList,
    /// Sort every step and search the 27 cells from both sides, springs in
    /// per-particle slots (`stages/sort.wgsl`, `stages/forces.wgsl`).
    SortEveryStep,
}

/// The GPU simulation's buffers and kernels.
pub struct GpuSim {
    gpu: Arc<Gpu>,
    /// Constant parameters.
    pub params: Params,
    integrator: Integrator,
    buffers: BTreeMap<u32, Slot>,
    mode_buffers: [Slot; 3],
    kernels: BTreeMap<&'static str, Kernel>,
    groups: BTreeMap<&'static str, Group>,
    force_groups: [Group; 3],
    scan_levels: Vec<ScanLevel>,
    sort_group: Group,
    tick_group: Group,
    _scan_buffers: Vec<wgpu::Buffer>,
    /// The packed layout's arenas (empty in the separate layout).
    packing: Packing,
    /// Bumped whenever the arrays move (the packed layout repacks when the
    /// pair buffers grow): bind groups made outside must be remade.
    generation: u64,
    step: u32,
    /// `compute_forces` evaluates particles `first..end` (all by default).
    force_range: (u32, u32),
    /// The pair list's state (the pair-list path only).
    list: Option<pairs::ListGpu>,
    /// Rebuilds of the pair list so far (read after each batch).
    rebuilds: u32,
    /// A batch begun without waiting ([`GpuSim::begin_batch`]).
    in_flight: Option<pairs::Batch>,
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

pub use pellet_gpu::validate_wgsl;

impl GpuSim {
    /// Uploads `setup` (particles in input order, no history) to `gpu`, on
    /// the pair-list path.
    pub fn new(gpu: Arc<Gpu>, setup: &SimSetup) -> Result<Self, SimError> {
        Self::with_shaders(gpu, setup, &SimShaders::builtin())
    }

    /// As [`GpuSim::new`], sorting every step with history slots (the
    /// kernels the oracle [`CpuSim`](crate::cpu::CpuSim) mirrors).
    pub fn sorting(gpu: Arc<Gpu>, setup: &SimSetup) -> Result<Self, SimError> {
        Self::with_options(gpu, setup, &SimShaders::builtin(), Listing::SortEveryStep)
    }

    /// As [`GpuSim::new`], with the kernels compiled from `shaders` instead
    /// of the built-in ones (shader hot reload). Every stage is validated
    /// with naga first, and the pipelines are built inside a wgpu validation
    /// error scope: any error is returned, and nothing of the old simulation
    /// is touched.
    pub fn with_shaders(
        gpu: Arc<Gpu>,
        setup: &SimSetup,
        shaders: &SimShaders,
    ) -> Result<Self, SimError> {
        Self::with_options(gpu, setup, shaders, Listing::PairList)
    }

    /// The general constructor: `shaders`, and how contacts are found.
    pub fn with_options(
        gpu: Arc<Gpu>,
        setup: &SimSetup,
        shaders: &SimShaders,
        listing: Listing,
    ) -> Result<Self, SimError> {
        // Sorting every step runs in the separate layout only (the stage
        // parity tests' path, on devices that bind enough buffers).
        let layout = match listing {
            Listing::PairList => BindingLayout::for_device(&gpu),
            Listing::SortEveryStep => BindingLayout::Separate,
        };
        Self::with_layout(gpu, setup, shaders, listing, layout)
    }

    /// As [`GpuSim::with_options`], with the binding layout chosen by the
    /// caller (the parity tests run both on one device).
    pub fn with_layout(
        gpu: Arc<Gpu>,
        setup: &SimSetup,
        shaders: &SimShaders,
        listing: Listing,
        layout: BindingLayout,
    ) -> Result<Self, SimError> {
        pollster::block_on(Self::with_layout_async(
            gpu, setup, shaders, listing, layout,
        ))
    }

    /// [`GpuSim::new`] without blocking (the browser cannot block on the
    /// GPU): the pair-list path with the built-in kernels, in the layout
    /// the device needs ([`BindingLayout::for_device`]).
    pub async fn new_async(gpu: Arc<Gpu>, setup: &SimSetup) -> Result<Self, SimError> {
        let layout = BindingLayout::for_device(&gpu);
        Self::with_layout_async(
            gpu,
            setup,
            &SimShaders::builtin(),
            Listing::PairList,
            layout,
        )
        .await
    }

    /// [`GpuSim::with_layout`], awaiting the device's verdict on the
    /// pipelines instead of blocking for it.
    pub async fn with_layout_async(
        gpu: Arc<Gpu>,
        setup: &SimSetup,
        shaders: &SimShaders,
        listing: Listing,
        layout: BindingLayout,
    ) -> Result<Self, SimError> {
        if setup.periodic != 0 && listing == Listing::SortEveryStep {
            return Err(SimError::Unsupported(
                "periodic domains run on the pair lists (the sort-every-step kernels have no periods)",
            ));
        }
        if layout == BindingLayout::Packed && listing == Listing::SortEveryStep {
            return Err(SimError::Unsupported(
                "the packed binding layout runs the pair lists (sorting every step copies \
                 between arrays, which a packed arena cannot do within itself)",
            ));
        }
        let stages = shaders.compile_for(layout)?;
        let packing = match layout {
            BindingLayout::Separate => Packing::default(),
            BindingLayout::Packed => Packing::new(&crate::stages::packed::packed_bindings(
                shaders.get(crate::stages::COMMON_FILE).unwrap_or_default(),
            )),
        };
        let list_setup;
        let setup = match listing {
            Listing::PairList => {
                list_setup = setup.for_pair_list()?;
                &list_setup
            }
            Listing::SortEveryStep => setup,
        };
        let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let built = Self::build(gpu.clone(), setup, &stages, packing).and_then(|mut sim| {
            if listing == Listing::PairList {
                sim.init_list()?;
            }
            sim.repack()?;
            Ok(sim)
        });
        let scope = scope.pop().await;
        match (built, scope) {
            (Err(e), _) => Err(e),
            (Ok(_), Some(e)) => Err(SimError::Gpu(GpuError::Shader {
                name: "simulation shaders".into(),
                report: e.to_string(),
            })),
            (Ok(sim), None) => Ok(sim),
        }
    }

    fn build(
        gpu: Arc<Gpu>,
        setup: &SimSetup,
        stages: &[crate::stages::CompiledStage],
        packing: Packing,
    ) -> Result<Self, SimError> {
        let device = &gpu.device;
        let params = setup.params();
        buffers::check_limits(&gpu, &params)?;
        let buffers: BTreeMap<u32, Slot> = buffers::create_buffers(device, setup, &params)
            .into_iter()
            .map(|(b, buffer)| (b, Slot::whole(buffer)))
            .collect();
        let mode_buffers = buffers::create_mode_buffers(device, params.dt).map(Slot::whole);
        let kernels = bindings::create_kernels(device, stages, &params);
        let binder = Binder {
            device,
            kernels: &kernels,
            buffers: &buffers,
            packing: &packing,
        };
        let make_group =
            |name: &'static str, overrides: &[(u32, &Slot)]| binder.group(name, overrides);

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
        let (scan_levels, scan_buffers) = buffers::create_scan_levels(
            &binder,
            (bindings::B_CELL_COUNT, bindings::B_CELL_START),
            params.num_keys + 1,
        );

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
            packing,
            generation: 0,
            step: 0,
            force_range: (0, u32::MAX),
            list: None,
            rebuilds: 0,
            in_flight: None,
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

    /// One of the particle arrays, in the current (cell) order: its own
    /// buffer, or its range of an arena (bind it with [`Slot::binding`]).
    /// The arrays move when [`GpuSim::generation`] changes.
    pub fn buffer(&self, which: SimBuffer) -> &Slot {
        let binding = match which {
            SimBuffer::Positions => B_POS,
            SimBuffer::Velocities => B_VEL,
            SimBuffer::Info => B_META,
        };
        &self.buffers[&binding]
    }

    /// Changes whenever the arrays move to new buffers (the packed layout
    /// repacks when the pair buffers grow): bind groups made from
    /// [`GpuSim::buffer`] must then be remade.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// How the kernels' arrays are bound.
    pub fn binding_layout(&self) -> BindingLayout {
        if self.packing.arena_of.is_empty() {
            BindingLayout::Separate
        } else {
            BindingLayout::Packed
        }
    }

    /// What every bind group is made from.
    fn binder(&self) -> Binder<'_> {
        Binder {
            device: &self.gpu.device,
            kernels: &self.kernels,
            buffers: &self.buffers,
            packing: &self.packing,
        }
    }

    /// Every bind group of the simulation, with the binder (the fields
    /// apart, so both can be borrowed).
    fn groups_mut(&mut self) -> (Binder<'_>, Vec<&mut Group>) {
        let mut all: Vec<&mut Group> = Vec::new();
        all.extend(self.groups.values_mut());
        all.extend(self.force_groups.iter_mut());
        all.push(&mut self.sort_group);
        all.push(&mut self.tick_group);
        for level in &mut self.scan_levels {
            all.push(&mut level.block);
            all.extend(level.add.as_mut());
        }
        if let Some(list) = self.list.as_mut() {
            all.extend(list.groups.values_mut().flat_map(|g| g.iter_mut()));
            for level in list.row_scan.iter_mut().chain(list.low_scan.iter_mut()) {
                all.push(&mut level.block);
                all.extend(level.add.as_mut());
            }
        }
        let binder = Binder {
            device: &self.gpu.device,
            kernels: &self.kernels,
            buffers: &self.buffers,
            packing: &self.packing,
        };
        (binder, all)
    }

    /// Packed layout: moves every array (the simulation's own and those
    /// only some groups bind) into fresh arenas and remakes every bind
    /// group. The separate layout has nothing to do.
    // A buffer orders by its id, which never changes.
    #[allow(clippy::mutable_key_type)]
    fn repack(&mut self) -> Result<(), SimError> {
        if self.packing.arena_of.is_empty() {
            return Ok(());
        }
        let moved = {
            let mut slots: Vec<(u32, Slot)> =
                self.buffers.iter().map(|(b, s)| (*b, s.clone())).collect();
            let (_, groups) = self.groups_mut();
            for g in groups {
                slots.extend(g.overrides().iter().cloned());
            }
            let refs: Vec<(u32, &Slot)> = slots.iter().map(|(b, s)| (*b, s)).collect();
            let gpu = self.gpu.clone();
            slots::pack(&gpu, &mut self.packing, &refs)?
        };
        // Every slot that was moved, whatever binding names it (the prefix
        // sums bind the arenas' ranges through bindings of their own).
        let remap = |slot: &mut Slot| {
            if let Some(new) = moved.get(&(slot.buffer.clone(), slot.offset)) {
                *slot = new.clone();
            }
        };
        for slot in self.buffers.values_mut() {
            remap(slot);
        }
        {
            let (_, groups) = self.groups_mut();
            for g in groups {
                for (_, slot) in g.overrides_mut().iter_mut() {
                    remap(slot);
                }
            }
        }
        let (binder, groups) = self.groups_mut();
        for g in groups {
            binder.rebuild(g);
        }
        self.generation += 1;
        Ok(())
    }

    /// Blocks until the GPU has finished everything submitted.
    pub fn wait(&self) -> Result<(), SimError> {
        self.gpu
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| SimError::Gpu(GpuError::Readback(e.to_string())))?;
        Ok(())
    }

    /// Steps recorded so far.
    pub fn steps(&self) -> u32 {
        self.step
    }

    /// How this simulation finds contacts.
    pub fn listing(&self) -> Listing {
        if self.list.is_some() {
            Listing::PairList
        } else {
            Listing::SortEveryStep
        }
    }

    /// Pair-list rebuilds so far (as of the last finished batch); on the
    /// sort-every-step path, one per step and the first.
    pub fn rebuilds(&self) -> u64 {
        if self.list.is_some() {
            u64::from(self.rebuilds)
        } else {
            u64::from(self.step) + 1
        }
    }
}
