//! One tile of depth peeling: the columns of one tile along one axis,
//! peeled layer by layer on the GPU, with the parity and vote passes.

use pellet_gpu::wgpu::util::DeviceExt;
use pellet_gpu::{GpuError, readback::read_buffer, wgpu};

use super::*;

impl GpuVoxelizer {
    #[allow(clippy::too_many_lines)]
    pub(super) fn peel_tile(
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
}

/// One tile of columns along one axis.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tile {
    pub(super) axis: usize,
    pub(super) u0: u32,
    pub(super) v0: u32,
    pub(super) w: u32,
    pub(super) h: u32,
    pub(super) columns_u: u32,
    pub(super) depth: u32,
}
