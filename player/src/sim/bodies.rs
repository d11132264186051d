//! [`MeshBaker`]: the [`BodySource`] that bakes each `[[bodies]]` mesh with
//! `bake mesh`'s library (CPU voxelizer) and keeps the result in a cache
//! folder keyed by the mesh's BLAKE3 and the bake settings, so a scene whose
//! meshes did not change starts without baking.

use std::path::{Path, PathBuf};

use pellet_bake::bake_mesh::{MeshBakeSettings, Voxelizer, bake_mesh};
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

/// Bakes bodies on demand, through a cache folder.
#[derive(Debug, Clone)]
pub struct MeshBaker {
    /// Where baked bodies are kept; `None` bakes every time.
    pub cache_dir: Option<PathBuf>,
    /// Bodies baked (not found in the cache) so far.
    pub baked: usize,
    /// Bodies found in the cache so far.
    pub cached: usize,
}

/// `$XDG_CACHE_HOME/pellet/bodies`, else `$HOME/.cache/pellet/bodies`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("pellet").join("bodies"))
}

impl MeshBaker {
    /// A baker caching in `cache_dir`.
    pub fn new(cache_dir: Option<PathBuf>) -> Self {
        Self {
            cache_dir,
            baked: 0,
            cached: 0,
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
        let what = |e: &dyn std::fmt::Display| {
            SimError::Invalid(format!("bodies[{index}]: {}: {e}", request.mesh.display()))
        };
        let settings = Self::settings(request);
        let settings_hash = settings.hash(VOXELIZER);
        let (_, mesh_hash) = load_mesh_hashed(&request.mesh).map_err(|e| what(&e))?;
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
        let baked = bake_mesh(
            &request.mesh,
            &settings,
            Voxelizer::Cpu,
            &Progress::hidden(),
        )
        .map_err(|e| what(&e))?;
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
