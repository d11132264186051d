//! [`Manifest`]: the small index of a baked, content-addressed folder.

use serde::{Deserialize, Serialize};

use super::{Asset, AssetKind, Summary};
use crate::error::ValidationError;

/// One object of a baked folder. Its file name is `<hash>.pellet`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// BLAKE3 of the object file's bytes, 64 lower-case hex digits.
    pub hash: String,
    /// What the object holds.
    pub kind: AssetKind,
    /// Size of the object file, bytes.
    pub size: u64,
    /// A human label (e.g. the mesh it was baked from).
    #[serde(default)]
    pub label: String,
}

/// Names a baked scene and every object it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Scene name.
    pub name: String,
    /// Hash of the [`super::BakedScene`] object.
    pub scene: String,
    /// Every object the scene needs, including the scene itself.
    pub objects: Vec<ManifestEntry>,
    /// Tool and version that wrote it, e.g. `pellet-bake 0.1.0`.
    #[serde(default)]
    pub generator: String,
}

/// Whether `s` is a 64-digit lower-case hex BLAKE3 hash (and so a safe file name).
pub fn is_object_hash(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Asset for Manifest {
    const KIND: AssetKind = AssetKind::Manifest;

    fn validate(&self) -> Result<(), ValidationError> {
        for (i, e) in self.objects.iter().enumerate() {
            if !is_object_hash(&e.hash) {
                return Err(ValidationError::new(
                    format!("objects[{i}].hash"),
                    format_args!("{:?} is not 64 lower-case hex digits", e.hash),
                ));
            }
            if self.objects[..i].iter().any(|o| o.hash == e.hash) {
                return Err(ValidationError::new(
                    format!("objects[{i}].hash"),
                    "appears twice",
                ));
            }
        }
        match self.objects.iter().find(|o| o.hash == self.scene) {
            Some(e) if e.kind == AssetKind::BakedScene => Ok(()),
            Some(e) => Err(ValidationError::new(
                "scene",
                format_args!("names a {} object, not a baked scene", e.kind),
            )),
            None => Err(ValidationError::new(
                "scene",
                format_args!("{:?} is not among the objects", self.scene),
            )),
        }
    }

    fn summary(&self) -> Summary {
        Summary::default()
            .text("name", &self.name)
            .text("scene", &self.scene)
            .int("objects", self.objects.len())
            .int(
                "total_bytes",
                self.objects.iter().map(|o| o.size).sum::<u64>(),
            )
            .text("generator", &self.generator)
    }
}
