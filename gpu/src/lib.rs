//! # pellet-gpu
//!
//! The GPU context shared by Pellet's `bake` (voxelization) and `player`
//! (simulation, rendering): adapter choice, device creation, a report of what
//! was chosen, and readback.
//!
//! Pellet runs on any wgpu adapter. On a machine without a GPU it uses Mesa's
//! lavapipe (software Vulkan), which CI uses too; `--backend gl` picks Mesa's
//! llvmpipe OpenGL instead.

use serde::Serialize;

mod error;
pub mod readback;
pub mod selftest;

pub use error::GpuError;

/// Parses and validates WGSL with naga, as every pipeline of Pellet's does
/// before it is built; the error is naga's report with the offending line
/// quoted. The module and its info serve reflection (which bindings each
/// entry point uses).
pub fn validate_wgsl(
    name: &str,
    source: &str,
) -> Result<(naga::Module, naga::valid::ModuleInfo), GpuError> {
    let fail = |report: String| GpuError::Shader {
        name: name.to_owned(),
        report,
    };
    let module =
        naga::front::wgsl::parse_str(source).map_err(|e| fail(e.emit_to_string(source)))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| fail(e.emit_to_string(source)))?;
    Ok((module, info))
}
pub use naga;
pub use wgpu;

/// Which wgpu backend to use.
/// Parsed from and shown as its [`name`](Self::name) (`auto`, `vulkan`, `gl`),
/// so command lines take it without this crate knowing about them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// The best adapter of any backend: discrete over integrated over
    /// software, Vulkan over OpenGL at equal rank.
    #[default]
    Auto,
    /// Vulkan only (lavapipe when there is no GPU).
    Vulkan,
    /// OpenGL / GLES only (llvmpipe when there is no GPU).
    Gl,
}

impl BackendChoice {
    /// Backends to try, in order, until one has an adapter.
    fn backend_order(self) -> Vec<wgpu::Backends> {
        match self {
            Self::Auto => vec![wgpu::Backends::VULKAN, wgpu::Backends::GL],
            Self::Vulkan => vec![wgpu::Backends::VULKAN],
            Self::Gl => vec![wgpu::Backends::GL],
        }
    }

    /// Every choice, in the order the names are listed.
    pub const ALL: [Self; 3] = [Self::Auto, Self::Vulkan, Self::Gl];

    /// The names [`FromStr`](std::str::FromStr) accepts, for help texts.
    pub const NAMES: [&'static str; 3] = ["auto", "vulkan", "gl"];

    /// The lower-case name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Vulkan => "vulkan",
            Self::Gl => "gl",
        }
    }
}

impl std::fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for BackendChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                format!(
                    "{s:?} is not a GPU backend (one of {})",
                    Self::NAMES.join(", ")
                )
            })
    }
}

/// What was chosen, for logs, `player gpu` and benchmark reports.
#[derive(Debug, Clone, Serialize)]
pub struct AdapterReport {
    /// Adapter name, e.g. `llvmpipe (LLVM 15.0.6, 256 bits)`.
    pub name: String,
    /// `Vulkan`, `Gl`, ...
    pub backend: String,
    /// `DiscreteGpu`, `Cpu`, ...
    pub device_type: String,
    /// Driver name, e.g. `llvmpipe`.
    pub driver: String,
    /// Driver details, e.g. `Mesa 22.3.6 (LLVM 15.0.6)`.
    pub driver_info: String,
    /// Largest storage buffer binding, bytes.
    pub max_storage_buffer_binding_size: u64,
    /// Largest buffer, bytes.
    pub max_buffer_size: u64,
    /// Workgroup shared memory, bytes.
    pub max_compute_workgroup_storage_size: u32,
    /// Invocations per workgroup.
    pub max_compute_invocations_per_workgroup: u32,
    /// Whether GPU timestamp queries are available.
    pub timestamps: bool,
}

