//! # pellet-bake
//!
//! Pellet's asset processor: glTF meshes to rigid bodies made of particles
//! (`mesh` -> `voxel` -> `pack`), and `.pellet` inspection. The `bake`
//! binary is a thin shell over this library.

pub mod bake_mesh;
mod error;
pub mod inspect;
pub mod mesh;
pub use pellet_formats::output;
pub mod pack;
pub mod preview;
pub mod progress;
pub mod report;
pub mod scene_bake;
pub mod table;
pub mod table_validation;
pub mod voxel;

pub use error::BakeError;
