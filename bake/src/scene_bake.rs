//! `bake scene`: bakes every mesh a scene references into a servable baked
//! folder (see `pellet_formats::baked_folder`): one particle-body object per
//! `[[bodies]]` entry at the voxel size the scene implies, particle files
//! converted to objects, the baked scene, and the manifest written last.
//! Bodies whose mesh hash and bake settings match an object already in the
//! folder are not baked again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use pellet_formats::assets::{
    AssetKind, BakedBodyRef, BakedScene, Manifest, ManifestEntry, ParticleBody, SimState,
};
use pellet_formats::baked_folder::{read_manifest, read_object, write_manifest, write_object};
use pellet_formats::scene::{ParticleOrigin, Radius, load_particle_file};
use pellet_formats::{DecodeLimits, Scene};

use crate::bake_mesh::{MeshBakeSettings, Voxelizer, bake_mesh};
use crate::error::BakeError;
use crate::mesh::load_mesh_hashed;
use crate::progress::Progress;
use crate::voxel::Resolution;

/// What `bake scene` did for one body entry.
#[derive(Debug, Clone, Serialize)]
pub struct BodyLine {
    /// The mesh as the scene names it.
    pub mesh: String,
    /// Object hash of its particle body.
    pub object: String,
    /// Particles in the body.
    pub particles: usize,
    /// Whether it was baked now (false: reused unchanged).
    pub baked: bool,
}

/// What `bake scene` did.
#[derive(Debug, Clone, Serialize)]
pub struct SceneBakeReport {
    /// Scene name.
    pub scene: String,
    /// The baked folder.
    pub folder: PathBuf,
    /// One line per `[[bodies]]` entry.
    pub bodies: Vec<BodyLine>,
    /// Hash of the baked-scene object.
    pub scene_object: String,
    /// Objects in the manifest.
    pub objects: usize,
    /// Bytes of all objects.
    pub bytes: u64,
}

fn io(path: &Path, e: impl std::fmt::Display) -> BakeError {
    BakeError::File {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// Bodies already in `out` (from its manifest), by (mesh hash, settings hash).
fn existing_bodies(out: &Path) -> BTreeMap<(String, String), (String, ParticleBody)> {
    let mut found = BTreeMap::new();
    let limits = DecodeLimits::default();
    let Ok(manifest) = read_manifest(out, &limits) else {
        return found;
    };
    for entry in manifest
        .objects
        .iter()
        .filter(|e| e.kind == AssetKind::ParticleBody)
    {
        match read_object::<ParticleBody>(out, &entry.hash, &limits) {
            Ok(body) => {
                let key = (
                    body.source.mesh_hash.clone(),
                    body.source.settings_hash.clone(),
                );
                found.insert(key, (entry.hash.clone(), body));
            }
            Err(e) => tracing::warn!("ignoring {}: {e}", entry.hash),
        }
    }
    found
}

/// Bakes `scene_path` into the folder `out`.
pub fn bake_scene(
    scene_path: &Path,
    out: &Path,
    voxelizer: Voxelizer<'_>,
    progress: &Progress,
) -> Result<SceneBakeReport, BakeError> {
    let mut scene = Scene::load(scene_path)?;
    let dir = scene_path.parent().unwrap_or(Path::new("."));
    // The folder must be one (created if missing) that can be written, checked
    // before any body is baked.
    crate::output::prepare_folder(out)?;
    let existing = existing_bodies(out);
    let kind = match voxelizer {
        Voxelizer::Gpu(_) => "gpu",
        Voxelizer::Cpu => "cpu",
    };
    let mut objects: Vec<ManifestEntry> = Vec::new();
    let mut add = |hash: String, kind: AssetKind, size: u64, label: String| {
        if !objects.iter().any(|o| o.hash == hash) {
            objects.push(ManifestEntry {
                hash,
                kind,
                size,
                label,
            });
        }
    };
    let mut refs = Vec::new();
    let mut lines = Vec::new();
    for (k, spec) in scene.bodies.iter().enumerate() {
        let radius = scene.body_particle_radius(spec);
        let settings = MeshBakeSettings {
            resolution: Resolution::VoxelSize(2.0 * radius),
            fill: spec.fill,
            density: scene.body_density(spec),
            scale: spec.scale,
        };
        let mesh_path = dir.join(&spec.mesh);
        let (_, mesh_hash) = load_mesh_hashed(&mesh_path).map_err(|e| io(&mesh_path, e))?;
        let key = (mesh_hash, settings.hash(kind));
        let (body, baked) = match existing.get(&key) {
            Some((_, body)) => (body.clone(), false),
            None => {
                progress.stage(format!("baking bodies[{k}] {}", spec.mesh));
                (
                    bake_mesh(&mesh_path, &settings, voxelizer, progress)?.body,
                    true,
                )
            }
        };
        let (hash, size) = write_object(out, &body).map_err(|e| io(out, e))?;
        add(
            hash.clone(),
            AssetKind::ParticleBody,
            size,
            spec.mesh.clone(),
        );
        lines.push(BodyLine {
            mesh: spec.mesh.clone(),
            object: hash.clone(),
            particles: body.positions.len(),
            baked,
        });
        refs.push(BakedBodyRef {
            mesh: spec.mesh.clone(),
            object: hash,
            voxel_size: 2.0 * radius,
        });
    }
    // Particle files become objects next to the scene, so the folder stands alone.
    for (k, source) in scene.particles.iter_mut().enumerate() {
        if let ParticleOrigin::File(file) = &source.origin {
            let path = dir.join(file);
            let radius = source
                .radius
                .unwrap_or(Radius::Fixed(scene.simulation.particle_radius));
            let inits = load_particle_file(&path, source, &radius, k as u32)?;
            let n = inits.len();
            let state = SimState {
                positions: inits.iter().map(|p| p.position).collect::<Vec<_>>().into(),
                velocities: inits.iter().map(|p| p.velocity).collect::<Vec<_>>().into(),
                angular_velocities: vec![[0.0f32; 3]; n].into(),
                radii: inits.iter().map(|p| p.radius).collect::<Vec<_>>().into(),
                body_of_particle: vec![pellet_formats::assets::FREE_PARTICLE; n].into(),
                ..Default::default()
            };
            let (hash, size) = write_object(out, &state).map_err(|e| io(out, e))?;
            add(hash.clone(), AssetKind::SimState, size, file.clone());
            source.origin = ParticleOrigin::File(format!("{hash}.pellet"));
        }
    }
    let baked = BakedScene {
        scene: scene.clone(),
        bodies: refs,
    };
    let (scene_hash, size) = write_object(out, &baked).map_err(|e| io(out, e))?;
    add(
        scene_hash.clone(),
        AssetKind::BakedScene,
        size,
        scene.name.clone(),
    );
    let bytes = objects.iter().map(|o| o.size).sum();
    let count = objects.len();
    let manifest = Manifest {
        name: scene.name.clone(),
        scene: scene_hash.clone(),
        objects,
        generator: format!("pellet-bake {}", env!("CARGO_PKG_VERSION")),
    };
    write_manifest(out, &manifest).map_err(|e| io(out, e))?;
    Ok(SceneBakeReport {
        scene: scene.name,
        folder: out.to_path_buf(),
        bodies: lines,
        scene_object: scene_hash,
        objects: count,
        bytes,
    })
}
