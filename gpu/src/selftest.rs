//! A tiny compute kernel with a CPU twin, run by `player gpu` and the GPU
//! tests to prove the adapter really computes (not merely enumerates).

use serde::Serialize;
use wgpu::util::DeviceExt;

use crate::Gpu;
use crate::GpuError;
use crate::readback::read_buffer;

/// The WGSL source, validated offline by the shader tests.
pub const SHADER: &str = include_str!("selftest.wgsl");
const WORKGROUP: u32 = 64;

/// CPU twin of the shader's `pcg_hash` (keep in sync with selftest.wgsl).
pub fn hash_cpu(v: u32) -> u32 {
    let state = v.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let word = ((state >> ((state >> 28) + 4)) ^ state).wrapping_mul(277_803_737);
    (word >> 22) ^ word
}

/// The outcome of a self-test.
#[derive(Debug, Clone, Serialize)]
pub struct SelfTestReport {
    /// Elements computed.
    pub elements: usize,
    /// Elements whose GPU result differs from the CPU twin.
    pub mismatches: usize,
}

impl SelfTestReport {
    /// Whether GPU and CPU agree everywhere.
    pub fn passed(&self) -> bool {
        self.mismatches == 0
    }
}

/// Hashes `len` elements on the GPU and compares with [`hash_cpu`].
pub fn run(gpu: &Gpu, len: u32, seed: u32) -> Result<SelfTestReport, GpuError> {
    let device = &gpu.device;
    let input: Vec<u32> = (0..len).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let params = [len, seed, 0, 0];
    let params_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("selftest/params"),
        contents: bytemuck::cast_slice(&params),
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let input_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("selftest/input"),
        contents: bytemuck::cast_slice(&input),
        usage: wgpu::BufferUsages::STORAGE,
    });
    let output_buf = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("selftest/output"),
        size: u64::from(len.max(1)) * 4,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("selftest"),
        source: wgpu::ShaderSource::Wgsl(SHADER.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("selftest/hash_fill"),
        layout: None,
        module: &module,
        entry_point: Some("hash_fill"),
        compilation_options: Default::default(),
        cache: None,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("selftest/bind_group"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: params_buf.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: input_buf.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: output_buf.as_entire_binding(),
            },
        ],
    });
    gpu.dispatch(
        "selftest/hash_fill",
        &pipeline,
        &bind_group,
        [len.div_ceil(WORKGROUP).max(1), 1, 1],
    );
    let bytes = read_buffer(device, &gpu.queue, &output_buf)?;
    let output: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
    let mismatches = input
        .iter()
        .zip(&output)
        .filter(|&(&x, &y)| hash_cpu(x ^ seed) != y)
        .count();
    Ok(SelfTestReport {
        elements: len as usize,
        mismatches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_twin_matches_reference_values() {
        // Reference PCG-hash outputs (Jarzynski & Olano 2020).
        assert_eq!(hash_cpu(0), 129_708_002);
        assert_ne!(hash_cpu(1), hash_cpu(2));
    }
}
