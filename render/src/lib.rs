//! Rendering: spheres as screen-space impostors (`spheres.wgsl`) read
//! straight from the simulation's GPU buffers, a floor and the scene's walls,
//! into an offscreen 4x multisampled target; [`FrameRenderer::render`]
//! returns the frame as an RGBA image (headless frames, thumbnails, golden
//! image tests).

use std::sync::Arc;

use bytemuck::{Pod, Zeroable};
use pellet_gpu::wgpu::util::DeviceExt;
use pellet_gpu::{Gpu, GpuError, wgpu};

use pellet_sim::SimError;
use pellet_sim::gpu::{GpuSim, SimBuffer};
use pellet_sim::setup::SimSetup;

pub mod camera;

pub use camera::Camera;

const SHADER: &str = include_str!("spheres.wgsl");
const COLOR_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8UnormSrgb;
const DEPTH_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Depth32Float;
const SAMPLES: u32 = 4;

/// How particles are coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColourMode {
    /// Free particles sand-coloured, each body its own colour.
    #[default]
    ByBody,
    /// Blue at rest to red at `speed_scale` m/s.
    BySpeed,
}

#[derive(Debug, Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct CameraUniform {
    view: [[f32; 4]; 4],
    proj: [[f32; 4]; 4],
    mode: [f32; 4],
    light: [f32; 4],
    /// The domain's lower corner (xyz), m.
    box_lo: [f32; 4],
    /// The period along each axis (xyz; 0: not periodic), m: particles are
    /// drawn wrapped into the box along periodic axes.
    box_period: [f32; 4],
}

#[derive(Debug, Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct PlaneVertex {
    position: [f32; 3],
    normal: [f32; 3],
    colour: [f32; 3],
}

/// Quads for the floor (the domain's lower y face) and every extra wall,
/// spanning the domain.
fn plane_vertices(setup: &SimSetup, min: [f32; 3], max: [f32; 3]) -> Vec<PlaneVertex> {
    let mut out = Vec::new();
    let quad = |out: &mut Vec<PlaneVertex>, c: [[f32; 3]; 4], n: [f32; 3], colour: [f32; 3]| {
        for k in [0, 1, 2, 0, 2, 3] {
            out.push(PlaneVertex {
                position: c[k],
                normal: n,
                colour,
            });
        }
    };
    quad(
        &mut out,
        [
            [min[0], min[1], min[2]],
            [max[0], min[1], min[2]],
            [max[0], min[1], max[2]],
            [min[0], min[1], max[2]],
        ],
        [0.0, 1.0, 0.0],
        [0.55, 0.57, 0.6],
    );
    let centre: [f32; 3] = std::array::from_fn(|k| 0.5 * (min[k] + max[k]));
    let half = 0.5
        * (0..3)
            .map(|k| (max[k] - min[k]).powi(2))
            .sum::<f32>()
            .sqrt();
    // Walls beyond the six domain faces (which come first in `setup.walls`).
    let domain_walls = if setup.walls.len() >= 6 { 6 } else { 0 };
    for w in setup.walls.iter().skip(domain_walls) {
        let n = w.normal;
        let d = n[0] * centre[0] + n[1] * centre[1] + n[2] * centre[2] - w.offset;
        let p: [f32; 3] = std::array::from_fn(|k| centre[k] - d * n[k]);
        let a = if n[0].abs() < 0.9 {
            [1.0, 0.0, 0.0]
        } else {
            [0.0, 0.0, 1.0]
        };
        let t1 = {
            let c = [
                n[1] * a[2] - n[2] * a[1],
                n[2] * a[0] - n[0] * a[2],
                n[0] * a[1] - n[1] * a[0],
            ];
            let l = (c[0] * c[0] + c[1] * c[1] + c[2] * c[2]).sqrt();
            c.map(|x| x / l)
        };
        let t2 = [
            n[1] * t1[2] - n[2] * t1[1],
            n[2] * t1[0] - n[0] * t1[2],
            n[0] * t1[1] - n[1] * t1[0],
        ];
        let at = |s: f32, t: f32| -> [f32; 3] {
            std::array::from_fn(|k| p[k] + half * (s * t1[k] + t * t2[k]))
        };
        quad(
            &mut out,
            [at(-1.0, -1.0), at(1.0, -1.0), at(1.0, 1.0), at(-1.0, 1.0)],
            n,
            [0.5, 0.6, 0.7],
        );
    }
    out
}

