//! `[[bodies]]` entries: what each needs baked ([`BodyRequest`]), the
//! [`BodySource`] that supplies it, and its copies added as rigid bodies
//! with their particles.

use pellet_formats::assets::ParticleBody;
use pellet_formats::scene::{BodySpec, Motion};

use super::{ParticleArrays, WALL_ID_BASE};
use crate::SimError;
use crate::stages::bodies::{
    BodyGpu, DYNAMIC, KINEMATIC, STATIC, body_particle, euler_xyz_degrees, invert_symmetric, rotate,
};

/// What a `[[bodies]]` entry needs baked: its mesh at a voxel size.
#[derive(Debug, Clone, PartialEq)]
pub struct BodyRequest {
    /// The mesh file, resolved against the scene's folder.
    pub mesh: std::path::PathBuf,
    /// Particle radius, metres (voxels are twice this).
    pub particle_radius: f32,
    /// Density used for the mass properties, kg/m^3.
    pub density: f32,
    /// Uniform scale applied to the mesh first.
    pub scale: f32,
    /// Solid or shell.
    pub fill: pellet_formats::assets::FillMode,
}

/// Supplies the particle body for each `[[bodies]]` entry (baking it, or
/// reading it from a baked folder or a cache).
pub trait BodySource {
    /// The body for entry `index` of the scene, as `request` describes.
    fn body(&mut self, index: usize, request: &BodyRequest) -> Result<ParticleBody, SimError>;
}

/// A source for scenes without bodies: every request is an error.
#[derive(Debug, Default)]
pub struct NoBodies;

impl BodySource for NoBodies {
    fn body(&mut self, index: usize, request: &BodyRequest) -> Result<ParticleBody, SimError> {
        Err(SimError::Body {
            index,
            mesh: request.mesh.display().to_string(),
            problem: "needs baking, and no baker was given".into(),
        })
    }
}

/// Adds the copies of one `[[bodies]]` entry: a [`BodyGpu`] each, and its
/// particles (ids continuing after those already there).
#[allow(clippy::too_many_arguments)]
pub(super) fn add_body_copies(
    spec: &BodySpec,
    entry: usize,
    asset: &ParticleBody,
    material: u32,
    radius: f32,
    particles: &mut ParticleArrays,
    bodies: &mut Vec<BodyGpu>,
    names: &mut Vec<String>,
) -> Result<(), SimError> {
    let count = asset.positions.len();
    if count == 0 {
        return Err(SimError::Body {
            index: entry,
            mesh: spec.mesh.clone(),
            problem: format!(
                "has no particles at radius {radius} m: the mesh is thinner than one voxel"
            ),
        });
    }
    let mass = spec.mass.unwrap_or(asset.mass);
    if !(mass.is_finite() && mass > 0.0) {
        return Err(SimError::Body {
            index: entry,
            mesh: spec.mesh.clone(),
            problem: format!("has mass {mass} kg"),
        });
    }
    let ratio = mass / asset.mass;
    let inertia = asset.inertia.map(|r| r.map(|x| x * ratio));
    let inv_inertia = invert_symmetric(inertia).ok_or_else(|| SimError::Body {
        index: entry,
        mesh: spec.mesh.clone(),
        problem: "has a singular inertia tensor (a line of particles?)".into(),
    })?;
    let (kind, inv_mass) = match spec.motion {
        Motion::Dynamic => (DYNAMIC, 1.0 / mass),
        Motion::Static => (STATIC, 0.0),
        Motion::Kinematic => (KINEMATIC, 0.0),
    };
    let copies: Vec<[f32; 3]> = match spec.array {
        None => vec![[0.0; 3]],
        Some(a) => {
            let mut v = Vec::new();
            for z in 0..a.count[2] {
                for y in 0..a.count[1] {
                    for x in 0..a.count[0] {
                        v.push([
                            x as f32 * a.spacing[0],
                            y as f32 * a.spacing[1],
                            z as f32 * a.spacing[2],
                        ]);
                    }
                }
            }
            v
        }
    };
    let q = euler_xyz_degrees(spec.rotation);
    let com = rotate(q, asset.centre_of_mass);
    let name = if spec.name.is_empty() {
        asset.name.clone()
    } else {
        spec.name.clone()
    };
    // Per-particle mass: the body's, shared equally (contacts see it).
    let particle_inv_mass = if kind == DYNAMIC {
        count as f32 / mass
    } else {
        0.0
    };
    for (c, offset) in copies.iter().enumerate() {
        let index = bodies.len() as u32;
        let first = particles.len();
        if first + count >= WALL_ID_BASE as usize {
            return Err(SimError::TooMany {
                what: "particles with the bodies",
                count: (first + count) as u64,
                max: u64::from(WALL_ID_BASE),
            });
        }
        let x = [
            spec.position[0] + offset[0] + com[0],
            spec.position[1] + offset[1] + com[1],
            spec.position[2] + offset[2] + com[2],
        ];
        let mut b = BodyGpu {
            position: [x[0], x[1], x[2], inv_mass],
            orientation: q,
            inv_inertia: inv_inertia.map(|r| [r[0], r[1], r[2], 0.0]),
            range: [first as u32, count as u32, kind, 0],
            ..BodyGpu::default()
        };
        let v = spec.velocity;
        let w = spec.angular_velocity;
        b.velocity = [v[0], v[1], v[2], 0.0];
        b.omega = [w[0], w[1], w[2], 0.0];
        if kind == DYNAMIC {
            b.momentum = [v[0] * mass, v[1] * mass, v[2] * mass, 0.0];
            // L = R I R^T w.
            let wb = crate::stages::bodies::rotate_inv(q, w);
            let lb: [f32; 3] = std::array::from_fn(|r| {
                inertia[r][0] * wb[0] + inertia[r][1] * wb[1] + inertia[r][2] * wb[2]
            });
            let l = rotate(q, lb);
            b.angular_momentum = [l[0], l[1], l[2], 0.0];
        } else if kind == STATIC {
            b.velocity = [0.0; 4];
            b.omega = [0.0; 4];
        }
        for p in asset.positions.iter() {
            let local = [p[0], p[1], p[2], 0.0];
            let mut pos = [0.0, 0.0, 0.0, radius];
            let mut vel = [0.0, 0.0, 0.0, particle_inv_mass];
            let mut angvel = [0.0; 4];
            body_particle(&b, &local, &mut pos, &mut vel, &mut angvel);
            let id = particles.len() as u32;
            particles.pos.push(pos);
            particles.vel.push(vel);
            particles.angvel.push(angvel);
            particles.meta.push([id, material, index, 0]);
            particles.local.push(local);
        }
        bodies.push(b);
        names.push(if copies.len() > 1 {
            format!("{name}[{c}]")
        } else {
            name.clone()
        });
    }
    Ok(())
}
