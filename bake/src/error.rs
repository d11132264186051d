//! [`BakeError`]: every failure of the `bake` library, one line each.

use thiserror::Error;

use pellet_formats::SceneError;
use pellet_formats::error::{FileError, ReadError, WriteError};

use crate::mesh::MeshError;
use crate::voxel::GridError;

/// Why a bake command failed. Each variant's message names the file.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BakeError {
    /// A `.pellet` file could not be read or decoded.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A `.pellet` file could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A mesh could not be loaded.
    #[error(transparent)]
    Mesh(#[from] FileError<MeshError>),
    /// The requested grid cannot be made for this mesh.
    #[error("{0}")]
    Grid(#[from] GridError),
    /// GPU voxelization failed.
    #[error(transparent)]
    Gpu(#[from] pellet_gpu::GpuError),
    /// The voxelization set no voxel (the mesh is thinner than a voxel).
    #[error("{}: no voxel centre lies inside the mesh at {dims:?} voxels; use a finer resolution or --mode shell", path.display())]
    NoParticles {
        /// The mesh.
        path: std::path::PathBuf,
        /// The grid used.
        dims: [u32; 3],
    },
    /// The table settings are invalid.
    #[error("{0}")]
    Table(#[from] crate::table::TableError),
    /// A scene file is invalid.
    #[error(transparent)]
    Scene(#[from] SceneError),
    /// Anything else, with the file it concerns in the message.
    #[error("{0}")]
    Invalid(String),
}