/// Renders a [`GpuSim`]'s particles offscreen.
pub struct FrameRenderer {
    gpu: Arc<Gpu>,
    size: (u32, u32),
    camera_buffer: wgpu::Buffer,
    spheres: wgpu::RenderPipeline,
    planes: wgpu::RenderPipeline,
    pipeline_layout: wgpu::PipelineLayout,
    format: wgpu::TextureFormat,
    bind_layout: wgpu::BindGroupLayout,
    bind_group: wgpu::BindGroup,
    /// The simulation's [`GpuSim::generation`] the bind group was made at.
    generation: u64,
    plane_buffer: wgpu::Buffer,
    plane_vertices: u32,
    particles: u32,
    /// Domain lower corner and periods (see [`CameraUniform`]).
    box_lo: [f32; 4],
    box_period: [f32; 4],
    msaa: wgpu::TextureView,
    depth: wgpu::TextureView,
    resolve: wgpu::Texture,
}

/// The renderer's bindings: the camera, and `sim`'s positions, velocities
/// and particle info (their own buffers, or their ranges of an arena).
fn particle_bindings(
    device: &wgpu::Device,
    layout: &wgpu::BindGroupLayout,
    camera: &wgpu::Buffer,
    sim: &GpuSim,
) -> wgpu::BindGroup {
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("render/bindings"),
        layout,
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: camera.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: sim.buffer(SimBuffer::Positions).binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: sim.buffer(SimBuffer::Velocities).binding(),
            },
            wgpu::BindGroupEntry {
                binding: 3,
                resource: sim.buffer(SimBuffer::Info).binding(),
            },
        ],
    })
}

/// The built-in renderer shader (`spheres.wgsl`).
pub const SPHERES_SHADER: &str = SHADER;

/// The sphere-impostor and plane pipelines, compiled from `source`.
fn build_pipelines(
    device: &wgpu::Device,
    pipeline_layout: &wgpu::PipelineLayout,
    format: wgpu::TextureFormat,
    source: &str,
) -> (wgpu::RenderPipeline, wgpu::RenderPipeline) {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("spheres.wgsl"),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    let depth_stencil = wgpu::DepthStencilState {
        format: DEPTH_FORMAT,
        depth_write_enabled: Some(true),
        depth_compare: Some(wgpu::CompareFunction::Less),
        stencil: Default::default(),
        bias: Default::default(),
    };
    let multisample = wgpu::MultisampleState {
        count: SAMPLES,
        ..Default::default()
    };
    let target = [Some(wgpu::ColorTargetState {
        format,
        blend: None,
        write_mask: wgpu::ColorWrites::ALL,
    })];
    let spheres = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some("render/spheres"),
        layout: Some(pipeline_layout),
        vertex: wgpu::VertexState {
            module: &module,
            entry_point: Some("vs_main"),
            compilation_options: Default::default(),
            buffers: &[],
        },
        fragment: Some(wgpu::FragmentState {
            module: &module,
            entry_point: Some("fs_main"),
            compilation_options: Default::default(),
            targets: &target,
        }),
        primitive: wgpu::PrimitiveState::default(),
        depth_stencil: Some(depth_stencil.clone()),
        multisample,
        multiview_mask: None,
        cache: None,
    });
    let plane_attributes = wgpu::vertex_attr_array![0 => Float32x3, 1 => Float32x3, 2 => Float32x3];
    let planes = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some("render/planes"),
        layout: Some(pipeline_layout),
        vertex: wgpu::VertexState {
            module: &module,
            entry_point: Some("vs_plane"),
            compilation_options: Default::default(),
            buffers: &[Some(wgpu::VertexBufferLayout {
                array_stride: size_of::<PlaneVertex>() as u64,
                step_mode: wgpu::VertexStepMode::Vertex,
                attributes: &plane_attributes,
            })],
        },
        fragment: Some(wgpu::FragmentState {
            module: &module,
            entry_point: Some("fs_plane"),
            compilation_options: Default::default(),
            targets: &target,
        }),
        primitive: wgpu::PrimitiveState::default(),
        depth_stencil: Some(depth_stencil),
        multisample,
        multiview_mask: None,
        cache: None,
    });
    (spheres, planes)
}

impl std::fmt::Debug for FrameRenderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameRenderer")
            .field("size", &self.size)
            .field("particles", &self.particles)
            .finish()
    }
}

