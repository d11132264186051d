//! `bake mesh`: glTF file -> voxels -> [`ParticleBody`], with provenance and a report.

use std::path::{Path, PathBuf};
use std::time::Instant;

use pellet_formats::assets::{BakeReport, BakeSource, FillMode, ParticleBody};
use pellet_formats::error::FileError;

use crate::BakeError;
use crate::mesh::{TriMesh, load_mesh_with_files};
use crate::pack::{PackInput, pack};
use crate::progress::Progress;
use crate::voxel::gpu::GpuVoxelizer;
use crate::voxel::{GridError, GridSpec, Resolution, VoxelGrid, cpu};

/// Default density of baked bodies, kg/m^3 (water).
pub const DEFAULT_DENSITY: f32 = 1000.0;

/// Most voxels a bake's grid may have: 2^28 = 268 435 456 (about 645³).
///
/// Voxelizing and packing take memory per voxel of the grid (bit grids,
/// the byte-per-voxel flood fill and the distance transform's lines: about
/// 10 bytes a voxel, some GB here), and a solid body can have nearly as many
/// particles as voxels (see [`MAX_PARTICLES`]). The bunny at 512 cells
/// (100 M voxels) is within the limit; the bunny (10 m tall) at 0.01 m
/// voxels (723 M voxels, 194 M particles) is refused up front instead of
/// baking for minutes.
pub const MAX_VOXELS: u64 = 1 << 28;

/// Most particles a bake is expected to make: 2^25 = 33 554 432. A body's
/// file stores 28 bytes a particle (position, normal, depth) and a bit a
/// voxel, and a `.pellet` payload is at most 1 GiB
/// ([`pellet_formats::container::DEFAULT_MAX_PAYLOAD`]), so about 37 M
/// particles fit; the estimate is held 10 % below that. The bunny at 512
/// cells (27 M particles) is within it.
pub const MAX_PARTICLES: u64 = 1 << 25;

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
    /// Every file the bake read: the mesh, then its external buffer files.
    pub inputs: Vec<PathBuf>,
}

/// What a bake will cost, known before voxelizing: see [`estimate`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BakeEstimate {
    /// The grid the bake will use.
    pub spec: GridSpec,
    /// Voxels in the grid: an upper bound on the particles.
    pub voxels: u64,
    /// Particles expected: the mesh's volume over the voxel volume (solid)
    /// or its area times the voxels a plane of its orientation cuts per unit
    /// area (shell), at most `voxels`. Close for closed meshes.
    pub particles: u64,
}

impl BakeEstimate {
    /// Whether the grid is within [`MAX_VOXELS`] and the particles
    /// expected within [`MAX_PARTICLES`].
    pub fn within_limit(&self) -> bool {
        self.voxels <= MAX_VOXELS && self.particles <= MAX_PARTICLES
    }
}

/// The grid and expected particle count of baking `mesh` (in its own frame,
/// before `settings.scale`) with `settings`, without voxelizing: O(triangles).
pub fn estimate(mesh: &TriMesh, settings: &MeshBakeSettings) -> Result<BakeEstimate, GridError> {
    if settings.scale == 1.0 {
        return estimate_scaled(mesh, settings);
    }
    let mut scaled = mesh.clone();
    scaled.scale(settings.scale);
    estimate_scaled(&scaled, settings)
}

