//! The arrays the kernels read, in their layout, and [`SimSetup::params`]
//! (the uniform block itself is [`Params`] in `stages/common.rs`).

use bytemuck::{Pod, Zeroable};

use super::SimSetup;
use crate::stages::common::Params;

/// One wall as the kernels read it (two `vec4<f32>`): particles stay where
/// `dot(normal, x) >= offset`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Pod, Zeroable)]
#[repr(C)]
pub struct WallParams {
    /// Unit normal pointing into the allowed side.
    pub normal: [f32; 3],
    /// `dot(normal, point)` for any point on the plane, metres.
    pub offset: f32,
    /// Material index.
    pub material: u32,
    /// Simulated time at which the wall disappears, seconds (infinity: never).
    pub remove_at: f32,
    /// Padding.
    pub pad: [u32; 2],
}

/// Per-particle arrays in kernel layout, in input order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParticleArrays {
    /// `xyz` position (m), `w` radius (m).
    pub pos: Vec<[f32; 4]>,
    /// `xyz` velocity (m/s), `w` inverse mass (1/kg).
    pub vel: Vec<[f32; 4]>,
    /// `xyz` angular velocity (rad/s), `w` inverse moment of inertia (1/(kg m^2)).
    pub angvel: Vec<[f32; 4]>,
    /// `x` persistent id (input order), `y` material, `z` body ([`FREE`](super::FREE)), `w` unused.
    pub meta: Vec<[u32; 4]>,
    /// Body particles: offset from the body's centre of mass in body axes (m); zero for free ones.
    pub local: Vec<[f32; 4]>,
}

impl ParticleArrays {
    /// Number of particles.
    pub fn len(&self) -> usize {
        self.pos.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }
}

impl SimSetup {
    /// The uniform block both backends read.
    pub fn params(&self) -> Params {
        let g = &self.grid;
        Params {
            n: self.particles.len() as u32,
            slots: self.slots,
            num_keys: g.num_keys,
            hashed: u32::from(g.hashed),
            dims: g.dims,
            wall_count: self.walls.len() as u32,
            origin: g.origin,
            cell_size: g.cell_size,
            gravity: self.gravity,
            material_count: self.material_count(),
            dt: self.dt as f32,
            inv_cell: 1.0 / g.cell_size,
            body_count: self.bodies.len() as u32,
            skin: self.skin.max(0.0),
            domain_min: self.domain_min,
            closed_faces: self.closed_faces,
            domain_max: self.domain_max,
            contact_model: self.contact_model,
            rolling_model: self.rolling_model,
            periodic: self.periodic,
            pad3: [0; 2],
        }
    }
}
