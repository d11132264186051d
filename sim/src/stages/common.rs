//! Rust twins of the structs in `common.wgsl`, shared by every stage: the
//! constant uniform block [`Params`], a rigid body [`BodyGpu`], the per-pass
//! [`ModeGpu`] of `compute_forces` and the [`ScanLenGpu`] of one prefix-sum
//! level, plus the small vector maths the CPU stages share.
//! `sim/tests/layout.rs` checks every struct here against its WGSL twin.

use bytemuck::{Pod, Zeroable};

/// The constant uniform block of every kernel (`Params` in `common.wgsl`).
#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct Params {
    /// Particle count.
    pub n: u32,
    /// Contact history slots per particle.
    pub slots: u32,
    /// Number of cell keys (dense cells or hash buckets).
    pub num_keys: u32,
    /// 1 when cells are hashed.
    pub hashed: u32,
    /// Dense grid cells per axis.
    pub dims: [i32; 3],
    /// Number of walls.
    pub wall_count: u32,
    /// Grid origin, metres.
    pub origin: [f32; 3],
    /// Cell edge, metres.
    pub cell_size: f32,
    /// Gravity, m/s^2.
    pub gravity: [f32; 3],
    /// Number of materials.
    pub material_count: u32,
    /// Time step, seconds.
    pub dt: f32,
    /// `1 / cell_size`.
    pub inv_cell: f32,
    /// Number of rigid bodies.
    pub body_count: u32,
    /// Neighbour-list skin, metres (`simulation.skin`; the GPU pair list
    /// lists pairs closer than `r_i + r_j + skin`).
    pub skin: f32,
    /// Domain lower corner, metres.
    pub domain_min: [f32; 3],
    /// Closed domain faces ([`SimSetup::closed_faces`](crate::SimSetup::closed_faces)).
    pub closed_faces: u32,
    /// Domain upper corner, metres.
    pub domain_max: [f32; 3],
    /// Contact law of every material pair: [`HOOKE`] or [`HERTZ`].
    pub contact_model: u32,
    /// Rolling resistance: [`ROLL_NONE`], [`ROLL_EPSD2`] or [`ROLL_CDT`].
    pub rolling_model: u32,
    /// Periodic axes, as bits: `1 << axis` (the period is the domain's
    /// extent along it).
    pub periodic: u32,
    /// Padding to 16 bytes.
    pub pad3: [u32; 2],
}

/// [`Params::rolling_model`]: no rolling resistance (every material's
/// `rolling_friction` is 0).
pub const ROLL_NONE: u32 = 0;
/// [`Params::rolling_model`]: LIGGGHTS `epsd2`, a capped rolling spring.
pub const ROLL_EPSD2: u32 = 1;
/// [`Params::rolling_model`]: LIGGGHTS `cdt`, a constant directional torque.
pub const ROLL_CDT: u32 = 2;

/// [`Params::contact_model`]: the linear spring-dashpot.
pub const HOOKE: u32 = 0;
/// [`Params::contact_model`]: Hertz-Mindlin.
pub const HERTZ: u32 = 1;

/// One body as the kernels read it (`Body` in `common.wgsl`), 160 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Default, Pod, Zeroable)]
#[repr(C)]
pub struct BodyGpu {
    /// Centre of mass (m); `w`: inverse mass (1/kg, 0 when immovable).
    pub position: [f32; 4],
    /// Orientation, unit quaternion `(x, y, z, w)`: body axes to world.
    pub orientation: [f32; 4],
    /// Linear momentum, kg m/s (`w` unused).
    pub momentum: [f32; 4],
    /// Angular momentum about the centre of mass, world axes, kg m^2/s.
    pub angular_momentum: [f32; 4],
    /// World angular velocity, rad/s (derived; prescribed for kinematic bodies).
    pub omega: [f32; 4],
    /// Linear velocity, m/s (derived; prescribed for kinematic bodies).
    pub velocity: [f32; 4],
    /// Inverse inertia tensor in body axes, rows (`w` unused), 1/(kg m^2).
    pub inv_inertia: [[f32; 4]; 3],
    /// First particle id, particle count, kind ([`DYNAMIC`](super::bodies::DYNAMIC), ...), unused.
    pub range: [u32; 4],
}

impl BodyGpu {
    /// The body's kind.
    pub fn kind(&self) -> u32 {
        self.range[2]
    }
}

/// How one `compute_forces` pass treats contact history, and which particles
/// it evaluates (`Mode` in `common.wgsl`, a uniform block).
#[derive(Debug, Clone, Copy, PartialEq, Default, Pod, Zeroable)]
#[repr(C)]
pub struct ModeGpu {
    /// Time over which the tangential spring is extended, seconds.
    pub dt_hist: f32,
    /// 1: keep the new history; 0: RK2's trial evaluation.
    pub commit: u32,
    /// First particle evaluated.
    pub first: u32,
    /// One past the last particle evaluated (`u32::MAX`: all).
    pub end: u32,
}

/// Length of the array one prefix-sum level works on (`ScanLen` in
/// `common.wgsl`, a uniform block).
#[derive(Debug, Clone, Copy, PartialEq, Default, Pod, Zeroable)]
#[repr(C)]
pub struct ScanLenGpu {
    /// Elements in the level.
    pub len: u32,
    /// Padding to 16 bytes.
    pub pad: [u32; 3],
}

/// A 3-vector.
pub type V3 = [f32; 3];

#[inline(always)]
pub(crate) fn add(a: V3, b: V3) -> V3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

#[inline(always)]
pub(crate) fn sub(a: V3, b: V3) -> V3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

#[inline(always)]
pub(crate) fn scale(a: V3, s: f32) -> V3 {
    [a[0] * s, a[1] * s, a[2] * s]
}

#[inline(always)]
pub(crate) fn dot(a: V3, b: V3) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

#[inline(always)]
pub(crate) fn cross(a: V3, b: V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// Whether any component is infinite or NaN (tested on the bits, as the GPU does).
#[inline(always)]
pub(crate) fn bad(a: V3) -> bool {
    a.iter().any(|x| x.to_bits() & 0x7F80_0000 == 0x7F80_0000)
}
