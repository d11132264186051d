//! [`BakedScene`]: a scene whose bodies have all been baked.

use serde::{Deserialize, Serialize};

use super::{Asset, AssetKind, Summary, is_object_hash};
use crate::error::ValidationError;
use crate::scene::{ParticleOrigin, Scene};

/// The object hash a baked scene's particle `file` names: `<hash>.pellet`,
/// an object of the same folder. `None` for anything else (a path, `..`, an
/// absolute name), which a baked scene may not hold.
pub fn particle_object(file: &str) -> Option<&str> {
    file.strip_suffix(".pellet").filter(|h| is_object_hash(h))
}

/// The baked particle body used by one `[[bodies]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BakedBodyRef {
    /// The mesh path as the scene names it.
    pub mesh: String,
    /// BLAKE3 of the particle-body object file, 64 lower-case hex digits.
    pub object: String,
    /// Voxel size the body was baked at, metres.
    pub voxel_size: f32,
}

/// A validated scene plus the baked body behind each of its `[[bodies]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BakedScene {
    /// The scene as authored (after defaults were applied).
    pub scene: Scene,
    /// One entry per `scene.bodies` entry, same order.
    pub bodies: Vec<BakedBodyRef>,
}

impl BakedScene {
    /// Every object this scene reads besides itself, in reading order (its
    /// particle files, then its bodies), each checked to be an object of
    /// `manifest` of the right kind; else which entry is not, in words. A
    /// loader reads these and nothing else, hash-checked: a baked folder,
    /// on disk or served, can make a player read nothing outside it.
    pub fn objects_in(
        &self,
        manifest: &super::Manifest,
    ) -> Result<Vec<(String, AssetKind)>, String> {
        let listed = |hash: &str, kind: AssetKind| {
            manifest
                .objects
                .iter()
                .any(|o| o.hash == hash && o.kind == kind)
        };
        let mut out = Vec::new();
        for (i, source) in self.scene.particles.iter().enumerate() {
            if let ParticleOrigin::File(file) = &source.origin {
                // `validate` already refused names that are not object names.
                let hash = particle_object(file)
                    .ok_or_else(|| format!("particles[{i}].file {file:?} is not an object"))?;
                if !listed(hash, AssetKind::SimState) {
                    return Err(format!(
                        "particles[{i}].file {file:?} is not a particle object of the manifest"
                    ));
                }
                out.push((hash.to_owned(), AssetKind::SimState));
            }
        }
        for (i, body) in self.bodies.iter().enumerate() {
            if !listed(&body.object, AssetKind::ParticleBody) {
                return Err(format!(
                    "bodies[{i}] object {} is not a particle body of the manifest",
                    body.object
                ));
            }
            out.push((body.object.clone(), AssetKind::ParticleBody));
        }
        Ok(out)
    }
}

impl Asset for BakedScene {
    const KIND: AssetKind = AssetKind::BakedScene;

    fn validate(&self) -> Result<(), ValidationError> {
        self.scene
            .validate()
            .map_err(|e| ValidationError::new(format!("scene.{}", e.field), e.problem))?;
        if self.bodies.len() != self.scene.bodies.len() {
            return Err(ValidationError::new(
                "bodies",
                format_args!(
                    "has {} baked bodies for {} scene bodies",
                    self.bodies.len(),
                    self.scene.bodies.len()
                ),
            ));
        }
        // A baked folder stands alone: its particle files are objects of the
        // folder, named by hash. Any other name (`/etc/passwd`, `../x.csv`,
        // `/dev/zero`) would make loading it read outside the folder.
        for (i, p) in self.scene.particles.iter().enumerate() {
            if let ParticleOrigin::File(file) = &p.origin
                && particle_object(file).is_none()
            {
                return Err(ValidationError::new(
                    format!("scene.particles[{i}].file"),
                    format_args!(
                        "{file:?} is not an object of the baked folder (`<64-digit BLAKE3>.pellet`); a baked scene reads nothing outside its folder"
                    ),
                ));
            }
        }
        for (i, b) in self.bodies.iter().enumerate() {
            if !is_object_hash(&b.object) {
                return Err(ValidationError::new(
                    format!("bodies[{i}].object"),
                    format_args!("{:?} is not 64 lower-case hex digits", b.object),
                ));
            }
            crate::validate::positive(&format!("bodies[{i}].voxel_size"), b.voxel_size.into())?;
        }
        Ok(())
    }

    fn summary(&self) -> Summary {
        Summary::default()
            .text("name", &self.scene.name)
            .int("particle_entries", self.scene.particles.len())
            .int("bodies", self.scene.bodies.len())
            .int("body_instances", self.scene.body_instance_count())
            .int("walls", self.scene.walls.len())
            .list("domain_min_m", &self.scene.domain.min)
            .list("domain_max_m", &self.scene.domain.max)
    }
}
