//! [`ParticleBody`]: a rigid body made of equal particles, baked from a mesh.

use serde::{Deserialize, Serialize};

use super::{Asset, AssetKind, Summary};
use crate::blob::PodVec;
use crate::error::ValidationError;
use crate::validate;

/// How the voxels of a body were chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FillMode {
    /// Every voxel whose centre is inside the mesh.
    #[default]
    Solid,
    /// Only the voxels the surface passes through (hollow bodies, scenery).
    Shell,
}

impl FillMode {
    /// The lower-case name used on the command line and in scenes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Solid => "solid",
            Self::Shell => "shell",
        }
    }
}

/// Where a baked body came from, so a re-bake can be skipped when nothing changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BakeSource {
    /// The mesh path as the user gave it.
    #[serde(default)]
    pub mesh: String,
    /// BLAKE3 (hex) of the mesh file's bytes; empty if unknown.
    #[serde(default)]
    pub mesh_hash: String,
    /// BLAKE3 (hex) of the canonical bake settings; empty if unknown.
    #[serde(default)]
    pub settings_hash: String,
}

/// A rigid body made of equal spheres on a voxel grid, with its mass properties.
///
/// Frames: the *mesh frame* is the glTF scene's frame (metres); the *body
/// frame* has its origin at the centre of mass and the mesh frame's axes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParticleBody {
    /// Human-readable name, usually the mesh's file stem.
    pub name: String,
    /// Provenance for incremental re-baking.
    #[serde(default)]
    pub source: BakeSource,
    /// Solid or shell voxelization.
    pub fill: FillMode,
    /// Edge of one voxel in metres; particles have this diameter.
    pub voxel_size: f32,
    /// Mesh-frame position of the grid's minimum corner, metres.
    pub grid_origin: [f32; 3],
    /// Voxels along x, y and z.
    pub grid_dims: [u32; 3],
    /// One bit per voxel, x fastest then y then z, least significant bit
    /// first in each byte; a set bit is a particle.
    pub occupancy: PodVec<u8>,
    /// Body-frame particle centres in metres, in occupancy order.
    pub positions: PodVec<[f32; 3]>,
    /// Density used for the mass properties, kg/m^3.
    pub density: f32,
    /// Total mass, kg.
    pub mass: f32,
    /// Centre of mass in the mesh frame, metres.
    pub centre_of_mass: [f32; 3],
    /// Inertia tensor about the centre of mass in body axes, kg m^2 (symmetric).
    pub inertia: [[f32; 3]; 3],
    /// Per particle, the outward unit surface normal (body axes); empty in
    /// files baked before normals existed.
    #[serde(default)]
    pub normals: PodVec<[f32; 3]>,
    /// Per particle, the depth of its centre below the body's outer surface,
    /// metres; empty in files baked before depths existed.
    #[serde(default)]
    pub depths: PodVec<f32>,
    /// Principal moments of inertia, ascending, kg m^2.
    #[serde(default)]
    pub principal_moments: [f32; 3],
    /// Principal axes (unit rows, body axes, right-handed), in the order of
    /// `principal_moments`.
    #[serde(default)]
    pub principal_axes: [[f32; 3]; 3],
    /// How the bake went.
    #[serde(default)]
    pub report: BakeReport,
}

/// What `bake mesh` observed while baking a body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BakeReport {
    /// `gpu` or `cpu`, and the adapter for GPU bakes.
    #[serde(default)]
    pub backend: String,
    /// Triangles in the source mesh.
    #[serde(default)]
    pub triangles: u64,
    /// Depth layers peeled (surface crossings of the deepest column) along x, y, z.
    #[serde(default)]
    pub layers: [u32; 3],
    /// Voxels where the three axes' parity disagreed (0 for a closed mesh).
    #[serde(default)]
    pub disagreements: u64,
    /// Mesh edges used by one triangle only (0 for a watertight mesh).
    #[serde(default)]
    pub open_edges: u64,
    /// Mesh edges used by more than two triangles.
    #[serde(default)]
    pub non_manifold_edges: u64,
    /// Wall-clock time of the bake, seconds.
    #[serde(default)]
    pub seconds: f64,
}

impl ParticleBody {
    /// Radius of every particle, metres (half the voxel size).
    pub fn particle_radius(&self) -> f32 {
        self.voxel_size * 0.5
    }

    /// Number of voxels in the grid, or `None` if it overflows `u64`.
    pub fn voxel_count(&self) -> Option<u64> {
        self.grid_dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(u64::from(d)))
    }

    /// Number of set occupancy bits.
    pub fn occupied_count(&self) -> u64 {
        self.occupancy
            .iter()
            .map(|b| u64::from(b.count_ones()))
            .sum()
    }
}

/// Largest grid accepted: 4096 voxels per side.
pub const MAX_GRID_SIDE: u32 = 4096;

impl Asset for ParticleBody {
    const KIND: AssetKind = AssetKind::ParticleBody;

