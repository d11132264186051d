//! [`GpuError`]: why GPU work could not start or finish.

use thiserror::Error;

/// Why GPU work failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum GpuError {
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
    /// A WGSL shader failed to parse or validate.
    #[error("{name}: {report}")]
    Shader {
        /// The shader file, e.g. `forces.wgsl`.
        name: String,
        /// naga's report, with the offending line quoted.
        report: String,
    },
    /// A wgpu validation or out-of-memory error during GPU work.
    #[error("GPU error during {during}: {message}")]
    Wgpu {
        /// What was being done.
        during: String,
        /// wgpu's message.
        message: String,
    },
}
