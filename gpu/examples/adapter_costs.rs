//! What a compute dispatch and a per-invocation record read cost on this
//! machine's adapter (docs/simulation.md, "the bound" of the GPU path):
//!
//! ```text
//! cargo run --release -p pellet-gpu --example adapter_costs
//! ```
//!
//! - dispatch overhead: 200 dispatches of a one-thread kernel in one pass
//!   (direct with one workgroup, indirect with none and with one);
//! - reads: 236 k invocations (the pair list of a 43^3 pack) doing nothing;
//!   each reading its two indices and writing one `vec4`; then also six
//!   `vec4` records of its two particles from storage buffers, or from
//!   `rgba32float` textures.
//!
//! Each figure is the median of five submissions.

use std::error::Error;
use std::time::Instant;

use pellet_gpu::wgpu::{self, util::DeviceExt};
use pellet_gpu::{BackendChoice, Gpu};

const READS: &str = r#"
@group(0) @binding(0) var<storage, read> pair_i: array<u32>;
@group(0) @binding(1) var<storage, read> pair_j: array<u32>;
@group(0) @binding(2) var<storage, read> pos: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> vel: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> spin: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(6) var tpos: texture_2d<f32>;
@group(0) @binding(7) var tvel: texture_2d<f32>;
@group(0) @binding(8) var tspin: texture_2d<f32>;
const W: u32 = 1024u;
fn at(i: u32) -> vec2<u32> { return vec2<u32>(i % W, i / W); }
@compute @workgroup_size(256)
fn empty(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x == 0xffffffffu) { out[0] = vec4<f32>(0.0); }
}
@compute @workgroup_size(256)
fn indices_only(@builtin(global_invocation_id) g: vec3<u32>) {
    let p = g.x;
    if (p >= arrayLength(&out)) { return; }
    out[p] = vec4<f32>(f32(pair_i[p]), f32(pair_j[p]), 0.0, 0.0);
}
@compute @workgroup_size(256)
fn buffers(@builtin(global_invocation_id) g: vec3<u32>) {
    let p = g.x;
    if (p >= arrayLength(&out)) { return; }
    let i = pair_i[p];
    let j = pair_j[p];
    out[p] = (pos[i] - pos[j]) * (vel[i] - vel[j]) + spin[i] + spin[j];
}
@compute @workgroup_size(256)
fn textures(@builtin(global_invocation_id) g: vec3<u32>) {
    let p = g.x;
    if (p >= arrayLength(&out)) { return; }
    let i = pair_i[p];
    let j = pair_j[p];
    let d = textureLoad(tpos, at(i), 0) - textureLoad(tpos, at(j), 0);
    let v = textureLoad(tvel, at(i), 0) - textureLoad(tvel, at(j), 0);
    out[p] = d * v + textureLoad(tspin, at(i), 0) + textureLoad(tspin, at(j), 0);
}
@compute @workgroup_size(1)
fn one_thread() {
    out[0] = out[0] + vec4<f32>(1.0);
}
"#;

