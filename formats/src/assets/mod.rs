//! The asset kinds a `.pellet` file can hold, and the [`Asset`] trait that ties
//! each Rust type to its kind and its semantic validation.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::container::{self, DecodeLimits, Header};
use crate::error::{DecodeError, ValidationError};

mod baked_scene;
mod manifest;
mod overlap_table;
mod particle_body;
mod sim_state;
mod summary;

pub use baked_scene::{BakedBodyRef, BakedScene, particle_object};
pub use manifest::{Manifest, ManifestEntry, is_object_hash};
pub use overlap_table::{OverlapTable, SamplingMethod};
pub use particle_body::{BakeReport, BakeSource, FillMode, MAX_GRID_SIDE, ParticleBody};
pub use sim_state::{
    BodyState, FREE_PARTICLE, MAX_ANGULAR_SPEED, MAX_POSITION_M, MAX_RADIUS_M, MAX_SPEED_M_S,
    SimState,
};
pub use summary::{Summary, SummaryValue, Widen};

/// What a `.pellet` file holds. The discriminant is the header's kind field:
/// never renumber, only append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u16)]
pub enum AssetKind {
    /// A rigid body made of particles ([`ParticleBody`]).
    ParticleBody = 1,
    /// The neighbour-overlap lookup table ([`OverlapTable`]).
    OverlapTable = 2,
    /// A scene with every body baked ([`BakedScene`]).
    BakedScene = 3,
    /// The index of a baked folder ([`Manifest`]).
    Manifest = 4,
    /// A simulation snapshot ([`SimState`]).
    SimState = 5,
}

impl AssetKind {
    /// Every kind, in discriminant order.
    pub const ALL: [AssetKind; 5] = [
        Self::ParticleBody,
        Self::OverlapTable,
        Self::BakedScene,
        Self::Manifest,
        Self::SimState,
    ];

    /// The kind with header value `raw`, if this build knows it.
    pub fn from_u16(raw: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|k| *k as u16 == raw)
    }

    /// Human-readable name, as used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::ParticleBody => "particle body",
            Self::OverlapTable => "neighbour-overlap table",
            Self::BakedScene => "baked scene",
            Self::Manifest => "manifest",
            Self::SimState => "simulation state",
        }
    }

    /// The snake_case identifier used in JSON and file names.
    pub fn ident(self) -> &'static str {
        match self {
            Self::ParticleBody => "particle_body",
            Self::OverlapTable => "overlap_table",
            Self::BakedScene => "baked_scene",
            Self::Manifest => "manifest",
            Self::SimState => "sim_state",
        }
    }
}

impl fmt::Display for AssetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A type that is stored as one kind of `.pellet` file.
pub trait Asset: Serialize + DeserializeOwned {
    /// The header kind of files holding this type.
    const KIND: AssetKind;

    /// Semantic checks run after every decode and before every encode: finite
    /// floats, indices in range, counts consistent.
    fn validate(&self) -> Result<(), ValidationError>;

    /// A few key facts for `bake inspect`.
    fn summary(&self) -> Summary;
}

/// Any asset, as decoded by [`decode_any`] for tools that take every kind.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum AnyAsset {
    /// See [`ParticleBody`].
    ParticleBody(ParticleBody),
    /// See [`OverlapTable`].
    OverlapTable(OverlapTable),
    /// See [`BakedScene`].
    BakedScene(BakedScene),
    /// See [`Manifest`].
    Manifest(Manifest),
    /// See [`SimState`].
    SimState(SimState),
}

impl AnyAsset {
    /// The kind of the held asset.
    pub fn kind(&self) -> AssetKind {
        match self {
            Self::ParticleBody(_) => AssetKind::ParticleBody,
            Self::OverlapTable(_) => AssetKind::OverlapTable,
            Self::BakedScene(_) => AssetKind::BakedScene,
            Self::Manifest(_) => AssetKind::Manifest,
            Self::SimState(_) => AssetKind::SimState,
        }
    }

    /// The held asset's summary.
    pub fn summary(&self) -> Summary {
        match self {
            Self::ParticleBody(a) => a.summary(),
            Self::OverlapTable(a) => a.summary(),
            Self::BakedScene(a) => a.summary(),
            Self::Manifest(a) => a.summary(),
            Self::SimState(a) => a.summary(),
        }
    }
}

/// Decodes whatever asset `bytes` holds, dispatching on the header's kind.
pub fn decode_any(bytes: &[u8], limits: &DecodeLimits) -> Result<(Header, AnyAsset), DecodeError> {
    let (header, payload) = container::open(bytes, limits)?;
    let asset = match header.kind {
        AssetKind::ParticleBody => AnyAsset::ParticleBody(container::decode_payload(&payload)?),
        AssetKind::OverlapTable => AnyAsset::OverlapTable(container::decode_payload(&payload)?),
        AssetKind::BakedScene => AnyAsset::BakedScene(container::decode_payload(&payload)?),
        AssetKind::Manifest => AnyAsset::Manifest(container::decode_payload(&payload)?),
        AssetKind::SimState => AnyAsset::SimState(container::decode_payload(&payload)?),
    };
    Ok((header, asset))
}
