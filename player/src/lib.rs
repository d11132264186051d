//! # pellet-player
//!
//! Pellet's runtime: loads scenes, simulates particles and rigid bodies on the
//! GPU and renders them. The `player` binary is a thin shell over it.

mod error;

pub mod print;
pub mod remote;
pub mod scene_info;
pub mod sim;
pub mod viewer;

pub use error::PlayerError;
pub use pellet_gpu as gpu;
/// The out-of-core neighbour search (`player nns`), from `pellet-nns`.
pub use pellet_nns as nns;
pub use pellet_render as render;
