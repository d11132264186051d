//! Copying GPU buffers back to the CPU.

use crate::GpuError;

/// Copies `source` (which needs `COPY_SRC`) into a fresh staging buffer and
/// returns its bytes. Blocks until the GPU is done.
pub fn read_buffer(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    source: &wgpu::Buffer,
) -> Result<Vec<u8>, GpuError> {
    read_buffer_range(device, queue, source, 0, source.size())
}

/// Copies `size` bytes of `source` from byte `offset` (both multiples of 4)
/// into a fresh staging buffer and returns them. Blocks until the GPU is done.
pub fn read_buffer_range(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    source: &wgpu::Buffer,
    offset: u64,
    size: u64,
) -> Result<Vec<u8>, GpuError> {
    if size == 0 {
        return Ok(Vec::new());
    }
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback/staging"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("readback/copy"),
    });
    encoder.copy_buffer_to_buffer(source, offset, &staging, 0, size);
    queue.submit([encoder.finish()]);
    let slice = staging.slice(..);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| GpuError::Readback(e.to_string()))?;
    rx.recv()
        .map_err(|e| GpuError::Readback(e.to_string()))?
        .map_err(|e| GpuError::Readback(e.to_string()))?;
    let bytes = slice
        .get_mapped_range()
        .map_err(|e| GpuError::Readback(e.to_string()))?
        .to_vec();
    staging.unmap();
    Ok(bytes)
}

/// A readback in flight that nothing waits for: the browser's way (a page
/// cannot block on the GPU), usable natively too. [`PendingRead::start`]
/// copies ranges of buffers into one staging buffer and asks to map it;
/// [`PendingRead::try_take`] returns their bytes once the map is done.
#[derive(Debug)]
pub struct PendingRead {
    staging: wgpu::Buffer,
    mapped: std::sync::Arc<std::sync::Mutex<Option<Result<(), String>>>>,
}

impl PendingRead {
    /// Copies each `(buffer, offset, size)` (multiples of 4, each buffer
    /// with `COPY_SRC`) one after another into a staging buffer, submits,
    /// and asks for it mapped.
    pub fn start(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        ranges: &[(&wgpu::Buffer, u64, u64)],
    ) -> Self {
        let total: u64 = ranges.iter().map(|r| r.2).sum::<u64>().max(4);
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback/pending"),
            size: total,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("readback/pending"),
        });
        let mut at = 0;
        for &(source, offset, size) in ranges {
            encoder.copy_buffer_to_buffer(source, offset, &staging, at, size);
            at += size;
        }
        queue.submit([encoder.finish()]);
        let mapped = std::sync::Arc::new(std::sync::Mutex::new(None));
        let done = mapped.clone();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            if let Ok(mut d) = done.lock() {
                *d = Some(r.map_err(|e| e.to_string()));
            }
        });
        Self { staging, mapped }
    }

    /// The bytes once the map has finished, `None` before. Natively the
    /// device is polled (without waiting) first; in the browser the page's
    /// event loop finishes the map.
    pub fn try_take(&self, device: &wgpu::Device) -> Option<Result<Vec<u8>, GpuError>> {
        let _ = device.poll(wgpu::PollType::Poll);
        let result = self.mapped.lock().ok()?.take()?;
        Some(result.map_err(GpuError::Readback).and_then(|()| {
            let bytes = self
                .staging
                .slice(..)
                .get_mapped_range()
                .map_err(|e| GpuError::Readback(e.to_string()))?
                .to_vec();
            self.staging.unmap();
            Ok(bytes)
        }))
    }
}
