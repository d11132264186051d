//! Readback and diagnostics: particle state, the sort's outputs, bodies,
//! a block's forces, the counters and the kinetic energy, copied back from
//! the GPU.

use super::bindings::*;
use super::{BodyForces, GpuSim, GridBuffers, WG};
use crate::stages::bodies::BodyGpu;
use crate::{HostState, NUM_COUNTERS, SimError};

impl GpuSim {
    pub(super) fn read<T: bytemuck::Pod>(
        &self,
        binding: u32,
        len: usize,
    ) -> Result<Vec<T>, SimError> {
        let slot = &self.buffers[&binding];
        let size = ((len * size_of::<T>()) as u64).min(slot.size);
        let bytes = slot.read_range(&self.gpu, 0, size)?;
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

    /// Current index of each particle id (written by the sort).
    pub fn download_inv_index(&self) -> Result<Vec<u32>, SimError> {
        self.read(B_INV_INDEX, self.params.n as usize)
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

    /// The counters (see [`Counter`](crate::Counter)).
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
}
