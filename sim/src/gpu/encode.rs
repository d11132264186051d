//! Command encoding: kernel dispatches, the counting sort, whole steps of
//! each integrator, and the single stages the parity tests run alone.

use pellet_formats::scene::Integrator;
use pellet_gpu::{dispatch_2d, wgpu};

use super::bindings::*;
use super::{GpuSim, Group, WG};
use crate::{ForceKind, SimError};

fn groups_for(count: u32) -> [u32; 3] {
    dispatch_2d(count.div_ceil(WG).max(1))
}

impl GpuSim {
    fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, name: &str, group: &Group, count: u32) {
        let g = groups_for(count);
        pass.set_pipeline(&self.kernels[name].pipeline);
        pass.set_bind_group(0, group.get(), &[]);
        pass.dispatch_workgroups(g[0], g[1], g[2]);
    }

    pub(super) fn particle_kernel(&self, pass: &mut wgpu::ComputePass<'_>, name: &'static str) {
        self.dispatch(pass, name, &self.groups[name], self.params.n);
    }

    fn copy(&self, enc: &mut wgpu::CommandEncoder, from: u32, to: u32) {
        self.buffers[&from].copy_to(enc, &self.buffers[&to]);
    }

    /// Records the counting sort (and the reorder of all particle data).
    fn encode_sort(&self, enc: &mut wgpu::CommandEncoder, rk2: bool) {
        self.buffers[&B_CELL_COUNT].clear(enc, 0, None);
        self.buffers[&B_CURSOR].clear(enc, 0, None);
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

    pub(super) fn encode_pass(
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
                pass.set_bind_group(0, self.groups[name].get(), &[]);
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
        self.buffers[&B_COUNTERS].clear(enc, 0, Some(12));
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

    pub(super) fn submit(&self, enc: wgpu::CommandEncoder) {
        self.gpu.queue.submit([enc.finish()]);
    }

    pub(super) fn encoder(&self) -> wgpu::CommandEncoder {
        self.gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("sim") })
    }

    /// Sorts (builds the pair list) and evaluates the first forces (velocity
    /// Verlet needs them before its first half kick); new contacts start
    /// with no tangential stretch.
    pub fn prime(&mut self) -> Result<(), SimError> {
        let mut enc = self.encoder();
        if self.list.is_some() {
            self.encode_list_prime(&mut enc);
            self.submit(enc);
            self.rebuilds = self.finish_list_batch(self.step)?;
            return Ok(());
        }
        self.encode_sort(&mut enc, false);
        self.encode_pass(&mut enc, "prime", |s, p| {
            s.encode_forces(p, ForceKind::Prime);
            s.body_kernel(p, "body_reduce");
        });
        self.submit(enc);
        Ok(())
    }

    /// Records and submits `steps` whole steps in one command buffer. On
    /// the pair-list path it then waits for the batch (to grow the pair
    /// buffers and resume, should a rebuild have outgrown them).
    pub fn advance(&mut self, steps: u32) -> Result<(), SimError> {
        let mut enc = self.encoder();
        if self.list.is_some() {
            self.encode_list_steps(&mut enc, steps, false);
        } else {
            for _ in 0..steps {
                self.encode_step(&mut enc);
            }
        }
        self.submit(enc);
        let wanted = self.step + steps;
        if self.list.is_some() {
            self.rebuilds = self.finish_list_batch(wanted)?;
        }
        self.step = wanted;
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

    /// Resets the per-step counters, as each step does.
    pub fn clear_step_counters(&mut self) {
        let mut enc = self.encoder();
        self.buffers[&B_COUNTERS].clear(&mut enc, 0, Some(12));
        self.submit(enc);
    }
}
