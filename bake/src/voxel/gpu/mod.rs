//! GPU voxelization with wgpu, offscreen.
//!
//! **Solid**: for each axis, orthographic depth peeling (`peel.wgsl`) renders
//! the mesh once per depth layer, keeping per pixel (= voxel column) the
//! nearest surface behind the previous layer, until a pass draws nothing
//! (an occlusion query says so): as many layers as the mesh has. Each layer is
//! copied into a buffer; `parity.wgsl` then marks each voxel inside by the
//! parity of layers in front of its centre; `vote.wgsl` combines the three
//! axes by majority and counts where they disagree. Columns are processed in
//! tiles of at most [`TILE`]² so textures and layer buffers stay small.
//!
//! **Shell**: `shell.wgsl` runs one invocation per triangle and sets every
//! voxel the triangle overlaps (separating axis test).
//!
//! CPU twins: [`super::cpu::solid`] and [`super::cpu::shell`].

use bytemuck::{Pod, Zeroable};
use pellet_gpu::wgpu::util::DeviceExt;
use pellet_gpu::{Gpu, GpuError, dispatch_2d, readback::read_buffer, wgpu};

use super::grid::{GridSpec, VoxelGrid};
use super::{SHELL_MARGIN, SolidVoxels};
use crate::mesh::TriMesh;

/// Largest tile of columns peeled at once, per side.
pub const TILE: u32 = 512;
/// Peeling passes submitted between occlusion readbacks.
mod shell;
mod tile;

use tile::Tile;

const BATCH: u32 = 8;
/// Sentinel depth for "no surface" (cleared colour) and "before everything".
const FAR: f64 = 1.0e30;

/// Uniforms of `peel.wgsl` (keep in sync with `PeelParams` there).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct PeelParams {
    origin: [f32; 4],
    voxel_size: f32,
    axis: u32,
    tile_u0: u32,
    tile_v0: u32,
    tile_w: u32,
    tile_h: u32,
    depth_cells: u32,
    _pad: u32,
}

/// Uniforms of `parity.wgsl` (keep in sync with `ParityParams` there).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct ParityParams {
    tile_u0: u32,
    tile_v0: u32,
    tile_w: u32,
    tile_h: u32,
    columns_u: u32,
    depth_cells: u32,
    layers: u32,
    row_floats: u32,
    layer_floats: u32,
    _pad: [u32; 3],
}

/// Uniforms of `vote.wgsl` (keep in sync with `VoteParams` there).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct VoteParams {
    dims: [u32; 4],
    words: u32,
    _pad: [u32; 3],
}

/// Uniforms of `shell.wgsl` (keep in sync with `ShellParams` there).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct ShellParams {
    origin: [f32; 4],
    dims: [u32; 4],
    voxel_size: f32,
    half: f32,
    margin: f32,
    triangles: u32,
}

/// The WGSL sources, for offline validation and the layout test.
pub const SHADERS: [(&str, &str); 4] = [
    ("peel.wgsl", include_str!("peel.wgsl")),
    ("parity.wgsl", include_str!("parity.wgsl")),
    ("vote.wgsl", include_str!("vote.wgsl")),
    ("shell.wgsl", include_str!("shell.wgsl")),
];

/// Rust sizes of the uniform structs, by WGSL struct name, for the layout test.
pub const UNIFORM_SIZES: [(&str, usize); 4] = [
    ("PeelParams", size_of::<PeelParams>()),
    ("ParityParams", size_of::<ParityParams>()),
    ("VoteParams", size_of::<VoteParams>()),
    ("ShellParams", size_of::<ShellParams>()),
];

/// Compiled voxelization pipelines on one device.
#[derive(Debug)]
pub struct GpuVoxelizer {
    gpu: Gpu,
    peel_layout: wgpu::BindGroupLayout,
    peel: wgpu::RenderPipeline,
    parity: wgpu::ComputePipeline,
    vote: wgpu::ComputePipeline,
    shell: wgpu::ComputePipeline,
}

fn compute_pipeline(
    device: &wgpu::Device,
    label: &str,
    source: &str,
    entry: &str,
) -> wgpu::ComputePipeline {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(label),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(label),
        layout: None,
        module: &module,
        entry_point: Some(entry),
        compilation_options: Default::default(),
        cache: None,
    })
}

fn entry(binding: u32, resource: wgpu::BindingResource<'_>) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry { binding, resource }
}

