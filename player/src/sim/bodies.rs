//! [`MeshBaker`]: the [`BodySource`] that bakes each `[[bodies]]` mesh with
//! `bake mesh`'s library (CPU voxelizer) and keeps the result in a cache
//! folder keyed by the mesh's BLAKE3 and the bake settings, so a scene whose
//! meshes did not change starts without baking.

use std::path::{Path, PathBuf};

use pellet_bake::bake_mesh::{BakeEstimate, MeshBakeSettings, Voxelizer, bake_mesh, estimate};
use pellet_bake::mesh::load_mesh_hashed;
use pellet_bake::progress::Progress;
use pellet_bake::voxel::Resolution;
use pellet_formats::DecodeLimits;
use pellet_formats::assets::ParticleBody;
use pellet_formats::io::{read_asset, write_asset};

use super::SimError;
use super::setup::{BodyRequest, BodySource};

/// The voxelizer kind in cached bodies' settings hashes.
const VOXELIZER: &str = "cpu";

/// Estimated particles above which a bake is announced with a warning (it
/// takes seconds to minutes). Bakes over `pellet_bake::bake_mesh::MAX_VOXELS`
/// voxels or `MAX_PARTICLES` particles are refused by `bake_mesh` before
/// voxelizing.
pub const LARGE_BAKE_PARTICLES: u64 = 5_000_000;

/// The warning for a bake of `estimate`, if it is large.
fn large_bake_warning(what: &str, estimate: &BakeEstimate) -> Option<String> {
    (estimate.particles > LARGE_BAKE_PARTICLES).then(|| {
        let [nx, ny, nz] = estimate.spec.dims;
        format!(
            "{what}: baking about {} particles on {nx}x{ny}x{nz} voxels of {} m; this can take minutes (a larger particle radius bakes faster)",
            estimate.particles, estimate.spec.voxel_size
        )
    })
}

/// Bakes bodies on demand, through a cache folder.
#[derive(Debug, Clone)]
pub struct MeshBaker {
    /// Where baked bodies are kept; `None` bakes every time.
    pub cache_dir: Option<PathBuf>,
    /// Bodies baked (not found in the cache) so far.
    pub baked: usize,
    /// Bodies found in the cache so far.
    pub cached: usize,
    /// Show a progress spinner while baking (after a second, and only when
    /// stderr is a terminal). On by default.
    pub progress: bool,
}

pub use super::run::default_cache_dir;

impl MeshBaker {
    /// A baker caching in `cache_dir`.
    pub fn new(cache_dir: Option<PathBuf>) -> Self {
        Self {
            cache_dir,
            baked: 0,
            cached: 0,
            progress: true,
        }
    }

    /// The settings `request` bakes with.
    pub fn settings(request: &BodyRequest) -> MeshBakeSettings {
        MeshBakeSettings {
            resolution: Resolution::VoxelSize(2.0 * request.particle_radius),
            fill: request.fill,
            density: request.density,
            scale: request.scale,
        }
    }

    fn cache_path(dir: &Path, mesh_hash: &str, settings_hash: &str) -> PathBuf {
        dir.join(format!(
            "{}-{}.pellet",
            &mesh_hash[..16],
            &settings_hash[..16]
        ))
    }
}

