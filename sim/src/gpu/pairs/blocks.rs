//! Block-wise stepping on a host-built pair list (`crate::blocks`): a
//! block's upload, its forces, and the read-back of its results.

use super::groups_for;
use crate::gpu::bindings::*;
use crate::gpu::{GpuSim, PairBlockInput, PairBlockOutput};
use crate::stages::common::ROLL_EPSD2;
use crate::{ForceKind, SimError};

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
