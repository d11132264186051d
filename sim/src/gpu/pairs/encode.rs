//! The encoding of the pair-list path's work: one force evaluation (skin
//! check, gate, rebuild, forces), the rest of its step, and whole steps.

use pellet_formats::scene::Integrator;
use pellet_gpu::wgpu;

use super::{SLOT_PAIRS, SLOT_STEP, groups_for, pair_forces_kernel};
use crate::ForceKind;
use crate::gpu::GpuSim;
use crate::gpu::bindings::*;

impl GpuSim {
    /// The rebuild from the pair count on: count, the two prefix sums, fill,
    /// the halt check, and the partner index.
    pub(super) fn encode_fill(&self, pass: &mut wgpu::ComputePass<'_>, kind: ForceKind) {
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
    pub(super) fn pair_kernel(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        name: &str,
        kind: ForceKind,
    ) {
        let (groups, slot_kind) = if name.starts_with("pair_forces") {
            (self.pairs_slot_groups(), SLOT_PAIRS)
        } else {
            (groups_for(self.params.n), SLOT_STEP)
        };
        self.indirect(pass, name, self.pair_group(name, kind), groups, slot_kind);
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
    pub(super) fn encode_evaluation(
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
    pub(super) fn encode_step_tail(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        kind: ForceKind,
        last: bool,
    ) {
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
    pub(in crate::gpu) fn encode_list_steps(
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
    pub(in crate::gpu) fn encode_list_prime(&self, enc: &mut wgpu::CommandEncoder) {
        self.encode_pass(enc, "prime", |s, pass| {
            s.encode_evaluation(pass, ForceKind::Prime, false, true, true, true);
            s.encode_step_tail(pass, ForceKind::Prime, true);
        });
    }
}