impl BodySource for MeshBaker {
    fn body(&mut self, index: usize, request: &BodyRequest) -> Result<ParticleBody, SimError> {
        let what = |e: &dyn std::fmt::Display| SimError::BodyUnavailable {
            index,
            error: format!("{}: {e}", request.mesh.display()).into(),
        };
        let settings = Self::settings(request);
        let settings_hash = settings.hash(VOXELIZER);
        let (mesh, mesh_hash) = load_mesh_hashed(&request.mesh).map_err(|e| what(&e))?;
        let cached = self
            .cache_dir
            .as_deref()
            .map(|d| Self::cache_path(d, &mesh_hash, &settings_hash));
        if let Some(path) = &cached
            && path.exists()
        {
            match read_asset::<ParticleBody>(path, &DecodeLimits::default()) {
                Ok(body)
                    if body.source.mesh_hash == mesh_hash
                        && body.source.settings_hash == settings_hash =>
                {
                    self.cached += 1;
                    tracing::debug!("bodies[{index}]: cached {}", path.display());
                    return Ok(body);
                }
                Ok(_) => tracing::warn!("{}: stale cache entry, re-baking", path.display()),
                Err(e) => tracing::warn!(
                    "{}: unreadable cache entry ({e}), re-baking",
                    path.display()
                ),
            }
        }
        tracing::info!(
            "baking bodies[{index}] {} at {} m voxels",
            request.mesh.display(),
            2.0 * request.particle_radius
        );
        // A grid that is invalid or over the limit is refused by `bake_mesh`.
        if let Ok(estimate) = estimate(&mesh, &settings) {
            let place = format!("bodies[{index}]: {}", request.mesh.display());
            if let Some(warning) = large_bake_warning(&place, &estimate) {
                tracing::warn!("{warning}");
            }
        }
        drop(mesh);
        let progress = Progress::new(self.progress);
        progress.stage(format!("baking bodies[{index}] {}", request.mesh.display()));
        let baked = bake_mesh(&request.mesh, &settings, Voxelizer::Cpu, &progress);
        progress.finish();
        // Every bake error names the mesh file already.
        let baked = baked.map_err(|e| SimError::BodyUnavailable {
            index,
            error: Box::new(e),
        })?;
        self.baked += 1;
        if let Some(path) = &cached {
            let written = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    write_asset(path, &baked.body)
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                });
            if let Err(e) = written {
                // A cache that cannot be written only costs a re-bake next time.
                tracing::warn!("cannot cache {}: {e}", path.display());
            }
        }
        Ok(baked.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pellet_bake::mesh::shapes::cuboid;
    use pellet_formats::assets::FillMode;

    fn request(mesh: PathBuf, particle_radius: f32, scale: f32) -> BodyRequest {
        BodyRequest {
            mesh,
            particle_radius,
            fill: FillMode::Solid,
            density: 1000.0,
            scale,
        }
    }

    #[test]
    fn a_body_over_the_voxel_limit_is_refused_before_baking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("box.glb");
        let glb = pellet_bake::mesh::export::to_glb(&cuboid([0.0; 3], [1.0; 3]));
        std::fs::write(&path, glb).expect("write");
        // A 10 m box at 0.01 m voxels: 10^9 voxels, far over the limit.
        let started = std::time::Instant::now();
        let mut baker = MeshBaker::new(None);
        let err = baker
            .body(3, &request(path.clone(), 0.005, 10.0))
            .expect_err("too large");
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("bodies[3]: {}: ", path.display())),
            "{message}"
        );
        assert_eq!(
            message.matches(&*path.display().to_string()).count(),
            1,
            "{message}"
        );
        assert!(message.contains("1000000000 voxels"), "{message}");
        assert!(message.contains("more than the limit"), "{message}");
        assert_eq!(baker.baked, 0);
        // Refused from the estimate, not after voxelizing a billion voxels.
        assert!(started.elapsed().as_secs() < 60);
    }

    #[test]
    fn large_bakes_are_announced_small_ones_not() {
        let cube = cuboid([0.0; 3], [1.0; 3]);
        let settings = |radius: f32| MeshBaker::settings(&request(PathBuf::new(), radius, 1.0));
        // 0.005 m voxels: 200^3 = 8 M particles; 0.05 m: 8000.
        let big = estimate(&cube, &settings(0.0025)).expect("estimate");
        assert_eq!(big.particles, 8_000_000);
        let warning = large_bake_warning("bodies[0]: box.glb", &big).expect("warned");
        assert!(warning.contains("about 8000000 particles"), "{warning}");
        let small = estimate(&cube, &settings(0.025)).expect("estimate");
        assert_eq!(small.particles, 8000);
        assert!(large_bake_warning("bodies[0]: box.glb", &small).is_none());
    }
}
