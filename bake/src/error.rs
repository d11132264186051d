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
    #[error("{}: {error}", path.display())]
    Grid {
        /// The mesh.
        path: std::path::PathBuf,
        /// What is wrong with the grid.
        error: GridError,
    },
    /// The grid would exceed [`crate::bake_mesh::MAX_VOXELS`] or the body
    /// [`crate::bake_mesh::MAX_PARTICLES`]; refused before voxelizing.
    #[error(
        "{}: at {voxel_size} m voxels the grid would be {}x{}x{} = {voxels} voxels (about {particles} particles), more than {}; {hint}",
        path.display(), dims[0], dims[1], dims[2], over_limits(*voxels, *particles)
    )]
    TooLarge {
        /// The mesh.
        path: std::path::PathBuf,
        /// The grid it would need.
        dims: [u32; 3],
        /// The voxel edge, metres.
        voxel_size: f32,
        /// Voxels in that grid.
        voxels: u64,
        /// Particles expected (see [`crate::bake_mesh::BakeEstimate`]).
        particles: u64,
        /// The coarsest setting that fits.
        hint: String,
    },
    /// The GPU could not be used.
    #[error(transparent)]
    Gpu(#[from] pellet_gpu::GpuError),
    /// GPU voxelization of a mesh failed.
    #[error("{}: {error}", path.display())]
    Voxelize {
        /// The mesh.
        path: std::path::PathBuf,
        /// What the GPU said.
        error: pellet_gpu::GpuError,
    },
    /// The voxelization set no voxel (the mesh is thinner than a voxel).
    #[error("{}: no voxel centre lies inside the mesh at {dims:?} voxels; use a finer resolution or --mode shell", path.display())]
    NoParticles {
        /// The mesh.
        path: std::path::PathBuf,
        /// The grid used.
        dims: [u32; 3],
    },
    /// The table settings are invalid.
    #[error(transparent)]
    Table(#[from] crate::table::TableError),
    /// An output cannot be written (checked before the work).
    #[error(transparent)]
    Output(#[from] crate::output::OutputError),
    /// A scene file is invalid.
    #[error(transparent)]
    Scene(#[from] SceneError),
    /// A file of a scene bake (a mesh, an object, the manifest) could not
    /// be read or written.
    #[error("{}: {reason}", path.display())]
    File {
        /// The file or folder.
        path: std::path::PathBuf,
        /// What went wrong, e.g. the decoder's or the OS's message.
        reason: String,
    },
}

/// `the limit of N voxels`, `... particles`, or both: the limits exceeded.
fn over_limits(voxels: u64, particles: u64) -> String {
    use crate::bake_mesh::{MAX_PARTICLES, MAX_VOXELS};
    match (voxels > MAX_VOXELS, particles > MAX_PARTICLES) {
        (true, true) => {
            format!("the limits of {MAX_VOXELS} voxels and {MAX_PARTICLES} particles")
        }
        (true, false) => format!("the limit of {MAX_VOXELS} voxels"),
        _ => format!("the limit of {MAX_PARTICLES} particles"),
    }
}
