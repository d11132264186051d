//! Headless frame time: the impostor renderer drawing 100 k and 1 M spheres
//! at 1280x720 into an offscreen texture and reading the frame back (what
//! `player --headless --frames` does per frame). There is no peer to run on
//! the same work; the H200 target (1 M spheres at 1080p well above
//! 60 fps) needs a real GPU.

use std::sync::Arc;

use pellet_gpu::{BackendChoice, Gpu};
use pellet_player::render::{Camera, ColourMode, FrameRenderer};
use pellet_player::sim::run::load_setup;
use pellet_sim::GridMode;
use pellet_sim::gpu::GpuSim;

use crate::harness::{Row, time};

fn scene_toml(side: u32) -> String {
    let extent = f64::from(side) * 0.021 + 0.02;
    format!(
        "name = \"block{side}\"\n[simulation]\nparticle_radius = 0.01\n[domain]\nmin = [0, 0, 0]\nmax = [{extent}, {extent}, {extent}]\n\
         [[particles]]\nregion = {{ min = [0, 0, 0], max = [{extent}, {extent}, {extent}] }}\nspacing = 0.021\njitter = 0.3\nseed = 1\n"
    )
}

/// Rows for 100 k and 1 M spheres.
pub fn run(samples: usize, quick: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    let Ok(gpu) = Gpu::new(BackendChoice::Auto).map(Arc::new) else {
        eprintln!("bench: render: no GPU adapter");
        return rows;
    };
    let dir = std::env::temp_dir().join(format!("pellet-bench-render-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        return rows;
    }
    let sides: &[u32] = if quick { &[30] } else { &[47, 100] };
    for &side in sides {
        let path = dir.join(format!("block{side}.toml"));
        if std::fs::write(&path, scene_toml(side)).is_err() {
            continue;
        }
        let Ok(setup) = load_setup(&path, GridMode::Auto) else {
            continue;
        };
        let n = setup.particles.len();
        let Ok(sim) = GpuSim::new(gpu.clone(), &setup) else {
            eprintln!("bench: render: {n} particles do not fit the GPU");
            continue;
        };
        let Ok(renderer) = FrameRenderer::new(&sim, &setup, 1280, 720) else {
            continue;
        };
        let min = setup.grid.origin;
        let max: [f32; 3] =
            std::array::from_fn(|k| min[k] + setup.grid.dims[k] as f32 * setup.grid.cell_size);
        let camera = Camera::frame_particles(&setup.particles.pos, min, max);
        eprintln!("bench: render {n} spheres at 1280x720");
        let timing = time(samples.min(5), || {
            renderer
                .render(&camera, ColourMode::ByBody, 2.0)
                .map(|img| img.width())
                .unwrap_or(0)
        });
        let fps = 1.0 / timing.median_s;
        rows.push(Row {
            group: "rendering",
            name: format!("headless frame, {n} spheres"),
            workload: "1280x720, 4x MSAA, ray-cast impostors, frame read back to the CPU".into(),
            pellet: timing,
            peer: "none (no peer renders this work)".into(),
            peer_timing: None,
            notes: format!(
                "{fps:.1} frames/s on {} (software rasterizer); H200 target not measurable here",
                gpu.report.name
            ),
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
    rows
}
