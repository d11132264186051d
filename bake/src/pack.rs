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
    // Set voxels in occupancy order, walked once and shared by every step below.
    let voxels: Vec<[u32; 3]> = grid.iter_set().map(|i| unindex(spec, i)).collect();
    if voxels.is_empty() {
        return None;
    }
    let centres: Vec<[f64; 3]> = voxels
        .iter()
        .map(|&v| spec.centre(v).map(f64::from))
        .collect();
    tracing::debug!("pack: centres done");
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
    tracing::debug!("pack: mass properties done");
    let field = exterior_distance(grid, spec);
    tracing::debug!("pack: distance field done");
    // Depth and outward normal per particle, split across the cores.
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, 8);
    let chunk = voxels.len().div_ceil(threads).max(1);
    let per_thread: Vec<Vec<([f32; 3], f32)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = voxels
            .chunks(chunk)
            .zip(positions.chunks(chunk))
            .map(|(voxels, positions)| {
                let field = &field;
                scope.spawn(move || {
                    voxels
                        .iter()
                        .zip(positions)
                        .map(|(&v, p)| surface_frame(field, spec, v, *p))
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("packing threads do not panic"))
            .collect()
    });
    let (normals, depths): (Vec<[f32; 3]>, Vec<f32>) = per_thread.into_iter().flatten().unzip();
    tracing::debug!("pack: normals done");
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

/// Outward unit normal and depth below the surface (metres) of the particle
/// at voxel `v`, whose body-frame position is `position`.
fn surface_frame(
    field: &distance::DistanceField,
    spec: &GridSpec,
    v: [u32; 3],
    position: [f32; 3],
) -> ([f32; 3], f32) {
    let (depth_voxels, gradient) = field.at(v);
    let depth = ((depth_voxels - 0.5).max(0.0) * f64::from(spec.voxel_size)) as f32;
    // Outward = towards the exterior = down the distance gradient. Where the
    // field is flat (thin or symmetric spots), point away from the centre of
    // mass, or up when the particle sits on it.
    let mut n = gradient.map(|g| -g);
    if norm(n) < 1e-9 {
        n = position.map(f64::from);
    }
    if norm(n) < 1e-9 {
        n = [0.0, 1.0, 0.0];
    }
    let len = norm(n);
    (n.map(|x| (x / len) as f32), depth)
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
