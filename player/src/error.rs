//! [`PlayerError`]: every failure of the `player` library.

use thiserror::Error;

use pellet_formats::SceneError;

/// Why a player operation failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PlayerError {
    /// GPU work failed.
    #[error(transparent)]
    Gpu(#[from] pellet_gpu::GpuError),
    /// A scene is invalid.
    #[error(transparent)]
    Scene(#[from] SceneError),
    /// A baked folder or served scene could not be loaded.
    #[error(transparent)]
    Sim(#[from] crate::sim::SimError),
}
