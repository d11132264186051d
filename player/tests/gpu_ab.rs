//! A/B of GPU-path shader variants in one process (ignored; run by hand):
//! the built-in kernels (variant 0) against each `PELLET_AB` entry, a
//! comma-separated list of `file=path` replacements joined by `+` (say
//! `pairs.wgsl=/tmp/variant.wgsl`); `AB_RECORDED=1` adds the built-in
//! kernels with the rebuild's dispatches recorded in every step. The
//! simulations alternate batches of 10 steps for `ROUNDS` rounds (8), so a
//! slow spell of the machine falls on all of them; it prints each one's
//! median ms per step, the median of its per-round speedups, and whether
//! its state and counters equal variant 0's to the bit.
//!
//! `PELLET_TIMING_SCENE=/tmp/pack43.toml PELLET_AB=pairs.wgsl=/tmp/v.wgsl
//! cargo test --release -p pellet-player --test gpu_ab -- --ignored --nocapture`
//!
//! The driver is the Vulkan loader's choice: `eval "$(bash
//! scripts/lavapipe-backports.sh)"` first runs it on Mesa 25's lavapipe
//! instead of the system's (docs/simulation.md compares the two).
#![allow(clippy::unwrap_used)]
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::sim::GridMode;
use pellet_player::sim::gpu::GpuSim;
use pellet_player::sim::run::load_setup;
use pellet_player::sim::stages::SimShaders;

#[test]
#[ignore = "timings by hand; no timing assertions, not a CI test"]
fn gpu_ab() {
    let path = std::env::var("PELLET_TIMING_SCENE").unwrap();
    let setup = load_setup(Path::new(&path), GridMode::Auto).unwrap();
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto).unwrap());
    let mut sims = vec![GpuSim::new(gpu.clone(), &setup).unwrap()];
    if std::env::var("AB_RECORDED").is_ok() {
        let mut r = GpuSim::new(gpu.clone(), &setup).unwrap();
        r.set_rebuild_on_demand(false);
        sims.push(r);
    }
    for var in std::env::var("PELLET_AB")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
    {
        let mut shaders = SimShaders::builtin();
        for pair in var.split('+') {
            let (file, src) = pair.split_once('=').unwrap();
            assert!(shaders.set(file, std::fs::read_to_string(src).unwrap()));
        }
        sims.push(GpuSim::with_shaders(gpu.clone(), &setup, &shaders).unwrap());
    }
    for s in sims.iter_mut() {
        s.advance(20).unwrap();
        s.wait().unwrap();
    }
    let steps = 10;
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(8);
    let mut times = vec![Vec::new(); sims.len()];
    for _ in 0..rounds {
        for (k, s) in sims.iter_mut().enumerate() {
            let t = Instant::now();
            s.advance(steps).unwrap();
            s.wait().unwrap();
            times[k].push(t.elapsed().as_secs_f64() * 1e3 / f64::from(steps));
        }
    }
    let base = sims[0].download().unwrap();
    let c0 = sims[0].counters().unwrap();
    for (k, s) in sims.iter().enumerate().skip(1) {
        let st = s.download().unwrap();
        let same = |a: &Vec<[f32; 4]>, b: &Vec<[f32; 4]>| {
            a.iter()
                .flatten()
                .map(|x| x.to_bits())
                .eq(b.iter().flatten().map(|x| x.to_bits()))
        };
        println!(
            "variant {k}: bits pos {} vel {} angvel {} force {} torque {}; counters {:?} vs {:?}",
            same(&st.pos, &base.pos),
            same(&st.vel, &base.vel),
            same(&st.angvel, &base.angvel),
            same(&st.force, &base.force),
            same(&st.torque, &base.torque),
            s.counters().unwrap(),
            c0
        );
    }
    let med = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (k, t) in times.iter().enumerate() {
        let ratios: Vec<f64> = t.iter().zip(&times[0]).map(|(b, a)| a / b).collect();
        println!(
            "variant {k}: {:.3} ms/step median, speedup vs 0 {:.3}",
            med(t),
            med(&ratios)
        );
    }
}