/// Median of five timings of `record`'s commands, divided by `per`.
fn median_us(
    gpu: &Gpu,
    per: u32,
    record: &dyn Fn(&mut wgpu::ComputePass<'_>),
) -> Result<f64, Box<dyn Error>> {
    let mut times = Vec::new();
    for _ in 0..5 {
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        record(&mut enc.begin_compute_pass(&Default::default()));
        let start = Instant::now();
        gpu.queue.submit([enc.finish()]);
        gpu.device.poll(wgpu::PollType::wait_indefinitely())?;
        times.push(start.elapsed().as_secs_f64() * 1e6 / f64::from(per));
    }
    times.sort_by(f64::total_cmp);
    Ok(times[2])
}

fn main() -> Result<(), Box<dyn Error>> {
    let gpu = Gpu::new(BackendChoice::Auto)?;
    println!("adapter: {}", gpu.report.one_line());
    let d = &gpu.device;
    // A 43^3 simple-cubic pack's face neighbours, each pair once.
    let side = 43u32;
    let n = side * side * side;
    let (mut pi, mut pj) = (Vec::new(), Vec::new());
    for i in 0..n {
        for s in [1, side, side * side] {
            if i + s < n {
                pi.push(i);
                pj.push(i + s);
            }
        }
    }
    let pairs = u32::try_from(pi.len())?;
    let (w, h) = (1024u32, n.div_ceil(1024));
    let records: Vec<f32> = (0..w * h * 4).map(|k| k as f32 * 1e-3).collect();
    let storage = |bytes: &[u8]| {
        d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytes,
            usage: wgpu::BufferUsages::STORAGE,
        })
    };
    let texture = || {
        let size = wgpu::Extent3d {
            width: w,
            height: h,
            depth_or_array_layers: 1,
        };
        let t = d.create_texture(&wgpu::TextureDescriptor {
            label: None,
            size,
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba32Float,
            usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        });
        gpu.queue.write_texture(
            t.as_image_copy(),
            bytemuck::cast_slice(&records),
            wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(w * 16),
                rows_per_image: Some(h),
            },
            size,
        );
        t.create_view(&Default::default())
    };
    let buffers = [
        storage(bytemuck::cast_slice(&pi)),
        storage(bytemuck::cast_slice(&pj)),
        storage(bytemuck::cast_slice(&records)),
        storage(bytemuck::cast_slice(&records)),
        storage(bytemuck::cast_slice(&records)),
        d.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: u64::from(pairs) * 16,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        }),
    ];
    let views = [texture(), texture(), texture()];
    let indirect = d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: None,
        contents: bytemuck::cast_slice(&[0u32, 1, 1, 1, 1, 1]),
        usage: wgpu::BufferUsages::INDIRECT,
    });
    let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("adapter costs"),
        source: wgpu::ShaderSource::Wgsl(READS.into()),
    });
    let kernel = |entry: &str, bindings: &[u32]| {
        let pipeline = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: None,
            module: &module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        });
        let entries: Vec<wgpu::BindGroupEntry<'_>> = bindings
            .iter()
            .map(|&b| wgpu::BindGroupEntry {
                binding: b,
                resource: match b {
                    0..=5 => buffers[b as usize].as_entire_binding(),
                    _ => wgpu::BindingResource::TextureView(&views[b as usize - 6]),
                },
            })
            .collect();
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(entry),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        (pipeline, group)
    };
    let (one, one_group) = kernel("one_thread", &[5]);
    let calls = 200;
    let overhead = |how: u32| {
        median_us(&gpu, calls, &|pass| {
            pass.set_pipeline(&one);
            pass.set_bind_group(0, &one_group, &[]);
            for _ in 0..calls {
                match how {
                    0 => pass.dispatch_workgroups(1, 1, 1),
                    1 => pass.dispatch_workgroups_indirect(&indirect, 0),
                    _ => pass.dispatch_workgroups_indirect(&indirect, 12),
                }
            }
        })
    };
    println!("dispatch, direct, 1 workgroup:    {:7.1} us", overhead(0)?);
    println!("dispatch, indirect, 0 workgroups: {:7.1} us", overhead(1)?);
    println!("dispatch, indirect, 1 workgroup:  {:7.1} us", overhead(2)?);
    let reps = 20;
    let mut per_pair = Vec::new();
    for (entry, bindings) in [
        ("empty", &[5][..]),
        ("indices_only", &[0, 1, 5][..]),
        ("buffers", &[0, 1, 2, 3, 4, 5][..]),
        ("textures", &[0, 1, 5, 6, 7, 8][..]),
    ] {
        let (pipeline, group) = kernel(entry, bindings);
        let us = median_us(&gpu, reps, &|pass| {
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            for _ in 0..reps {
                pass.dispatch_workgroups(pairs.div_ceil(256), 1, 1);
            }
        })?;
        let ns = us * 1e3 / f64::from(pairs);
        println!(
            "{pairs} invocations, {entry:12}: {us:8.0} us per dispatch, {ns:5.2} ns per invocation"
        );
        per_pair.push(ns);
    }
    println!(
        "per vec4 record read: {:.2} ns from storage buffers, {:.2} ns from textures",
        (per_pair[2] - per_pair[1]) / 6.0,
        (per_pair[3] - per_pair[1]) / 6.0
    );
    Ok(())
}
