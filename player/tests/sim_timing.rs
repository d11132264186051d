//! Stage timings of the GPU path (ignored; run by hand:
//! `cargo test --release -p pellet-player --test sim_timing -- --ignored --nocapture`).
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::sim::gpu::GpuSim;
use pellet_player::sim::run::load_setup;
use pellet_player::sim::{ForceKind, GridMode};

#[test]
#[ignore = "prints GPU stage timings by hand; no assertions, not a CI test"]
fn gpu_stage_timings() {
    let path = std::env::var("PELLET_TIMING_SCENE")
        .unwrap_or_else(|_| "../assets/scenes/ballpit.toml".into());
    let setup = load_setup(Path::new(&path), GridMode::Auto).unwrap();
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto).unwrap());
    let mut sim = GpuSim::sorting(gpu.clone(), &setup).unwrap();
    sim.prime().unwrap();
    sim.wait().unwrap();
    let reps = 10;
    let time = |sim: &mut GpuSim, name: &str, f: &dyn Fn(&mut GpuSim)| {
        let t = Instant::now();
        for _ in 0..reps {
            f(sim);
        }
        sim.wait().unwrap();
        println!(
            "{name:>14}: {:8.3} ms",
            t.elapsed().as_secs_f64() * 1e3 / reps as f64
        );
    };
    time(&mut sim, "sort", &|s| s.stage_sort(false));
    time(&mut sim, "forces", &|s| s.stage_forces(ForceKind::Commit));
    time(&mut sim, "verlet_end", &|s| s.stage_integrate("verlet_end"));
    time(&mut sim, "whole step", &|s| s.advance(1).unwrap());
    let mut sim = GpuSim::new(gpu, &setup).unwrap();
    sim.prime().unwrap();
    time(&mut sim, "pair_forces", &|s| {
        s.stage_list_kernel("pair_forces", ForceKind::Commit)
    });
    time(&mut sim, "particle_forces", &|s| {
        s.stage_list_kernel("particle_forces", ForceKind::Commit)
    });
    time(&mut sim, "verlet_begin", &|s| {
        s.stage_integrate("verlet_begin")
    });
    time(&mut sim, "evaluation", &|s| {
        s.stage_evaluation(ForceKind::Commit, false).unwrap()
    });
    time(&mut sim, "pair-list step", &|s| s.advance(1).unwrap());
    time(&mut sim, "10 steps", &|s| s.advance(10).unwrap());
}