impl FrameRenderer {
    /// A renderer of `width` x `height` pixels for `sim` (set up from `setup`).
    pub fn new(sim: &GpuSim, setup: &SimSetup, width: u32, height: u32) -> Result<Self, SimError> {
        Self::with_format(sim, setup, width, height, COLOR_FORMAT)
    }

    /// A renderer whose colour target has `format` (a window surface's).
    pub fn with_format(
        sim: &GpuSim,
        setup: &SimSetup,
        width: u32,
        height: u32,
        format: wgpu::TextureFormat,
    ) -> Result<Self, SimError> {
        let gpu = sim.gpu_arc();
        let device = &gpu.device;
        let max = device.limits().max_texture_dimension_2d;
        if width == 0 || height == 0 || width > max || height > max {
            return Err(SimError::BadValue {
                field: format!("frame size {width}x{height}: the side"),
                value: f64::from(if width == 0 || height == 0 {
                    0
                } else {
                    width.max(height)
                }),
                expected: format!("each side must be between 1 and {max}"),
            });
        }
        let camera_buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("render/camera"),
            size: size_of::<CameraUniform>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let storage = |binding: u32| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::VERTEX,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: true },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("render/layout"),
            entries: &[
                wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::VERTEX_FRAGMENT,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                },
                storage(1),
                storage(2),
                storage(3),
            ],
        });
        let bind_group = particle_bindings(device, &layout, &camera_buffer, sim);
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("render/pipeline-layout"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let (spheres, planes) = build_pipelines(device, &pipeline_layout, format, SHADER);
        let min = setup.grid.origin;
        let max: [f32; 3] =
            std::array::from_fn(|k| min[k] + setup.grid.dims[k] as f32 * setup.grid.cell_size);
        let vertices = plane_vertices(setup, min, max);
        let plane_buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("render/planes"),
            contents: bytemuck::cast_slice(&vertices),
            usage: wgpu::BufferUsages::VERTEX,
        });
        let texture = |label: &str, format, samples, usage| {
            device.create_texture(&wgpu::TextureDescriptor {
                label: Some(label),
                size: wgpu::Extent3d {
                    width,
                    height,
                    depth_or_array_layers: 1,
                },
                mip_level_count: 1,
                sample_count: samples,
                dimension: wgpu::TextureDimension::D2,
                format,
                usage,
                view_formats: &[],
            })
        };
        let msaa = texture(
            "render/msaa",
            format,
            SAMPLES,
            wgpu::TextureUsages::RENDER_ATTACHMENT,
        )
        .create_view(&Default::default());
        let depth = texture(
            "render/depth",
            DEPTH_FORMAT,
            SAMPLES,
            wgpu::TextureUsages::RENDER_ATTACHMENT,
        )
        .create_view(&Default::default());
        let resolve = texture(
            "render/resolve",
            format,
            1,
            wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        );
        Ok(Self {
            gpu: gpu.clone(),
            size: (width, height),
            camera_buffer,
            spheres,
            planes,
            pipeline_layout,
            format,
            bind_group,
            generation: sim.generation(),
            bind_layout: layout,
            plane_buffer,
            plane_vertices: vertices.len() as u32,
            particles: setup.particles.len() as u32,
            box_lo: [
                setup.domain_min[0],
                setup.domain_min[1],
                setup.domain_min[2],
                0.0,
            ],
            box_period: std::array::from_fn(|a| {
                if a < 3 && setup.periodic & (1 << a) != 0 {
                    setup.domain_max[a] - setup.domain_min[a]
                } else {
                    0.0
                }
            }),
            msaa,
            depth,
            resolve,
        })
    }

    /// Shader hot reload: compiles `source` in place of `spheres.wgsl`. The
    /// source is validated with naga, then the pipelines are built inside a
    /// wgpu validation error scope; on any error the old pipelines stay and
    /// the error (naga's report, with the line) is returned.
    pub fn reload_shader(&mut self, source: &str) -> Result<(), SimError> {
        pellet_sim::gpu::validate_wgsl("spheres.wgsl", source)?;
        let device = &self.gpu.device;
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let (spheres, planes) = build_pipelines(device, &self.pipeline_layout, self.format, source);
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(SimError::Gpu(GpuError::Shader {
                name: "spheres.wgsl".into(),
                report: e.to_string(),
            }));
        }
        self.spheres = spheres;
        self.planes = planes;
        Ok(())
    }

    /// Follows `sim`'s arrays when they have moved (the packed binding
    /// layout repacks them when the pair list grows). Call before drawing.
    pub fn follow(&mut self, sim: &GpuSim) {
        if sim.generation() != self.generation {
            self.bind_group = particle_bindings(
                &self.gpu.device,
                &self.bind_layout,
                &self.camera_buffer,
                sim,
            );
            self.generation = sim.generation();
        }
    }

    /// Frame size in pixels.
    pub fn size(&self) -> (u32, u32) {
        self.size
    }

    /// Records the scene seen by `camera` into `enc`, resolved into `target`
    /// (this renderer's own texture when `None`).
    pub fn encode(
        &self,
        enc: &mut wgpu::CommandEncoder,
        target: Option<&wgpu::TextureView>,
        camera: &Camera,
        mode: ColourMode,
        speed_scale: f32,
    ) {
        let (width, height) = self.size;
        let view = camera.view();
        let l = [0.4f32, 0.9, 0.5];
        let uniform = CameraUniform {
            view,
            proj: camera.projection(width as f32 / height as f32),
            mode: [
                if mode == ColourMode::BySpeed {
                    1.0
                } else {
                    0.0
                },
                speed_scale,
                self.particles as f32,
                0.0,
            ],
            // The light in view space.
            light: [
                view[0][0] * l[0] + view[1][0] * l[1] + view[2][0] * l[2],
                view[0][1] * l[0] + view[1][1] * l[1] + view[2][1] * l[2],
                view[0][2] * l[0] + view[1][2] * l[1] + view[2][2] * l[2],
                0.0,
            ],
            box_lo: self.box_lo,
            box_period: self.box_period,
        };
        self.gpu
            .queue
            .write_buffer(&self.camera_buffer, 0, bytemuck::bytes_of(&uniform));
        let own = self.resolve.create_view(&Default::default());
        let resolve_view = target.unwrap_or(&own);
        let mut pass = enc.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("render/pass"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: &self.msaa,
                depth_slice: None,
                resolve_target: Some(resolve_view),
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(wgpu::Color {
                        r: 0.92,
                        g: 0.94,
                        b: 0.97,
                        a: 1.0,
                    }),
                    store: wgpu::StoreOp::Discard,
                },
            })],
            depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
                view: &self.depth,
                depth_ops: Some(wgpu::Operations {
                    load: wgpu::LoadOp::Clear(1.0),
                    store: wgpu::StoreOp::Discard,
                }),
                stencil_ops: None,
            }),
            timestamp_writes: None,
            occlusion_query_set: None,
            multiview_mask: None,
        });
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.set_pipeline(&self.planes);
        pass.set_vertex_buffer(0, self.plane_buffer.slice(..));
        pass.draw(0..self.plane_vertices, 0..1);
        pass.set_pipeline(&self.spheres);
        pass.draw(0..6, 0..self.particles);
    }

    /// Draws the current state seen by `camera` and reads it back.
    pub fn render(
        &self,
        camera: &Camera,
        mode: ColourMode,
        speed_scale: f32,
    ) -> Result<image::RgbaImage, SimError> {
        let (width, height) = self.size;
        let device = &self.gpu.device;
        let queue = &self.gpu.queue;
        let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("render/frame"),
        });
        self.encode(&mut enc, None, camera, mode, speed_scale);
        let row = (width * 4).div_ceil(256) * 256;
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("render/readback"),
            size: u64::from(row) * u64::from(height),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        enc.copy_texture_to_buffer(
            wgpu::TexelCopyTextureInfo {
                texture: &self.resolve,
                mip_level: 0,
                origin: wgpu::Origin3d::ZERO,
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::TexelCopyBufferInfo {
                buffer: &staging,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(row),
                    rows_per_image: Some(height),
                },
            },
            wgpu::Extent3d {
                width,
                height,
                depth_or_array_layers: 1,
            },
        );
        queue.submit([enc.finish()]);
        let slice = staging.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        let fail = |e: String| SimError::Gpu(GpuError::Readback(e));
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| fail(e.to_string()))?;
        rx.recv()
            .map_err(|e| fail(e.to_string()))?
            .map_err(|e| fail(e.to_string()))?;
        let data = slice.get_mapped_range().map_err(|e| fail(e.to_string()))?;
        let mut pixels = Vec::with_capacity((width * height * 4) as usize);
        for y in 0..height as usize {
            let start = y * row as usize;
            pixels.extend_from_slice(&data[start..start + width as usize * 4]);
        }
        drop(data);
        staging.unmap();
        image::RgbaImage::from_raw(width, height, pixels)
            .ok_or_else(|| fail("frame size mismatch".into()))
    }
}
