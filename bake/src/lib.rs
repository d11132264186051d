//! # pellet-bake
//!
//! Pellet's asset processor. Today it inspects `.pellet` files; mesh
//! voxelization, the neighbour-overlap table and scene baking build on it.
//! The `bake` binary is a thin shell over this library.

mod error;
pub mod inspect;

pub use error::BakeError;
