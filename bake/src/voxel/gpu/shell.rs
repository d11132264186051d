//! The shell voxelization on the GPU: every voxel a triangle touches.

use pellet_gpu::wgpu::util::DeviceExt;
use pellet_gpu::{GpuError, dispatch_2d, readback::read_buffer, wgpu};

use super::*;

impl GpuVoxelizer {
    pub(super) fn shell_inner(
        &self,
        mesh: &TriMesh,
        spec: &GridSpec,
    ) -> Result<VoxelGrid, GpuError> {
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
