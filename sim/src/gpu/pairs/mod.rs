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
//!
//! The files: the buffers, their creation and growth (`buffers.rs`); the
//! dispatch slots and the indirect dispatches through them (`dispatch.rs`);
//! the encoding of evaluations and steps (`encode.rs`); batches, their
//! reads and the resumption of a halted one (`resume.rs`); the stage
//! tests' entry points and the list's upload and download (`stage.rs`);
//! block-wise stepping on a host-built list (`blocks.rs`).

use std::collections::BTreeMap;

use pellet_gpu::readback::PendingRead;
use pellet_gpu::{dispatch_2d, wgpu};

use super::buffers::ScanLevel;
use super::{Group, WG};

mod blocks;
mod buffers;
mod dispatch;
mod encode;
mod resume;
mod stage;

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
