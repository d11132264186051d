//! Batches of steps: their submission and reads, and the resumption of a
//! batch a rebuild halted (grown buffers, or a rebuild due in a batch
//! recorded without its dispatches).

use pellet_formats::scene::Integrator;
use pellet_gpu::readback::PendingRead;

use super::{Batch, HALT_REBUILD_DUE, LIST_STATE_LEN, ListState, pair_forces_kernel};
use crate::gpu::GpuSim;
use crate::gpu::bindings::*;
use crate::{ForceKind, NUM_COUNTERS, SimError};

impl GpuSim {
    /// The list state (`ListState` slots), read back (waits for the GPU).
    pub(in crate::gpu) fn list_state(&self) -> Result<[u32; LIST_STATE_LEN], SimError> {
        let bytes = self.buffers[&B_LIST_STATE].read(&self.gpu)?;
        let v: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
        Ok(std::array::from_fn(|k| v.get(k).copied().unwrap_or(0)))
    }

    /// After a submission: while a rebuild halted the batch, grows the pair
    /// buffers and resumes from the halted evaluation; `steps_wanted` is
    /// the clock the batch should end at. Returns the rebuilds so far.
    pub(in crate::gpu) fn finish_list_batch(&mut self, steps_wanted: u32) -> Result<u32, SimError> {
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
}
