//! The records ranks send each other: whole particles at a build, their
//! motion every step, contact history at a build, body shares every step.

use bytemuck::{Pod, Zeroable};

use crate::HostState;

/// One particle, whole (112 bytes): what a build moves to its new owner and readers.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct ParticleRecord {
    pub pos: [f32; 4],
    pub vel: [f32; 4],
    pub angvel: [f32; 4],
    pub force: [f32; 4],
    pub torque: [f32; 4],
    pub local: [f32; 4],
    pub meta: [u32; 4],
}

/// What the forces read of a particle another rank owns (48 bytes a step).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct MotionRecord {
    pub pos: [f32; 4],
    pub vel: [f32; 4],
    pub angvel: [f32; 4],
}

/// Kinds of [`HistoryRecord`].
pub const SPRING: u32 = 0;
/// A stored rolling torque of a pair.
pub const ROLL: u32 = 1;
/// A tangential spring with a wall.
pub const WALL_SPRING: u32 = 2;
/// A stored rolling torque with a wall.
pub const WALL_ROLL: u32 = 3;

/// One carried value of contact history: `(a, b, value)` as
/// [`crate::pairlist::History`] keeps it (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct HistoryRecord {
    pub a: u32,
    pub b: u32,
    pub kind: u32,
    pub pad: u32,
    pub value: [f32; 4],
}

/// A body particle's share of its body's force and torque (64 bytes a step).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BodyShare {
    /// Persistent id.
    pub id: u32,
    /// Body index.
    pub body: u32,
    pub pad: [u32; 2],
    pub pos: [f32; 4],
    pub force: [f32; 4],
    pub torque: [f32; 4],
}

/// A body's summed force and torque, from the rank that owns the body.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BodySum {
    pub body: u32,
    pub pad: [u32; 3],
    pub force: [f32; 4],
    pub torque: [f32; 4],
}

impl ParticleRecord {
    /// Particle `i` of `s`.
    pub fn of(s: &HostState, i: usize) -> Self {
        Self {
            pos: s.pos[i],
            vel: s.vel[i],
            angvel: s.angvel[i],
            force: s.force[i],
            torque: s.torque[i],
            local: s.local[i],
            meta: s.meta[i],
        }
    }
}

/// A state of `records`, in their order, with no history slots.
pub fn state_of(records: &[ParticleRecord]) -> HostState {
    let pick = |f: fn(&ParticleRecord) -> [f32; 4]| records.iter().map(f).collect();
    HostState {
        pos: pick(|r| r.pos),
        vel: pick(|r| r.vel),
        angvel: pick(|r| r.angvel),
        force: pick(|r| r.force),
        torque: pick(|r| r.torque),
        local: pick(|r| r.local),
        meta: records.iter().map(|r| r.meta).collect(),
        hist_count: vec![0; records.len()],
        hist: Vec::new(),
    }
}
