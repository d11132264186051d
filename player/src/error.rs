//! [`PlayerError`]: every failure of the `player` library.

use thiserror::Error;

use pellet_formats::SceneError;

/// Why a player operation failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PlayerError {
    /// No GPU adapter matched the request.
    #[error(
        "no GPU adapter found for backend {backend} (on Debian, `apt-get install mesa-vulkan-drivers libvulkan1` gives the lavapipe software Vulkan driver)"
    )]
    NoAdapter {
        /// The requested backend.
        backend: String,
    },
    /// The adapter refused to create a device.
    #[error("the GPU adapter {adapter:?} refused to create a device: {message}")]
    Device {
        /// Adapter name.
        adapter: String,
        /// wgpu's message.
        message: String,
    },
    /// Waiting for or reading back GPU work failed.
    #[error("GPU readback failed: {0}")]
    Readback(String),
    /// A scene is invalid.
    #[error(transparent)]
    Scene(#[from] SceneError),
}
