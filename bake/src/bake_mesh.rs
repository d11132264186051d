//! `bake mesh`: glTF file -> voxels -> [`ParticleBody`], with provenance and a report.

use std::path::Path;
use std::time::Instant;

use pellet_formats::assets::{BakeReport, BakeSource, FillMode, ParticleBody};
use pellet_formats::error::FileError;

use crate::BakeError;
use crate::mesh::load_mesh_hashed;
use crate::pack::{PackInput, pack};
use crate::progress::Progress;
use crate::voxel::gpu::GpuVoxelizer;
use crate::voxel::{GridSpec, Resolution, VoxelGrid, cpu};

/// Default density of baked bodies, kg/m^3 (water).
pub const DEFAULT_DENSITY: f32 = 1000.0;

/// What to bake and how. Everything here goes into the settings hash.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeshBakeSettings {
    /// Voxel size or cells along the longest axis.
    pub resolution: Resolution,
    /// Solid or shell.
    pub fill: FillMode,
    /// Density, kg/m^3.
    pub density: f32,
    /// Uniform scale applied to the mesh first.
    pub scale: f32,
}

impl MeshBakeSettings {
    /// BLAKE3 (hex) of the settings and the voxelizer kind.
    pub fn hash(&self, backend: &str) -> String {
        let canonical = format!(
            "pellet-bake mesh 1\nresolution={:?}\nfill={}\ndensity={}\nscale={}\nbackend={backend}\n",
            self.resolution,
            self.fill.name(),
            self.density,
            self.scale
        );
        blake3::hash(canonical.as_bytes()).to_hex().to_string()
    }
}

/// Which voxelizer to use.
#[derive(Debug, Clone, Copy)]
pub enum Voxelizer<'a> {
    /// Depth peeling on a GPU adapter.
    Gpu(&'a GpuVoxelizer),
    /// The exact CPU reference.
    Cpu,
}

impl Voxelizer<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Self::Gpu(_) => "gpu",
            Self::Cpu => "cpu",
        }
    }
}

/// A baked body with the grid it came from (for previews and tests).
#[derive(Debug, Clone)]
pub struct MeshBake {
    /// The asset.
    pub body: ParticleBody,
    /// The occupancy.
    pub grid: VoxelGrid,
    /// Where the voxels are.
    pub spec: GridSpec,
}

/// Loads `path`, voxelizes it and packs the particles.
pub fn bake_mesh(
    path: &Path,
    settings: &MeshBakeSettings,
    voxelizer: Voxelizer<'_>,
    progress: &Progress,
) -> Result<MeshBake, BakeError> {
    let start = Instant::now();
    progress.stage(format!("loading {}", path.display()));
    let (mut mesh, mesh_hash) = load_mesh_hashed(path).map_err(|e| FileError::new(path, e))?;
    if settings.scale != 1.0 {
        mesh.scale(settings.scale);
    }
    let edges = mesh.edge_report();
    let bounds = mesh
        .bounds()
        .ok_or_else(|| FileError::new(path, crate::mesh::MeshError::Empty))?;
    let spec = GridSpec::fit(&bounds, settings.resolution)?;
    let [nx, ny, nz] = spec.dims;
    progress.stage(format!(
        "voxelizing {} triangles into {nx}x{ny}x{nz} voxels ({}, {})",
        mesh.triangles.len(),
        settings.fill.name(),
        voxelizer.kind()
    ));
    let (grid, layers, disagreements) = match (voxelizer, settings.fill) {
        (Voxelizer::Gpu(v), FillMode::Solid) => {
            let s = v.solid(&mesh, &spec)?;
            (s.grid, s.layers, s.disagreements)
        }
        (Voxelizer::Gpu(v), FillMode::Shell) => (v.shell(&mesh, &spec)?, [0; 3], 0),
        (Voxelizer::Cpu, FillMode::Solid) => {
            let s = cpu::solid(&mesh, &spec);
            (s.grid, s.layers, s.disagreements)
        }
        (Voxelizer::Cpu, FillMode::Shell) => (cpu::shell(&mesh, &spec), [0; 3], 0),
    };
    let backend = match voxelizer {
        Voxelizer::Gpu(v) => format!("gpu: {}", v.gpu().report.one_line()),
        Voxelizer::Cpu => "cpu".to_owned(),
    };
    progress.stage(format!("packing {} particles", grid.count()));
    let name = path
        .file_stem()
        .map_or_else(|| "body".to_owned(), |s| s.to_string_lossy().into_owned());
    let input = PackInput {
        name: &name,
        source: BakeSource {
            mesh: path.display().to_string(),
            mesh_hash,
            settings_hash: settings.hash(voxelizer.kind()),
        },
        fill: settings.fill,
        density: settings.density,
        report: BakeReport {
            backend,
            triangles: mesh.triangles.len() as u64,
            layers,
            disagreements,
            open_edges: edges.open_edges,
            non_manifold_edges: edges.non_manifold_edges,
            seconds: 0.0,
        },
    };
    let mut body = pack(&grid, &spec, input).ok_or(BakeError::NoParticles {
        path: path.to_path_buf(),
        dims: spec.dims,
    })?;
    body.report.seconds = start.elapsed().as_secs_f64();
    Ok(MeshBake { body, grid, spec })
}
