//! # pellet-formats
//!
//! The contract between Pellet's `bake` and `player`: the `.pellet` container
//! ([`container`]), the asset types it holds ([`assets`]) and the scene schema
//! ([`scene`]). No GPU, windowing or network code lives here, so both sides
//! (and third-party tools) can depend on it cheaply.
//!
//! ```
//! use pellet_formats::assets::SimState;
//! use pellet_formats::container::{decode, encode, DecodeLimits};
//!
//! let state = SimState { time: 0.5, ..Default::default() };
//! let bytes = encode(&state).unwrap();
//! let back: SimState = decode(&bytes, &DecodeLimits::default()).unwrap();
//! assert_eq!(back, state);
//! ```

pub mod assets;
pub mod baked_folder;
pub mod blob;
pub mod container;
pub mod distribution;
pub mod error;
pub mod estimate;
pub mod io;
pub mod output;
pub mod points;
pub mod scene;
pub(crate) mod validate;
#[cfg(feature = "watch")]
pub mod watch;

pub use assets::{AnyAsset, Asset, AssetKind};
pub use blob::PodVec;
pub use container::{DecodeLimits, Header};
pub use error::{DecodeError, EncodeError, ReadError, ValidationError, WriteError};
pub use scene::{Scene, SceneError};