impl AdapterReport {
    fn new(adapter: &wgpu::Adapter) -> Self {
        let info = adapter.get_info();
        let limits = adapter.limits();
        Self {
            name: info.name,
            backend: format!("{:?}", info.backend),
            device_type: format!("{:?}", info.device_type),
            driver: info.driver,
            driver_info: info.driver_info,
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_buffer_size: limits.max_buffer_size,
            max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
            max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
            timestamps: adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY),
        }
    }

    /// One line: `name (backend, device type, driver info)`.
    pub fn one_line(&self) -> String {
        format!(
            "{} ({}, {}, {} {})",
            self.name, self.backend, self.device_type, self.driver, self.driver_info
        )
    }
}

/// An adapter with its device and queue.
#[derive(Debug)]
pub struct Gpu {
    /// The adapter the device came from.
    pub adapter: wgpu::Adapter,
    /// The logical device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// What was chosen.
    pub report: AdapterReport,
}

/// Rank for choosing among adapters: higher is better.
fn rank(info: &wgpu::AdapterInfo) -> (u8, u8) {
    let device = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 4,
        wgpu::DeviceType::IntegratedGpu => 3,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 1,
        wgpu::DeviceType::Other => 0,
    };
    let backend = match info.backend {
        wgpu::Backend::Vulkan => 2,
        wgpu::Backend::Gl => 1,
        _ => 0,
    };
    (device, backend)
}

/// `groups` workgroups laid out as a 2-D dispatch within the 65 535 limit per
/// dimension; kernels recover the flat index as `gid.x + gid.y * groups.x * size`.
pub fn dispatch_2d(groups: u32) -> [u32; 3] {
    let x = groups.clamp(1, 65_535);
    [x, groups.div_ceil(x).max(1), 1]
}

impl Gpu {
    /// Records and submits one compute dispatch of `pipeline` with
    /// `bind_group` at group 0. `label` names the encoder and the pass.
    pub fn dispatch(
        &self,
        label: &str,
        pipeline: &wgpu::ComputePipeline,
        bind_group: &wgpu::BindGroup,
        workgroups: [u32; 3],
    ) {
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(label),
                timestamp_writes: None,
            });
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, bind_group, &[]);
            pass.dispatch_workgroups(workgroups[0], workgroups[1], workgroups[2]);
        }
        self.queue.submit([encoder.finish()]);
    }

    /// Wraps a device opened elsewhere (e.g. for a window's surface).
    pub fn from_parts(adapter: wgpu::Adapter, device: wgpu::Device, queue: wgpu::Queue) -> Self {
        let report = AdapterReport::new(&adapter);
        Self {
            adapter,
            device,
            queue,
            report,
        }
    }

    /// Chooses an adapter for `choice` and opens a device with the adapter's
    /// own limits (the simulation sizes its buffers to them).
    pub fn new(choice: BackendChoice) -> Result<Self, GpuError> {
        pollster::block_on(Self::new_async(choice))
    }

    async fn new_async(choice: BackendChoice) -> Result<Self, GpuError> {
        // Try Vulkan before OpenGL: probing GL opens EGL, which is slow and
        // chatty on headless machines, and Vulkan is preferred anyway.
        let mut adapter = None;
        for backends in choice.backend_order() {
            let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
            desc.backends = backends;
            let instance = wgpu::Instance::new(desc);
            adapter = instance
                .enumerate_adapters(backends)
                .await
                .into_iter()
                .max_by_key(|a| rank(&a.get_info()));
            if adapter.is_some() {
                break;
            }
        }
        let adapter = adapter.ok_or_else(|| GpuError::NoAdapter {
            backend: choice.name().to_owned(),
        })?;
        let report = AdapterReport::new(&adapter);
        let mut features = wgpu::Features::empty();
        if report.timestamps {
            features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("pellet"),
                required_features: features,
                required_limits: adapter.limits(),
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::Device {
                adapter: report.name.clone(),
                message: e.to_string(),
            })?;
        tracing::info!(adapter = %report.one_line(), "GPU ready");
        Ok(Self {
            adapter,
            device,
            queue,
            report,
        })
    }
}
