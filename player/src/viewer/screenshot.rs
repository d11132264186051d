//! `--screenshot`: the window's last frame read back and saved as PNG.

use super::*;

impl WindowState {
    pub(super) fn copy_out(
        &self,
        enc: &mut wgpu::CommandEncoder,
        texture: &wgpu::Texture,
    ) -> (wgpu::Buffer, u32) {
        let (w, h) = (self.config.width, self.config.height);
        let row = (w * 4).div_ceil(256) * 256;
        let buffer = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("viewer/screenshot"),
            size: u64::from(row) * u64::from(h),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if self.config.usage.contains(wgpu::TextureUsages::COPY_SRC) {
            enc.copy_texture_to_buffer(
                texture.as_image_copy(),
                wgpu::TexelCopyBufferInfo {
                    buffer: &buffer,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some(row),
                        rows_per_image: Some(h),
                    },
                },
                wgpu::Extent3d {
                    width: w,
                    height: h,
                    depth_or_array_layers: 1,
                },
            );
        }
        (buffer, row)
    }

    pub(super) fn save_screenshot(
        &self,
        buffer: &wgpu::Buffer,
        row: u32,
        path: &Path,
    ) -> Result<(), PlayerError> {
        let fail = |e: &dyn std::fmt::Display| PlayerError::Screenshot {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        if !self.config.usage.contains(wgpu::TextureUsages::COPY_SRC) {
            return Err(PlayerError::Screenshot {
                path: path.to_path_buf(),
                message: "this window surface cannot be read back".into(),
            });
        }
        let slice = buffer.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.gpu
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| fail(&e))?;
        rx.recv().map_err(|e| fail(&e))?.map_err(|e| fail(&e))?;
        let data = slice.get_mapped_range().map_err(|e| fail(&e))?;
        let (w, h) = (self.config.width, self.config.height);
        let bgra = matches!(
            self.config.format,
            wgpu::TextureFormat::Bgra8Unorm | wgpu::TextureFormat::Bgra8UnormSrgb
        );
        let mut pixels = Vec::with_capacity((w * h * 4) as usize);
        for y in 0..h as usize {
            for px in data[y * row as usize..y * row as usize + w as usize * 4].chunks_exact(4) {
                if bgra {
                    pixels.extend_from_slice(&[px[2], px[1], px[0], 255]);
                } else {
                    pixels.extend_from_slice(&[px[0], px[1], px[2], 255]);
                }
            }
        }
        drop(data);
        buffer.unmap();
        let img = image::RgbaImage::from_raw(w, h, pixels).ok_or_else(|| fail(&"size"))?;
        img.save(path).map_err(|e| fail(&e))
    }
}