impl GpuVoxelizer {
    /// Compiles the pipelines on `gpu`.
    pub fn new(gpu: Gpu) -> Self {
        let device = &gpu.device;
        let peel_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("voxel/peel"),
            source: wgpu::ShaderSource::Wgsl(SHADERS[0].1.into()),
        });
        let peel_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("voxel/peel/layout"),
            entries: &[
                wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::VERTEX | wgpu::ShaderStages::FRAGMENT,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                },
                wgpu::BindGroupLayoutEntry {
                    binding: 1,
                    visibility: wgpu::ShaderStages::FRAGMENT,
                    ty: wgpu::BindingType::Texture {
                        sample_type: wgpu::TextureSampleType::Float { filterable: false },
                        view_dimension: wgpu::TextureViewDimension::D2,
                        multisampled: false,
                    },
                    count: None,
                },
            ],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("voxel/peel/pipeline_layout"),
            bind_group_layouts: &[Some(&peel_layout)],
            immediate_size: 0,
        });
        let peel = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("voxel/peel"),
            layout: Some(&pipeline_layout),
            vertex: wgpu::VertexState {
                module: &peel_module,
                entry_point: Some("vs_peel"),
                compilation_options: Default::default(),
                buffers: &[Some(wgpu::VertexBufferLayout {
                    array_stride: 12,
                    step_mode: wgpu::VertexStepMode::Vertex,
                    attributes: &[wgpu::VertexAttribute {
                        format: wgpu::VertexFormat::Float32x3,
                        offset: 0,
                        shader_location: 0,
                    }],
                })],
            },
            primitive: wgpu::PrimitiveState {
                topology: wgpu::PrimitiveTopology::TriangleList,
                cull_mode: None,
                ..Default::default()
            },
            depth_stencil: Some(wgpu::DepthStencilState {
                format: wgpu::TextureFormat::Depth32Float,
                depth_write_enabled: Some(true),
                depth_compare: Some(wgpu::CompareFunction::Less),
                stencil: Default::default(),
                bias: Default::default(),
            }),
            multisample: Default::default(),
            fragment: Some(wgpu::FragmentState {
                module: &peel_module,
                entry_point: Some("fs_peel"),
                compilation_options: Default::default(),
                targets: &[Some(wgpu::ColorTargetState {
                    format: wgpu::TextureFormat::R32Float,
                    blend: None,
                    write_mask: wgpu::ColorWrites::ALL,
                })],
            }),
            multiview_mask: None,
            cache: None,
        });
        let parity = compute_pipeline(device, "voxel/parity", SHADERS[1].1, "parity");
        let vote = compute_pipeline(device, "voxel/vote", SHADERS[2].1, "vote");
        let shell = compute_pipeline(device, "voxel/shell", SHADERS[3].1, "shell");
        Self {
            gpu,
            peel_layout,
            peel,
            parity,
            vote,
            shell,
        }
    }

    /// The adapter in use.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Runs `work` inside validation and out-of-memory error scopes, so a
    /// wgpu error comes back as a value instead of a panic.
    fn scoped<T>(
        &self,
        during: &str,
        work: impl FnOnce() -> Result<T, GpuError>,
    ) -> Result<T, GpuError> {
        let device = &self.gpu.device;
        let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let result = work();
        let errors = [
            pollster::block_on(validation.pop()),
            pollster::block_on(oom.pop()),
        ];
        if let Some(e) = errors.into_iter().flatten().next() {
            return Err(GpuError::Wgpu {
                during: during.to_owned(),
                message: e.to_string(),
            });
        }
        result
    }

    /// Solid voxelization: inside by parity, three axes, majority vote.
    pub fn solid(&self, mesh: &TriMesh, spec: &GridSpec) -> Result<SolidVoxels, GpuError> {
        self.scoped("solid voxelization", || self.solid_inner(mesh, spec))
    }

    /// Shell voxelization: voxels the surface passes through.
    pub fn shell(&self, mesh: &TriMesh, spec: &GridSpec) -> Result<VoxelGrid, GpuError> {
        self.scoped("shell voxelization", || self.shell_inner(mesh, spec))
    }

    fn check_binding(&self, what: &str, bytes: u64) -> Result<(), GpuError> {
        let limit = self.gpu.report.max_storage_buffer_binding_size;
        if bytes > limit {
            return Err(GpuError::Wgpu {
                during: what.to_owned(),
                message: format!(
                    "needs a {bytes}-byte buffer, more than the adapter's {limit}-byte storage binding limit (use a larger voxel size or --backend cpu)"
                ),
            });
        }
        Ok(())
    }

    fn solid_inner(&self, mesh: &TriMesh, spec: &GridSpec) -> Result<SolidVoxels, GpuError> {
        let device = &self.gpu.device;
        let vertices = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("voxel/vertices"),
            contents: bytemuck::cast_slice(&mesh.positions),
            usage: wgpu::BufferUsages::VERTEX,
        });
        let indices = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("voxel/indices"),
            contents: bytemuck::cast_slice(&mesh.triangles),
            usage: wgpu::BufferUsages::INDEX,
        });
        let mut axis_bits = Vec::with_capacity(3);
        let mut layers = [0u32; 3];
        for axis in 0..3 {
            let (bits, peeled) = self.peel_axis(mesh, spec, axis, &vertices, &indices)?;
            axis_bits.push(bits);
            layers[axis] = peeled;
        }
        let words = spec.len().div_ceil(32) as u32;
        self.check_binding("the voxel grid", u64::from(words) * 4)?;
        let grid_buf = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("voxel/grid"),
            size: u64::from(words.max(1)) * 4,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let counter = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("voxel/disagreements"),
            contents: bytemuck::bytes_of(&0u32),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        });
        let params = VoteParams {
            dims: [spec.dims[0], spec.dims[1], spec.dims[2], 0],
            words,
            _pad: [0; 3],
        };
        let params_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("voxel/vote/params"),
            contents: bytemuck::bytes_of(&params),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("voxel/vote/bind_group"),
            layout: &self.vote.get_bind_group_layout(0),
            entries: &[
                entry(0, params_buf.as_entire_binding()),
                entry(1, axis_bits[0].as_entire_binding()),
                entry(2, axis_bits[1].as_entire_binding()),
                entry(3, axis_bits[2].as_entire_binding()),
                entry(4, grid_buf.as_entire_binding()),
                entry(5, counter.as_entire_binding()),
            ],
        });
        self.gpu.dispatch(
            "voxel/vote",
            &self.vote,
            &bind,
            dispatch_2d(words.div_ceil(64)),
        );
        let grid_bytes = read_buffer(device, &self.gpu.queue, &grid_buf)?;
        let counter_bytes = read_buffer(device, &self.gpu.queue, &counter)?;
        let mut grid = VoxelGrid::empty(spec.dims);
        let words_read: Vec<u32> = bytemuck::pod_collect_to_vec(&grid_bytes);
        let n = grid.words.len();
        grid.words.copy_from_slice(&words_read[..n]);
        let disagreements: u32 = bytemuck::pod_read_unaligned(&counter_bytes[..4]);
        Ok(SolidVoxels {
            grid,
            layers,
            disagreements: u64::from(disagreements),
        })
    }

    /// Peels every tile along `axis` and returns the axis-local parity bits
    /// and the most layers any tile needed.
    fn peel_axis(
        &self,
        mesh: &TriMesh,
        spec: &GridSpec,
        axis: usize,
        vertices: &wgpu::Buffer,
        indices: &wgpu::Buffer,
    ) -> Result<(wgpu::Buffer, u32), GpuError> {
        let device = &self.gpu.device;
        let (u, v) = ((axis + 1) % 3, (axis + 2) % 3);
        let (nu, nv, depth) = (spec.dims[u], spec.dims[v], spec.dims[axis]);
        let words_per_column = depth.div_ceil(32);
        let bits_bytes = u64::from(nu) * u64::from(nv) * u64::from(words_per_column) * 4;
        self.check_binding("the parity bits", bits_bytes)?;
        let bits = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("voxel/axis_bits"),
            size: bits_bytes.max(4),
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let mut most_layers = 0;
        for tile_v0 in (0..nv).step_by(TILE as usize) {
            for tile_u0 in (0..nu).step_by(TILE as usize) {
                let tile = Tile {
                    axis,
                    u0: tile_u0,
                    v0: tile_v0,
                    w: TILE.min(nu - tile_u0),
                    h: TILE.min(nv - tile_v0),
                    columns_u: nu,
                    depth,
                };
                let peeled = self.peel_tile(mesh, spec, &tile, vertices, indices, &bits)?;
                most_layers = most_layers.max(peeled);
            }
        }
        Ok((bits, most_layers))
    }

    fn layer_buffer(&self, bytes: u64) -> wgpu::Buffer {
        self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("voxel/peel/layers"),
            size: bytes.max(4),
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    }
}
