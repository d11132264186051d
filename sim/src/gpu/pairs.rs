//! The GPU pair-list path (stage `pairs`, `stages/pairs.wgsl`): its
//! buffers, the indirect dispatches the device gates, the encoding of a
//! step, and the host's part when a rebuild outgrows the buffers.
//!
//! Every dispatch of a step is indirect. `list_gate`, one thread at each
//! force evaluation, writes each dispatch slot's workgroup counts from
//! `dispatch_template`: rebuild slots only when some particle moved more
//! than half the skin, step slots unless the batch halted. So the host
//! records many steps in one command buffer and never waits between them.
//! On CPU adapters (lavapipe), where a dispatch costs about 0.1 ms even
//! with no workgroups, the steps are recorded without the rebuild's
//! dispatches instead: `list_gate_on_demand` halts the batch when a rebuild
//! is due, and the host resumes from that evaluation with it recorded (one
//! round trip per rebuild; the same kernels on the same data, so the same
//! bits).
//!
//! The pair buffers hold `capacity` pairs (first eight per particle). A
//! rebuild that needs more sets `LS_HALT` and every later dispatch of the
//! batch runs no workgroups. [`GpuSim::advance`] then reads the state back,
//! grows the buffers (keeping the old list's springs), and resumes from
//! the halted evaluation: the same kernels on the same data, so the result
//! is the one a larger first capacity would have given.

use std::collections::BTreeMap;

use pellet_formats::scene::Integrator;
use pellet_gpu::{dispatch_2d, wgpu};

use super::bindings::*;
use super::buffers::{STORAGE, ScanLevel, create_scan_levels, init_buffer, zeroed_buffer};
use super::{GpuSim, Group, PairBlockInput, PairBlockOutput, Slot, WG};
use crate::stages::common::{Params, ROLL_EPSD2, ROLL_NONE};
use crate::stages::pairs::ListBuffers;
use crate::{ForceKind, NUM_COUNTERS, SimError};
use pellet_gpu::readback::PendingRead;

/// Slots of `list_state` (`LS_*` in `pairs.wgsl`).
#[derive(Debug, Clone, Copy)]
pub(super) enum ListState {
    Rebuild = 0,
    Halt = 1,
    Needed = 2,
    Rebuilds = 3,
    Capacity = 4,
    Slots = 5,
}

const LIST_STATE_LEN: usize = 8;
/// Dispatch slot kinds (`SLOT_*` in `pairs.wgsl`).
const SLOT_STEP: u32 = 0;
const SLOT_REBUILD: u32 = 1;
/// Workgroup counts follow the list's length (set on the device).
const SLOT_PAIRS: u32 = 2;
/// Added to `ListState::Halt` by `list_gate_on_demand` (`pairs.wgsl`).
const HALT_REBUILD_DUE: u32 = 16;
/// Pairs per particle the buffers hold at first.
const PAIRS_PER_PARTICLE: u32 = 8;

fn groups_for(count: u32) -> [u32; 3] {
    dispatch_2d(count.div_ceil(WG).max(1))
}

/// The pair-list path's own state on the host.
pub(super) struct ListGpu {
    /// Pairs the buffers hold.
    pub(super) capacity: u32,
    /// Workgroup counts and kind of each dispatch slot.
    template: Vec<[u32; 4]>,
    slot_of: BTreeMap<([u32; 3], u32), u32>,
    /// One bind group per force kind for each kernel of the stage.
    pub(super) groups: BTreeMap<&'static str, [Group; 3]>,
    pub(super) row_scan: Vec<ScanLevel>,
    pub(super) low_scan: Vec<ScanLevel>,
    _scan_buffers: Vec<wgpu::Buffer>,
    /// Whether the steps of a batch are recorded without the rebuild's
    /// dispatches (`list_gate_on_demand` halts the batch when one is due
    /// and the host resumes with it recorded): on CPU adapters, where a
    /// dispatch with no workgroups still costs about 0.1 ms.
    pub(super) rebuild_on_demand: bool,
}

/// A batch submitted by [`GpuSim::begin_batch`] and not yet finished.
#[derive(Debug)]
pub(super) struct Batch {
    /// The clock the batch ends at.
    wanted: u32,
    /// The list state, clock and counters on their way back.
    read: PendingRead,
}