/// [`estimate`] for a mesh already scaled.
fn estimate_scaled(mesh: &TriMesh, settings: &MeshBakeSettings) -> Result<BakeEstimate, GridError> {
    let bounds = mesh.bounds().ok_or(GridError::Degenerate([0.0; 3]))?;
    let spec = GridSpec::fit(&bounds, settings.resolution)?;
    let voxels = spec.dims.iter().map(|&d| u64::from(d)).product::<u64>();
    let centre: [f64; 3] =
        std::array::from_fn(|a| 0.5 * (f64::from(bounds.min[a]) + f64::from(bounds.max[a])));
    let (mut volume, mut cut_area) = (0.0f64, 0.0f64);
    for t in 0..mesh.triangles.len() {
        let [a, b, c] = mesh
            .triangle(t)
            .map(|p| std::array::from_fn::<f64, 3, _>(|k| f64::from(p[k]) - centre[k]));
        let (u, v) = (sub(b, a), sub(c, a));
        let n = cross(u, v); // twice the area, along the normal
        volume += dot(a, cross(b, c)) / 6.0;
        // Voxels a plane of unit normal n cuts per unit area: |nx|+|ny|+|nz| per voxel face.
        cut_area += 0.5 * (n[0].abs() + n[1].abs() + n[2].abs());
    }
    let v = f64::from(spec.voxel_size);
    let expected = match settings.fill {
        FillMode::Solid => volume.abs() / (v * v * v),
        FillMode::Shell => cut_area / (v * v),
    };
    let particles = if expected.is_finite() {
        (expected.round() as u64).min(voxels)
    } else {
        voxels
    };
    Ok(BakeEstimate {
        spec,
        voxels,
        particles,
    })
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    std::array::from_fn(|k| a[k] - b[k])
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// Refuses an estimate over [`MAX_VOXELS`] or [`MAX_PARTICLES`], with the
/// figures and the coarsest setting that fits.
fn check_estimate(
    path: &Path,
    mesh: &TriMesh,
    settings: &MeshBakeSettings,
    estimate: &BakeEstimate,
) -> Result<(), BakeError> {
    if estimate.within_limit() {
        return Ok(());
    }
    // How much coarser the voxels must be: voxels go as 1/v^3, particles as
    // 1/v^3 (solid) or 1/v^2 (shell).
    let particles = estimate.particles as f64 / MAX_PARTICLES as f64;
    let ratio = (estimate.voxels as f64 / MAX_VOXELS as f64)
        .cbrt()
        .max(match settings.fill {
            FillMode::Solid => particles.cbrt(),
            FillMode::Shell => particles.sqrt(),
        });
    let fits = |resolution| {
        estimate_scaled(
            mesh,
            &MeshBakeSettings {
                resolution,
                ..*settings
            },
        )
        .is_ok_and(|e| e.within_limit())
    };
    let hint = match settings.resolution {
        Resolution::Cells(n) => {
            let mut cells = (f64::from(n) / ratio).floor() as u32;
            while cells > 1 && !fits(Resolution::Cells(cells)) {
                cells -= 1;
            }
            format!("use at most {cells} cells along the longest axis")
        }
        Resolution::VoxelSize(v) => {
            let mut size = round_up(f64::from(v) * ratio);
            for _ in 0..50 {
                if fits(Resolution::VoxelSize(size)) {
                    break;
                }
                size = round_up(f64::from(size) * 1.01);
            }
            format!("use a voxel size of at least {size} m")
        }
    };
    Err(BakeError::TooLarge {
        path: path.to_path_buf(),
        dims: estimate.spec.dims,
        voxel_size: estimate.spec.voxel_size,
        voxels: estimate.voxels,
        particles: estimate.particles,
        hint,
    })
}

/// `x` rounded up to three significant digits.
fn round_up(x: f64) -> f32 {
    let scale = 10f64.powi(2 - x.log10().floor() as i32);
    ((x * scale).ceil() / scale) as f32
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
    let (mut mesh, mesh_hash, inputs) =
        load_mesh_with_files(path).map_err(|e| FileError::new(path, e))?;
    if settings.scale != 1.0 {
        mesh.scale(settings.scale);
    }
    if mesh.bounds().is_none() {
        return Err(FileError::new(path, crate::mesh::MeshError::Empty).into());
    }
    let estimate = estimate_scaled(&mesh, settings).map_err(|error| BakeError::Grid {
        path: path.to_path_buf(),
        error,
    })?;
    check_estimate(path, &mesh, settings, &estimate)?;
    let spec = estimate.spec;
    let edges = mesh.edge_report();
    let [nx, ny, nz] = spec.dims;
    progress.stage(format!(
        "voxelizing {} triangles into {nx}x{ny}x{nz} voxels, about {} particles ({}, {})",
        mesh.triangles.len(),
        estimate.particles,
        settings.fill.name(),
        voxelizer.kind()
    ));
    let gpu_error = |error| BakeError::Voxelize {
        path: path.to_path_buf(),
        error,
    };
    let (grid, layers, disagreements) = match (voxelizer, settings.fill) {
        (Voxelizer::Gpu(v), FillMode::Solid) => {
            let s = v.solid(&mesh, &spec).map_err(gpu_error)?;
            (s.grid, s.layers, s.disagreements)
        }
        (Voxelizer::Gpu(v), FillMode::Shell) => {
            (v.shell(&mesh, &spec).map_err(gpu_error)?, [0; 3], 0)
        }
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
    Ok(MeshBake {
        body,
        grid,
        spec,
        inputs,
    })
}