    fn validate(&self) -> Result<(), ValidationError> {
        validate::positive("voxel_size", f64::from(self.voxel_size))?;
        validate::all_finite("grid_origin", &[self.grid_origin])?;
        for (axis, &d) in self.grid_dims.iter().enumerate() {
            if d == 0 || d > MAX_GRID_SIDE {
                return Err(ValidationError::new(
                    format!("grid_dims[{axis}]"),
                    format_args!("is {d}, must be between 1 and {MAX_GRID_SIDE}"),
                ));
            }
        }
        let voxels = self
            .voxel_count()
            .ok_or_else(|| ValidationError::new("grid_dims", "overflows"))?;
        let bytes = voxels.div_ceil(8);
        validate::length(
            "occupancy",
            self.occupancy.len(),
            bytes as usize,
            "one bit per voxel",
        )?;
        let spare_bits = (bytes * 8 - voxels) as u32;
        if spare_bits > 0 {
            let last = self.occupancy.last().copied().unwrap_or(0);
            if last >> (8 - spare_bits) != 0 {
                return Err(ValidationError::new(
                    "occupancy",
                    "has bits set past the last voxel",
                ));
            }
        }
        let occupied = self.occupied_count() as usize;
        if occupied == 0 {
            return Err(ValidationError::new(
                "occupancy",
                "is empty: a body needs at least one particle",
            ));
        }
        validate::length(
            "positions",
            self.positions.len(),
            occupied,
            "one per occupied voxel",
        )?;
        validate::all_finite("positions", &self.positions)?;
        // Body-frame particles must lie within the grid's extent around the centre of mass.
        let reach = self
            .grid_dims
            .iter()
            .map(|&d| d as f32 * self.voxel_size)
            .fold(0.0f32, f32::max)
            * 2.0;
        if let Some(i) = self
            .positions
            .iter()
            .position(|p| p.iter().any(|c| c.abs() > reach))
        {
            return Err(ValidationError::new(
                format!("positions[{i}]"),
                format_args!("{:?} lies outside the body's grid", self.positions[i]),
            ));
        }
        validate::positive("density", f64::from(self.density))?;
        validate::positive("mass", f64::from(self.mass))?;
        validate::all_finite("centre_of_mass", &[self.centre_of_mass])?;
        validate_inertia("inertia", &self.inertia)?;
        if !self.normals.is_empty() {
            validate::length("normals", self.normals.len(), occupied, "one per particle")?;
            validate::all_finite("normals", &self.normals)?;
            if let Some(i) = self.normals.iter().position(|n| {
                let len = (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt();
                (len - 1.0).abs() > 1e-3
            }) {
                return Err(ValidationError::new(
                    format!("normals[{i}]"),
                    format_args!("{:?} is not a unit vector", self.normals[i]),
                ));
            }
        }
        if !self.depths.is_empty() {
            validate::length("depths", self.depths.len(), occupied, "one per particle")?;
            if let Some(i) = self
                .depths
                .iter()
                .position(|d| !(d.is_finite() && *d >= 0.0))
            {
                return Err(ValidationError::new(
                    format!("depths[{i}]"),
                    format_args!("is {}, must be finite and not negative", self.depths[i]),
                ));
            }
        }
        validate::all_finite("principal_moments", &[self.principal_moments])?;
        validate::all_finite("principal_axes", &self.principal_axes)?;
        validate::non_negative("report.seconds", self.report.seconds)
    }

    fn summary(&self) -> Summary {
        Summary::default()
            .text("name", &self.name)
            .text("fill", self.fill.name())
            .int("particles", self.positions.len())
            .float("voxel_size_m", self.voxel_size)
            .float("particle_radius_m", self.particle_radius())
            .list("grid_dims", &self.grid_dims)
            .list("grid_origin_m", &self.grid_origin)
            .float("density_kg_m3", self.density)
            .float("mass_kg", self.mass)
            .list("centre_of_mass_m", &self.centre_of_mass)
            .list(
                "inertia_diagonal_kg_m2",
                &[self.inertia[0][0], self.inertia[1][1], self.inertia[2][2]],
            )
            .list("inertia_kg_m2", self.inertia.as_flattened())
            .list("principal_moments_kg_m2", &self.principal_moments)
            .list("principal_axes_rows", self.principal_axes.as_flattened())
            .text("source_mesh", &self.source.mesh)
            .text("source_blake3", &self.source.mesh_hash)
            .text("settings_blake3", &self.source.settings_hash)
            .text("backend", &self.report.backend)
            .int("triangles", self.report.triangles)
            .list("layers_peeled_xyz", &self.report.layers)
            .int("axis_disagreements", self.report.disagreements)
            .int("open_edges", self.report.open_edges)
            .int("non_manifold_edges", self.report.non_manifold_edges)
            .float("bake_seconds", self.report.seconds)
    }
}

/// A symmetric tensor with non-negative principal moments that satisfy the
/// triangle inequality (what any real mass distribution has).
pub(crate) fn validate_inertia(field: &str, m: &[[f32; 3]; 3]) -> Result<(), ValidationError> {
    validate::all_finite(field, m)?;
    let scale = m
        .iter()
        .flatten()
        .fold(0.0f32, |a, x| a.max(x.abs()))
        .max(f32::MIN_POSITIVE);
    let tol = 1e-4 * scale;
    for (i, j) in [(0, 1), (0, 2), (1, 2)] {
        if (m[i][j] - m[j][i]).abs() > tol {
            return Err(ValidationError::new(
                format!("{field}[{i}][{j}]"),
                format_args!(
                    "is {} but [{j}][{i}] is {}: the tensor must be symmetric",
                    m[i][j], m[j][i]
                ),
            ));
        }
    }
    let d = [m[0][0], m[1][1], m[2][2]];
    if let Some(i) = d.iter().position(|&x| x < 0.0) {
        return Err(ValidationError::new(
            format!("{field}[{i}][{i}]"),
            format_args!("is {}, a moment of inertia cannot be negative", d[i]),
        ));
    }
    for i in 0..3 {
        let (a, b) = (d[(i + 1) % 3], d[(i + 2) % 3]);
        if d[i] > a + b + tol {
            return Err(ValidationError::new(
                field,
                format_args!(
                    "diagonal {d:?} breaks the triangle inequality no mass distribution can break"
                ),
            ));
        }
    }
    Ok(())
}