/// The dispatch slots a simulation of these sizes uses.
fn slot_template(
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
    pub(super) fn init_list(&mut self) -> Result<(), SimError> {
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

    fn list(&self) -> &ListGpu {
        self.list
            .as_ref()
            .unwrap_or_else(|| unreachable!("pair-list path without its list"))
    }

    fn indirect(
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
    fn step_kernel(&self, pass: &mut wgpu::ComputePass<'_>, name: &'static str) {
        let group = self
            .groups
            .get(name)
            .unwrap_or_else(|| &self.list().groups[name][0]);
        self.indirect(pass, name, group, groups_for(self.params.n), SLOT_STEP);
    }

    /// A body kernel of the step (none without bodies).
    fn step_body_kernel(&self, pass: &mut wgpu::ComputePass<'_>, name: &'static str) {
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

    fn rebuild_kernel(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        name: &'static str,
        group: &Group,
        count: u32,
    ) {
        self.indirect(pass, name, group, groups_for(count), SLOT_REBUILD);
    }

    fn pair_group(&self, name: &str, kind: ForceKind) -> &Group {
        &self.list().groups[name][kind as usize]
    }

    /// One workgroup of `name` with the bind group of `kind`'s mode.
    fn direct(&self, pass: &mut wgpu::ComputePass<'_>, name: &str, kind: ForceKind) {
        pass.set_pipeline(&self.kernels[name].pipeline);
        pass.set_bind_group(0, self.pair_group(name, kind).get(), &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }

    /// The rebuild from the pair count on: count, the two prefix sums, fill,
    /// the halt check, and the partner index.
    fn encode_fill(&self, pass: &mut wgpu::ComputePass<'_>, kind: ForceKind) {
        let n = self.params.n;
        let list = self.list();
        self.rebuild_kernel(pass, "pair_count", self.pair_group("pair_count", kind), n);
        for scan in [&list.row_scan, &list.low_scan] {
            for level in scan {
                self.rebuild_kernel(pass, "scan_block", &level.block, level.len);
            }
            for level in scan.iter().rev() {
                if let Some(add) = &level.add {
                    self.rebuild_kernel(pass, "scan_add", add, level.len);
                }
            }
        }
        self.rebuild_kernel(pass, "pair_fill", self.pair_group("pair_fill", kind), n);
        self.direct(pass, "list_halt", ForceKind::Commit);
        self.rebuild_kernel(
            pass,
            "pair_fill_low",
            self.pair_group("pair_fill_low", kind),
            n,
        );
    }

    /// `pair_forces` (one invocation per pair) or `particle_forces` (one
    /// per particle).
    fn pair_kernel(&self, pass: &mut wgpu::ComputePass<'_>, name: &str, kind: ForceKind) {
        let (groups, slot_kind) = if name.starts_with("pair_forces") {
            (self.pairs_slot_groups(), SLOT_PAIRS)
        } else {
            (groups_for(self.params.n), SLOT_STEP)
        };
        self.indirect(pass, name, self.pair_group(name, kind), groups, slot_kind);
    }

    /// The key of the pair slot in `slot_of` (its template counts).
    fn pairs_slot_groups(&self) -> [u32; 3] {
        let list = self.list();
        list.template
            .iter()
            .find(|t| t[3] == SLOT_PAIRS)
            .map_or([1, 1, 1], |t| [t[0], t[1], t[2]])
    }

    /// One force evaluation: the skin check, the gate, the rebuild if due,
    /// the forces (`rk2`: RK2's second evaluation, which also gathers the
    /// start-of-step copies).
    /// `check`: run the skin check (false when the fused closing/opening
    /// kick of the previous step did it and no body particles moved since).
    /// `counted`: count the touching pairs (the batch's last step, whose
    /// counters are read back; the others skip the count's atomics).
    /// `rebuild`: record the rebuild's dispatches (gated on the device);
    /// without them a due rebuild halts the batch at the gate.
    /// The per-particle sums follow in [`Self::encode_step_tail`].
    fn encode_evaluation(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        kind: ForceKind,
        rk2: bool,
        check: bool,
        counted: bool,
        rebuild: bool,
    ) {
        let n = self.params.n;
        let keys = self.params.num_keys;
        if check {
            self.step_kernel(pass, "skin_check");
        }
        if !rebuild {
            self.direct(pass, "list_gate_on_demand", kind);
            self.pair_kernel(pass, pair_forces_kernel(counted), kind);
            return;
        }
        self.direct(pass, "list_gate", ForceKind::Commit);
        let g = |name: &str| self.pair_group(name, kind);
        self.rebuild_kernel(pass, "save_list", g("save_list"), n + 1);
        self.rebuild_kernel(pass, "clear_cells", g("clear_cells"), keys + 1);
        self.rebuild_kernel(pass, "cell_keys", &self.groups["cell_keys"], n);
        for level in &self.scan_levels {
            self.rebuild_kernel(pass, "scan_block", &level.block, level.len);
        }
        for level in self.scan_levels.iter().rev() {
            if let Some(add) = &level.add {
                self.rebuild_kernel(pass, "scan_add", add, level.len);
            }
        }
        self.rebuild_kernel(pass, "scatter", &self.groups["scatter"], n);
        self.rebuild_kernel(pass, "sort_cells", &self.sort_group, keys);
        self.rebuild_kernel(
            pass,
            "reorder_particles",
            &self.groups["reorder_particles"],
            n,
        );
        self.rebuild_kernel(pass, "commit_reorder", g("commit_reorder"), n);
        if rk2 {
            self.rebuild_kernel(pass, "reorder_rk2", &self.groups["reorder_rk2"], n);
            self.rebuild_kernel(pass, "commit_rk2", g("commit_rk2"), n);
        }
        self.encode_fill(pass, kind);
        self.pair_kernel(pass, pair_forces_kernel(counted), kind);
    }

    /// What follows the pair forces of an evaluation of `kind` to the end
    /// of its step: the per-particle sums, the integration, the bodies, the
    /// clock. Velocity Verlet fuses its closing half kick into the sums,
    /// and, unless this is the batch's `last` step, the next step's opening
    /// kick, drift and skin check too.
    fn encode_step_tail(&self, pass: &mut wgpu::ComputePass<'_>, kind: ForceKind, last: bool) {
        match (kind, self.integrator) {
            (ForceKind::Prime, _) => {
                self.pair_kernel(pass, "particle_forces", kind);
                self.step_body_kernel(pass, "body_reduce");
            }
            (ForceKind::Commit, Integrator::VelocityVerlet) => {
                let sums = if last {
                    "particle_forces_end"
                } else {
                    "particle_forces_end_begin"
                };
                self.pair_kernel(pass, sums, kind);
                self.step_body_kernel(pass, "body_reduce");
                self.step_body_kernel(pass, "body_end");
                self.step_body_kernel(pass, "body_particles");
                self.tick(pass);
            }
            (ForceKind::Trial, _) => {
                self.pair_kernel(pass, "particle_forces", kind);
                self.step_kernel(pass, "rk2_mid");
                let rebuild = !self.list().rebuild_on_demand;
                self.encode_evaluation(pass, ForceKind::Commit, true, true, last, rebuild);
                self.encode_step_tail(pass, ForceKind::Commit, last);
            }
            (ForceKind::Commit, Integrator::Rk2) => {
                self.pair_kernel(pass, "particle_forces", kind);
                self.step_kernel(pass, "rk2_end");
                self.tick(pass);
            }
        }
    }

    fn tick(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.indirect(pass, "tick", &self.tick_group, groups_for(1), SLOT_STEP);
    }

    fn clear_list_counters(&self, enc: &mut wgpu::CommandEncoder) {
        // Contacts and wall contacts; the occupancy is the largest at any build.
        self.buffers[&B_COUNTERS].clear(enc, 0, Some(8));
    }

    /// Records `steps` whole steps of the pair-list path, each in its own
    /// pass after the per-step counters are cleared. `begun`: the first
    /// step's opening kick and drift were done by the step before it (a
    /// batch resumed after a halt).
    pub(super) fn encode_list_steps(
        &self,
        enc: &mut wgpu::CommandEncoder,
        steps: u32,
        begun: bool,
    ) {
        let verlet = self.integrator == Integrator::VelocityVerlet;
        let bodies = self.params.body_count > 0;
        let rebuild = !self.list().rebuild_on_demand;
        let mut begun = begun && verlet;
        for s in 0..steps {
            let last = s + 1 == steps;
            self.clear_list_counters(enc);
            self.encode_pass(enc, "step", |sim, pass| {
                if verlet {
                    if !begun {
                        sim.step_kernel(pass, "verlet_begin");
                    }
                    sim.step_body_kernel(pass, "body_begin");
                    sim.step_body_kernel(pass, "body_particles");
                    let check = !begun || bodies;
                    sim.encode_evaluation(pass, ForceKind::Commit, false, check, last, rebuild);
                    sim.encode_step_tail(pass, ForceKind::Commit, last);
                } else {
                    sim.encode_evaluation(pass, ForceKind::Trial, false, true, last, rebuild);
                    sim.encode_step_tail(pass, ForceKind::Trial, last);
                }
            });
            begun = verlet && !last;
        }
    }

    /// Records the first evaluation (the first build, then forces).
    pub(super) fn encode_list_prime(&self, enc: &mut wgpu::CommandEncoder) {
        self.encode_pass(enc, "prime", |s, pass| {
            s.encode_evaluation(pass, ForceKind::Prime, false, true, true, true);
            s.encode_step_tail(pass, ForceKind::Prime, true);
        });
    }

    /// Every dispatch slot's counts as the host writes them: the template's,
    /// the pair slot's for the whole capacity (the kernel stops at the end).
    fn all_slots_on(&self) -> Vec<u32> {
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

    /// The list state (`ListState` slots), read back (waits for the GPU).
    pub(super) fn list_state(&self) -> Result<[u32; LIST_STATE_LEN], SimError> {
        let bytes = self.buffers[&B_LIST_STATE].read(&self.gpu)?;
        let v: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
        Ok(std::array::from_fn(|k| v.get(k).copied().unwrap_or(0)))
    }

    /// After a submission: while a rebuild halted the batch, grows the pair
    /// buffers and resumes from the halted evaluation; `steps_wanted` is
    /// the clock the batch should end at. Returns the rebuilds so far.
    pub(super) fn finish_list_batch(&mut self, steps_wanted: u32) -> Result<u32, SimError> {
        loop {
            let state = self.list_state()?;
            if state[ListState::Halt as usize] == 0 {
                return Ok(state[ListState::Rebuilds as usize]);
            }
            let clock: Vec<u32> =
                bytemuck::pod_collect_to_vec(&self.buffers[&B_CLOCK].read(&self.gpu)?);
            let done = clock.first().copied().unwrap_or(0);
            self.resume_halted(&state, done, steps_wanted)?;
        }
    }

    /// A batch halted by a rebuild that outgrew the pair buffers (`state`
    /// read back, the kernels' clock at `done`): grows the buffers and
    /// submits the rest of the batch, from the halted evaluation on.
    fn resume_halted(
        &mut self,
        state: &[u32; LIST_STATE_LEN],
        done: u32,
        steps_wanted: u32,
    ) -> Result<(), SimError> {
        let halt = state[ListState::Halt as usize];
        // Halted at the gate of an evaluation recorded without its due
        // rebuild, or by a rebuild that outgrew the buffers.
        let due = halt > HALT_REBUILD_DUE;
        let kind = match halt.saturating_sub(if due { HALT_REBUILD_DUE + 1 } else { 1 }) {
            0 => ForceKind::Commit,
            1 => ForceKind::Trial,
            _ => ForceKind::Prime,
        };
        if !due {
            let needed = state[ListState::Needed as usize];
            self.grow_pairs(needed.saturating_add(needed / 2).max(needed))?;
        }
        // Every slot on for the resumed rebuild; the next gate rewrites them.
        let args = self.all_slots_on();
        let q = &self.gpu.queue;
        self.buffers[&B_DISPATCH_ARGS].write(q, 0, bytemuck::cast_slice(&args));
        self.buffers[&B_LIST_STATE].write(
            q,
            ListState::Halt as u64 * 4,
            bytemuck::cast_slice(&[0u32, 0u32]),
        );
        let resumed = u32::from(kind != ForceKind::Prime);
        let remaining = steps_wanted.saturating_sub(done + resumed);
        let mut enc = self.encoder();
        self.encode_pass(&mut enc, "resume", |s, pass| {
            let last = remaining == 0;
            if due {
                // The whole evaluation again, the rebuild recorded (its
                // gate finds LS_REBUILD still set; the skin check repeats
                // on unmoved particles and changes nothing).
                let rk2 = kind == ForceKind::Commit && s.integrator == Integrator::Rk2;
                s.encode_evaluation(pass, kind, rk2, true, last, true);
            } else {
                s.encode_fill(pass, kind);
                s.pair_kernel(pass, pair_forces_kernel(last), kind);
            }
            s.encode_step_tail(pass, kind, last);
        });
        // A resumed velocity Verlet step that was not the last did the
        // next one's opening kick and drift.
        let begun = kind != ForceKind::Prime && remaining > 0;
        self.encode_list_steps(&mut enc, remaining, begun);
        self.submit(enc);
        Ok(())
    }

    /// Starts reading the list state, the clock and the counters back
    /// without waiting (see [`GpuSim::poll_batch`]).
    fn start_batch_read(&self) -> PendingRead {
        let state = &self.buffers[&B_LIST_STATE];
        let clock = &self.buffers[&B_CLOCK];
        let counters = &self.buffers[&B_COUNTERS];
        PendingRead::start(
            &self.gpu.device,
            &self.gpu.queue,
            &[
                (&state.buffer, state.offset, LIST_STATE_LEN as u64 * 4),
                (&clock.buffer, clock.offset, 4),
                (&counters.buffer, counters.offset, NUM_COUNTERS as u64 * 4),
            ],
        )
    }

    /// Submits `steps` steps (0: the first evaluation, which [`GpuSim::prime`]
    /// does) on the pair-list path and returns at once: the browser's way,
    /// which cannot wait for the GPU. [`GpuSim::poll_batch`] finishes the
    /// batch (growing the pair buffers and resuming, should a rebuild
    /// outgrow them); one batch at a time.
    pub fn begin_batch(&mut self, steps: u32) -> Result<(), SimError> {
        if self.list.is_none() {
            return Err(SimError::Unsupported(
                "batches without waiting run on the pair-list path",
            ));
        }
        if self.in_flight.is_some() {
            return Err(SimError::Unsupported(
                "a batch is still in flight: poll it to the end first",
            ));
        }
        let mut enc = self.encoder();
        if steps == 0 {
            self.encode_list_prime(&mut enc);
        } else {
            self.encode_list_steps(&mut enc, steps, false);
        }
        self.submit(enc);
        let wanted = self.step + steps;
        self.in_flight = Some(Batch {
            wanted,
            read: self.start_batch_read(),
        });
        Ok(())
    }

    /// Whether the batch in flight has finished: `Some(counters)` when it
    /// has (the step count, rebuilds and counters are then current), `None`
    /// while it runs or when none was begun. Never blocks.
    pub fn poll_batch(&mut self) -> Result<Option<[u32; NUM_COUNTERS]>, SimError> {
        let Some(batch) = self.in_flight.as_ref() else {
            return Ok(None);
        };
        let Some(bytes) = batch.read.try_take(&self.gpu.device) else {
            return Ok(None);
        };
        let wanted = batch.wanted;
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes?);
        let mut state = [0u32; LIST_STATE_LEN];
        state.copy_from_slice(&words[..LIST_STATE_LEN]);
        if state[ListState::Halt as usize] != 0 {
            let done = words[LIST_STATE_LEN];
            self.resume_halted(&state, done, wanted)?;
            self.in_flight = Some(Batch {
                wanted,
                read: self.start_batch_read(),
            });
            return Ok(None);
        }
        self.in_flight = None;
        self.rebuilds = state[ListState::Rebuilds as usize];
        self.step = wanted;
        let mut counters = [0u32; NUM_COUNTERS];
        counters.copy_from_slice(&words[LIST_STATE_LEN + 1..][..NUM_COUNTERS]);
        Ok(Some(counters))
    }

    /// Replaces the pair buffers with ones for `capacity` pairs, keeping the
    /// old list's springs (the resumed rebuild carries them over).
    fn grow_pairs(&mut self, capacity: u32) -> Result<(), SimError> {
        if capacity <= self.list().capacity {
            return Ok(());
        }
        self.resize_pairs(capacity)
    }

    fn resize_pairs(&mut self, capacity: u32) -> Result<(), SimError> {
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

    /// Writes every dispatch slot on (the stages below run alone).
    fn enable_all_slots(&self) {
        let args = self.all_slots_on();
        self.buffers[&B_DISPATCH_ARGS].write(&self.gpu.queue, 0, bytemuck::cast_slice(&args));
    }

    /// Replaces the list buffers with `list` (the CPU twin's, so a stage can
    /// be compared from identical inputs); the pair buffers grow to hold it.
    pub fn upload_list(&mut self, list: &ListBuffers) -> Result<(), SimError> {
        let need = list.pair_j.len().max(list.old_hist.len()) as u32;
        self.grow_pairs(need)?;
        let q = &self.gpu.queue;
        let b = &self.buffers;
        let write = |binding: u32, bytes: &[u8]| {
            if !bytes.is_empty() {
                b[&binding].write(q, 0, bytes);
            }
        };
        write(B_POS_REF, bytemuck::cast_slice(&list.pos_ref));
        write(B_ROW_COUNT, bytemuck::cast_slice(&list.row_count));
        write(B_PAIR_START, bytemuck::cast_slice(&list.pair_start));
        write(B_LOW_COUNT, bytemuck::cast_slice(&list.low_count));
        write(B_LOW_START, bytemuck::cast_slice(&list.low_start));
        write(B_PAIR_I, bytemuck::cast_slice(&list.pair_i));
        write(B_PAIR_J, bytemuck::cast_slice(&list.pair_j));
        write(B_PAIR_CONST, bytemuck::cast_slice(&list.pair_const));
        write(B_WALL_MASK, bytemuck::cast_slice(&list.wall_mask));
        write(B_PAIR_HIST, bytemuck::cast_slice(&list.pair_hist));
        write(B_PAIR_FORCE, bytemuck::cast_slice(&list.pair_force));
        write(B_PAIR_TORQUE, bytemuck::cast_slice(&list.pair_torque));
        write(B_LOW_INDEX, bytemuck::cast_slice(&list.low_index));
        write(B_OLD_START, bytemuck::cast_slice(&list.old_start));
        write(B_OLD_HIST, bytemuck::cast_slice(&list.old_hist));
        write(B_WALL_HIST, bytemuck::cast_slice(&list.wall_hist));
        write(B_WALL_HIST_OLD, bytemuck::cast_slice(&list.wall_hist_old));
        write(B_PAIR_ROLL, bytemuck::cast_slice(&list.pair_roll));
        write(B_PAIR_ROLL_M, bytemuck::cast_slice(&list.pair_roll_m));
        write(B_OLD_ROLL, bytemuck::cast_slice(&list.old_roll));
        write(B_WALL_ROLL, bytemuck::cast_slice(&list.wall_roll));
        write(B_WALL_ROLL_OLD, bytemuck::cast_slice(&list.wall_roll_old));
        let state = [u32::from(list.rebuild), 0, 0, list.rebuilds];
        write(B_LIST_STATE, bytemuck::cast_slice(&state));
        Ok(())
    }

    /// Runs one force evaluation of the pair-list path alone, as a step
    /// runs it (`rk2`: RK2's second).
    pub fn stage_evaluation(&mut self, kind: ForceKind, rk2: bool) -> Result<(), SimError> {
        self.enable_all_slots();
        let mut enc = self.encoder();
        self.encode_pass(&mut enc, "evaluation", |s, pass| {
            s.encode_evaluation(pass, kind, rk2, true, true, true);
            s.pair_kernel(pass, "particle_forces", kind);
        });
        self.submit(enc);
        let wanted = self.step;
        self.rebuilds = self.finish_list_batch(wanted)?;
        Ok(())
    }

    /// Runs kernel `pair_forces` or `particle_forces` alone.
    pub fn stage_list_kernel(&mut self, name: &'static str, kind: ForceKind) {
        self.enable_all_slots();
        let mut enc = self.encoder();
        self.encode_pass(&mut enc, name, |s, pass| s.pair_kernel(pass, name, kind));
        self.submit(enc);
    }

    /// Shrinks (or grows) the pair buffers to `capacity` pairs before the
    /// first build (tests: force the grow-and-resume path).
    pub fn set_pair_capacity(&mut self, capacity: u32) -> Result<(), SimError> {
        self.resize_pairs(capacity.max(1))
    }

    /// Records a batch's steps without the rebuild's dispatches (`true`: a
    /// due rebuild halts the batch and the host resumes with it recorded)
    /// or with them, gated on the device (`false`). The default is `true`
    /// on CPU adapters, where every dispatch costs about 0.1 ms even with
    /// no workgroups, and `false` elsewhere; both give the same bits.
    pub fn set_rebuild_on_demand(&mut self, on_demand: bool) {
        if let Some(list) = self.list.as_mut() {
            list.rebuild_on_demand = on_demand;
        }
    }

    /// Pairs the list buffers hold now (they grow when a rebuild needs more).
    pub fn pair_capacity(&self) -> Option<u32> {
        self.list.as_ref().map(|l| l.capacity)
    }

    /// The list buffers, read back (the parity tests compare them with the
    /// CPU twin's [`ListBuffers`]); `None` on the sort-every-step path.
    pub fn download_list(&self) -> Result<Option<ListBuffers>, SimError> {
        if self.list.is_none() {
            return Ok(None);
        }
        let n = self.params.n as usize;
        let walls = n * self.params.wall_count as usize;
        let rows = |b: u32| self.read::<u32>(b, n + 1);
        let pair_start = rows(B_PAIR_START)?;
        let total = pair_start[n] as usize;
        let old_start = rows(B_OLD_START)?;
        let state = self.list_state()?;
        let epsd2 = self.params.rolling_model == ROLL_EPSD2;
        let rolling = self.params.rolling_model != ROLL_NONE;
        let old_pairs = old_start[n] as usize;
        Ok(Some(ListBuffers {
            pos_ref: self.read(B_POS_REF, n)?,
            row_count: rows(B_ROW_COUNT)?,
            low_count: rows(B_LOW_COUNT)?,
            low_start: rows(B_LOW_START)?,
            pair_i: self.read(B_PAIR_I, total)?,
            pair_j: self.read(B_PAIR_J, total)?,
            pair_const: self.read(B_PAIR_CONST, total)?,
            wall_mask: self.read(B_WALL_MASK, n)?,
            pair_hist: self.read(B_PAIR_HIST, total)?,
            pair_force: self.read(B_PAIR_FORCE, total)?,
            pair_torque: self.read(B_PAIR_TORQUE, total)?,
            low_index: self.read(B_LOW_INDEX, total)?,
            old_hist: self.read(B_OLD_HIST, old_start[n] as usize)?,
            old_start,
            pair_start,
            wall_hist: self.read(B_WALL_HIST, walls)?,
            wall_hist_old: self.read(B_WALL_HIST_OLD, walls)?,
            pair_roll: self.read(B_PAIR_ROLL, if epsd2 { total } else { 0 })?,
            pair_roll_m: self.read(B_PAIR_ROLL_M, if rolling { total } else { 0 })?,
            old_roll: self.read(B_OLD_ROLL, if epsd2 { old_pairs } else { 0 })?,
            wall_roll: self.read(B_WALL_ROLL, if epsd2 { walls } else { 0 })?,
            wall_roll_old: self.read(B_WALL_ROLL_OLD, if epsd2 { walls } else { 0 })?,
            rebuild: state[ListState::Rebuild as usize] != 0,
            rebuilds: state[ListState::Rebuilds as usize],
        }))
    }
}

impl GpuSim {
    // ---- block-wise stepping on a host-built list (`crate::blocks`) ---------

    /// Uploads one block of a host-built pair list (its particles and halo,
    /// every index local to the block), growing the pair buffers if needed.
    /// Set the particle count and force range first.
    pub fn upload_pair_block(&mut self, b: &PairBlockInput<'_>) -> Result<(), SimError> {
        self.grow_pairs(b.pair_j.len() as u32)?;
        let q = &self.gpu.queue;
        let buffers = &self.buffers;
        let write = |binding: u32, bytes: &[u8]| {
            if !bytes.is_empty() {
                buffers[&binding].write(q, 0, bytes);
            }
        };
        write(B_POS, bytemuck::cast_slice(b.pos));
        write(B_VEL, bytemuck::cast_slice(b.vel));
        write(B_ANGVEL, bytemuck::cast_slice(b.angvel));
        write(B_META, bytemuck::cast_slice(b.meta));
        write(B_PAIR_START, bytemuck::cast_slice(b.pair_start));
        write(B_LOW_START, bytemuck::cast_slice(b.low_start));
        write(B_LOW_INDEX, bytemuck::cast_slice(b.low_index));
        write(B_PAIR_I, bytemuck::cast_slice(b.pair_i));
        write(B_PAIR_J, bytemuck::cast_slice(b.pair_j));
        write(B_PAIR_CONST, bytemuck::cast_slice(b.pair_const));
        write(B_PAIR_HIST, bytemuck::cast_slice(b.pair_hist));
        write(B_WALL_MASK, bytemuck::cast_slice(b.wall_mask));
        write(B_WALL_HIST, bytemuck::cast_slice(b.wall_hist));
        write(B_PAIR_ROLL, bytemuck::cast_slice(b.pair_roll));
        write(B_WALL_ROLL, bytemuck::cast_slice(b.wall_roll));
        Ok(())
    }

    /// `pair_forces` over the uploaded block's `pairs`, then
    /// `particle_forces` over its force range, in one submission (direct
    /// dispatches: a block's sizes are not the dispatch slots'). The springs advance as
    /// `kind` says (committed in place, or not for RK2's trial).
    pub fn block_pair_forces(&mut self, kind: ForceKind, pairs: u32) {
        let mut enc = self.encoder();
        self.encode_pass(&mut enc, "block forces", |s, pass| {
            for (name, count) in [("pair_forces", pairs), ("particle_forces", s.params.n)] {
                let [x, y, z] = groups_for(count);
                pass.set_pipeline(&s.kernels[name].pipeline);
                pass.set_bind_group(0, s.pair_group(name, kind).get(), &[]);
                pass.dispatch_workgroups(x, y, z);
            }
        });
        self.submit(enc);
    }

    /// Reads back the forces and torques of particles `first..end`, the
    /// springs of pairs `pairs`, and those particles' wall springs.
    pub fn download_pair_block(
        &self,
        first: u32,
        end: u32,
        pairs: std::ops::Range<u32>,
    ) -> Result<PairBlockOutput, SimError> {
        let walls = u64::from(self.params.wall_count);
        let read = |binding: u32, offset: u64, size: u64| -> Result<Vec<u8>, SimError> {
            Ok(self.buffers[&binding].read_range(&self.gpu, offset, size)?)
        };
        let (a, n) = (u64::from(first), u64::from(end - first));
        let (p, m) = (u64::from(pairs.start), u64::from(pairs.end - pairs.start));
        let epsd2 = self.params.rolling_model == ROLL_EPSD2;
        Ok(PairBlockOutput {
            pair_roll: if epsd2 {
                bytemuck::pod_collect_to_vec(&read(B_PAIR_ROLL, p * 16, m * 16)?)
            } else {
                Vec::new()
            },
            wall_roll: if epsd2 {
                bytemuck::pod_collect_to_vec(&read(B_WALL_ROLL, a * walls * 16, n * walls * 16)?)
            } else {
                Vec::new()
            },
            force: bytemuck::pod_collect_to_vec(&read(B_FORCE, a * 16, n * 16)?),
            torque: bytemuck::pod_collect_to_vec(&read(B_TORQUE, a * 16, n * 16)?),
            pair_hist: bytemuck::pod_collect_to_vec(&read(B_PAIR_HIST, p * 16, m * 16)?),
            wall_hist: bytemuck::pod_collect_to_vec(&read(
                B_WALL_HIST,
                a * walls * 16,
                n * walls * 16,
            )?),
        })
    }
}

/// The lengths of a prefix sum's levels over `len` entries.
fn scan_lens(len: u32) -> Vec<u32> {
    let mut lens = vec![len];
    while *lens.last().unwrap_or(&1) > WG {
        let last = *lens.last().unwrap_or(&1);
        lens.push(last.div_ceil(WG));
    }
    lens
}

/// The pair-forces kernel of an evaluation: `pair_forces`, which also
/// counts the touching pairs, where the counters will be read (`counted`),
/// else `pair_forces_uncounted`.
fn pair_forces_kernel(counted: bool) -> &'static str {
    if counted {
        "pair_forces"
    } else {
        "pair_forces_uncounted"
    }
}
