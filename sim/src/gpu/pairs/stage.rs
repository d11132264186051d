//! The stage tests' entry points: the list uploaded from the CPU twin and
//! read back, one evaluation or kernel run alone, and the capacity and
//! rebuild mode set by hand.

use super::ListState;
use crate::gpu::GpuSim;
use crate::gpu::bindings::*;
use crate::stages::common::{ROLL_EPSD2, ROLL_NONE};
use crate::stages::pairs::ListBuffers;
use crate::{ForceKind, SimError};

impl GpuSim {
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
