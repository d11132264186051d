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

    #[allow(clippy::too_many_lines)]
    fn peel_tile(
        &self,
        mesh: &TriMesh,
        spec: &GridSpec,
        tile: &Tile,
        vertices: &wgpu::Buffer,
        indices: &wgpu::Buffer,
        bits: &wgpu::Buffer,
    ) -> Result<u32, GpuError> {
        let device = &self.gpu.device;
        let queue = &self.gpu.queue;
        let size = wgpu::Extent3d {
            width: tile.w,
            height: tile.h,
            depth_or_array_layers: 1,
        };
        let color = |label: &str| {
            device.create_texture(&wgpu::TextureDescriptor {
                label: Some(label),
                size,
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format: wgpu::TextureFormat::R32Float,
                usage: wgpu::TextureUsages::RENDER_ATTACHMENT
                    | wgpu::TextureUsages::TEXTURE_BINDING
                    | wgpu::TextureUsages::COPY_SRC,
                view_formats: &[],
            })
        };
        let targets = [
            color("voxel/peel/layer_a"),
            color("voxel/peel/layer_b"),
            color("voxel/peel/before_all"),
        ];
        let views: Vec<wgpu::TextureView> = targets
            .iter()
            .map(|t| t.create_view(&Default::default()))
            .collect();
        let depth_texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("voxel/peel/depth"),
            size,
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Depth32Float,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
            view_formats: &[],
        });
        let depth_view = depth_texture.create_view(&Default::default());
        let params = PeelParams {
            origin: [spec.origin[0], spec.origin[1], spec.origin[2], 0.0],
            voxel_size: spec.voxel_size,
            axis: tile.axis as u32,
            tile_u0: tile.u0,
            tile_v0: tile.v0,
            tile_w: tile.w,
            tile_h: tile.h,
            depth_cells: tile.depth,
            _pad: 0,
        };
        let params_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("voxel/peel/params"),
            contents: bytemuck::bytes_of(&params),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        // Bind groups reading each possible previous layer: A, B, before-all.
        let binds: Vec<wgpu::BindGroup> = views
            .iter()
            .map(|previous| {
                device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("voxel/peel/bind_group"),
                    layout: &self.peel_layout,
                    entries: &[
                        entry(0, params_buf.as_entire_binding()),
                        entry(1, wgpu::BindingResource::TextureView(previous)),
                    ],
                })
            })
            .collect();
        let row_bytes = (tile.w * 4).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
        let layer_bytes = u64::from(row_bytes) * u64::from(tile.h);
        let max_layers =
            (self.gpu.report.max_storage_buffer_binding_size / layer_bytes).min(1 << 16) as u32;
        let queries = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("voxel/peel/occlusion"),
            ty: wgpu::QueryType::Occlusion,
            count: BATCH,
        });
        let resolved = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("voxel/peel/occlusion_resolved"),
            size: u64::from(BATCH) * 8,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut capacity = BATCH.min(max_layers).max(1);
        let mut layers = self.layer_buffer(u64::from(capacity) * layer_bytes);

        // Clear the "before everything" layer.
        let mut encoder = device.create_command_encoder(&Default::default());
        drop(encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("voxel/peel/clear_before_all"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: &views[2],
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(wgpu::Color {
                        r: -FAR,
                        g: 0.0,
                        b: 0.0,
                        a: 0.0,
                    }),
                    store: wgpu::StoreOp::Store,
                },
            })],
            depth_stencil_attachment: None,
            timestamp_writes: None,
            occlusion_query_set: None,
            multiview_mask: None,
        }));
        queue.submit([encoder.finish()]);

        let mut peeled = 0u32;
        loop {
            if peeled >= max_layers {
                return Err(GpuError::Wgpu {
                    during: "depth peeling".into(),
                    message: format!(
                        "the mesh has more than {max_layers} depth layers along {}; use --backend cpu",
                        ["x", "y", "z"][tile.axis]
                    ),
                });
            }
            let batch = BATCH.min(max_layers - peeled);
            let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("voxel/peel"),
            });
            if peeled + batch > capacity {
                let grown = (capacity * 2).max(peeled + batch).min(max_layers);
                let bigger = self.layer_buffer(u64::from(grown) * layer_bytes);
                encoder.copy_buffer_to_buffer(
                    &layers,
                    0,
                    &bigger,
                    0,
                    u64::from(peeled) * layer_bytes,
                );
                layers = bigger;
                capacity = grown;
            }
            for b in 0..batch {
                let k = peeled + b;
                let target = (k % 2) as usize;
                let previous = if k == 0 { 2 } else { 1 - target };
                {
                    let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                        label: Some("voxel/peel/layer"),
                        color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                            view: &views[target],
                            depth_slice: None,
                            resolve_target: None,
                            ops: wgpu::Operations {
                                load: wgpu::LoadOp::Clear(wgpu::Color {
                                    r: FAR,
                                    g: 0.0,
                                    b: 0.0,
                                    a: 0.0,
                                }),
                                store: wgpu::StoreOp::Store,
                            },
                        })],
                        depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
                            view: &depth_view,
                            depth_ops: Some(wgpu::Operations {
                                load: wgpu::LoadOp::Clear(1.0),
                                store: wgpu::StoreOp::Discard,
                            }),
                            stencil_ops: None,
                        }),
                        timestamp_writes: None,
                        occlusion_query_set: Some(&queries),
                        multiview_mask: None,
                    });
                    pass.set_pipeline(&self.peel);
                    pass.set_bind_group(0, &binds[previous], &[]);
                    pass.set_vertex_buffer(0, vertices.slice(..));
                    pass.set_index_buffer(indices.slice(..), wgpu::IndexFormat::Uint32);
                    pass.begin_occlusion_query(b);
                    pass.draw_indexed(0..mesh.triangles.len() as u32 * 3, 0, 0..1);
                    pass.end_occlusion_query();
                }
                encoder.copy_texture_to_buffer(
                    wgpu::TexelCopyTextureInfo {
                        texture: &targets[target],
                        mip_level: 0,
                        origin: wgpu::Origin3d::ZERO,
                        aspect: wgpu::TextureAspect::All,
                    },
                    wgpu::TexelCopyBufferInfo {
                        buffer: &layers,
                        layout: wgpu::TexelCopyBufferLayout {
                            offset: u64::from(k) * layer_bytes,
                            bytes_per_row: Some(row_bytes),
                            rows_per_image: Some(tile.h),
                        },
                    },
                    size,
                );
            }
            encoder.resolve_query_set(&queries, 0..batch, &resolved, 0);
            queue.submit([encoder.finish()]);
            let samples: Vec<u64> =
                bytemuck::pod_collect_to_vec(&read_buffer(device, queue, &resolved)?);
            match samples[..batch as usize].iter().position(|&s| s == 0) {
                Some(empty) => {
                    peeled += empty as u32;
                    break;
                }
                None => peeled += batch,
            }
        }

        // Parity of the peeled layers for every voxel of the tile's columns.
        let params = ParityParams {
            tile_u0: tile.u0,
            tile_v0: tile.v0,
            tile_w: tile.w,
            tile_h: tile.h,
            columns_u: tile.columns_u,
            depth_cells: tile.depth,
            layers: peeled,
            row_floats: row_bytes / 4,
            layer_floats: (layer_bytes / 4) as u32,
            _pad: [0; 3],
        };
        let params_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("voxel/parity/params"),
            contents: bytemuck::bytes_of(&params),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("voxel/parity/bind_group"),
            layout: &self.parity.get_bind_group_layout(0),
            entries: &[
                entry(0, params_buf.as_entire_binding()),
                entry(1, layers.as_entire_binding()),
                entry(2, bits.as_entire_binding()),
            ],
        });
        self.gpu.dispatch(
            "voxel/parity",
            &self.parity,
            &bind,
            [tile.w.div_ceil(8), tile.h.div_ceil(8), 1],
        );
        Ok(peeled)
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

    fn shell_inner(&self, mesh: &TriMesh, spec: &GridSpec) -> Result<VoxelGrid, GpuError> {
        let device = &self.gpu.device;
        let words = spec.len().div_ceil(32) as u64;
        self.check_binding("the voxel grid", words * 4)?;
        self.check_binding("the mesh positions", mesh.positions.len() as u64 * 12)?;
        self.check_binding("the mesh triangles", mesh.triangles.len() as u64 * 12)?;
        let positions = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("voxel/shell/positions"),
            contents: bytemuck::cast_slice(&mesh.positions),
            usage: wgpu::BufferUsages::STORAGE,
        });
        let indices = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("voxel/shell/indices"),
            contents: bytemuck::cast_slice(&mesh.triangles),
            usage: wgpu::BufferUsages::STORAGE,
        });
        let grid_buf = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("voxel/grid"),
            size: words.max(1) * 4,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let params = ShellParams {
            origin: [spec.origin[0], spec.origin[1], spec.origin[2], 0.0],
            dims: [spec.dims[0], spec.dims[1], spec.dims[2], 0],
            voxel_size: spec.voxel_size,
            half: (0.5 * f64::from(spec.voxel_size) * (1.0 + SHELL_MARGIN)) as f32,
            margin: SHELL_MARGIN as f32,
            triangles: mesh.triangles.len() as u32,
        };
        let params_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("voxel/shell/params"),
            contents: bytemuck::bytes_of(&params),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("voxel/shell/bind_group"),
            layout: &self.shell.get_bind_group_layout(0),
            entries: &[
                entry(0, params_buf.as_entire_binding()),
                entry(1, positions.as_entire_binding()),
                entry(2, indices.as_entire_binding()),
                entry(3, grid_buf.as_entire_binding()),
            ],
        });
        self.gpu.dispatch(
            "voxel/shell",
            &self.shell,
            &bind,
            dispatch_2d((mesh.triangles.len() as u32).div_ceil(64)),
        );
        let bytes = read_buffer(device, &self.gpu.queue, &grid_buf)?;
        let mut grid = VoxelGrid::empty(spec.dims);
        let read: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
        let n = grid.words.len();
        grid.words.copy_from_slice(&read[..n]);
        Ok(grid)
    }
}

/// One tile of columns along one axis.
#[derive(Debug, Clone, Copy)]
struct Tile {
    axis: usize,
    u0: u32,
    v0: u32,
    w: u32,
    h: u32,
    columns_u: u32,
    depth: u32,
}
