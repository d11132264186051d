//! Voxels to a [`ParticleBody`]: one particle per set voxel, with mass
//! properties, principal axes, and each particle's outward normal and depth
//! below the surface.

use pellet_formats::PodVec;
use pellet_formats::assets::{BakeReport, BakeSource, FillMode, ParticleBody};

use crate::voxel::{GridSpec, VoxelGrid};

mod distance;
mod inertia;

pub use distance::exterior_distance;
pub use inertia::{MassProperties, mass_properties, symmetric_eigen};

/// Everything besides the voxels that goes into a body.
#[derive(Debug, Clone)]
pub struct PackInput<'a> {
    /// Display name.
    pub name: &'a str,
    /// Provenance.
    pub source: BakeSource,
    /// Solid or shell.
    pub fill: FillMode,
    /// Density, kg/m^3.
    pub density: f32,
    /// Bake report (its `seconds` is filled in by the caller at the end).
    pub report: BakeReport,
}

/// Packs the set voxels of `grid` into a body. `None` if no voxel is set.
pub fn pack(grid: &VoxelGrid, spec: &GridSpec, input: PackInput<'_>) -> Option<ParticleBody> {
    let centres: Vec<[f64; 3]> = grid
        .iter_set()
        .map(|i| {
            let v = unindex(spec, i);
            spec.centre(v).map(f64::from)
        })
        .collect();
    if centres.is_empty() {
        return None;
    }
    tracing::debug!("pack: centres");
    let props = mass_properties(
        &centres,
        f64::from(spec.voxel_size),
        f64::from(input.density),
    );
    let com = props.centre_of_mass;
    let positions: Vec<[f32; 3]> = centres
        .iter()
        .map(|c| std::array::from_fn(|a| (c[a] - com[a]) as f32))
        .collect();
    tracing::debug!("pack: mass properties");
    let field = exterior_distance(grid, spec);
    tracing::debug!("pack: distance field");
    let mut normals = Vec::with_capacity(positions.len());
    let mut depths = Vec::with_capacity(positions.len());
    for (k, i) in grid.iter_set().enumerate() {
        let v = unindex(spec, i);
        let (depth_voxels, gradient) = field.at(v);
        depths.push(((depth_voxels - 0.5).max(0.0) * f64::from(spec.voxel_size)) as f32);
        // Outward = towards the exterior = down the distance gradient. Where
        // the field is flat (thin or symmetric spots), point away from the
        // centre of mass, or up when the particle sits on it.
        let mut n = gradient.map(|g| -g);
        if norm(n) < 1e-9 {
            n = std::array::from_fn(|a| f64::from(positions[k][a]));
        }
        if norm(n) < 1e-9 {
            n = [0.0, 1.0, 0.0];
        }
        let len = norm(n);
        normals.push(n.map(|x| (x / len) as f32));
    }
    tracing::debug!("pack: normals");
    let to_f32 = |m: [[f64; 3]; 3]| m.map(|r| r.map(|x| x as f32));
    Some(ParticleBody {
        name: input.name.to_owned(),
        source: input.source,
        fill: input.fill,
        voxel_size: spec.voxel_size,
        grid_origin: spec.origin,
        grid_dims: spec.dims,
        occupancy: PodVec(grid.to_bytes()),
        positions: PodVec(positions),
        density: input.density,
        mass: props.mass as f32,
        centre_of_mass: com.map(|x| x as f32),
        inertia: to_f32(props.inertia),
        normals: PodVec(normals),
        depths: PodVec(depths),
        principal_moments: props.principal_moments.map(|x| x as f32),
        principal_axes: to_f32(props.principal_axes),
        report: input.report,
    })
}

fn norm(v: [f64; 3]) -> f64 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

/// `(x, y, z)` of linear voxel index `i`.
pub fn unindex(spec: &GridSpec, i: usize) -> [u32; 3] {
    let (nx, ny) = (spec.dims[0] as usize, spec.dims[1] as usize);
    [
        (i % nx) as u32,
        ((i / nx) % ny) as u32,
        (i / (nx * ny)) as u32,
    ]
}
