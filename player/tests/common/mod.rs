//! Scenes built in a temporary folder from explicit particles.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;

use pellet_formats::assets::SimState;
use pellet_formats::io::write_asset;
use pellet_formats::scene::Rng;
use pellet_player::sim::{GridMode, SimOptions, SimSetup};

/// One particle: position, velocity, radius.
pub type P = ([f32; 3], [f32; 3], f32);

/// Writes `particles` as a sim-state file next to a scene whose remaining
/// sections are `toml` (which must not have `[[particles]]`), and sets it up.
pub fn setup(dir: &Path, toml: &str, particles: &[P], grid: GridMode) -> SimSetup {
    let n = particles.len();
    let state = SimState {
        time: 0.0,
        step: 0,
        positions: particles.iter().map(|p| p.0).collect::<Vec<_>>().into(),
        velocities: particles.iter().map(|p| p.1).collect::<Vec<_>>().into(),
        angular_velocities: vec![[0.0f32; 3]; n].into(),
        radii: particles.iter().map(|p| p.2).collect::<Vec<_>>().into(),
        body_of_particle: vec![u32::MAX; n].into(),
        bodies: Vec::new().into(),
        ..Default::default()
    };
    write_asset(&dir.join("particles.pellet"), &state).unwrap();
    let text = format!("{toml}\n[[particles]]\nfile = \"particles.pellet\"\n");
    let path = dir.join("scene.toml");
    std::fs::write(&path, &text).unwrap();
    let scene = pellet_formats::Scene::load(&path).unwrap();
    SimSetup::from_scene(&scene, dir, SimOptions { grid }).unwrap()
}

/// `n` particles of radius `r` at random non-overlapping-ish places in the
/// box `[lo, hi]^3` with random velocities of up to `speed`.
pub fn random_particles(n: usize, r: f32, lo: f32, hi: f32, speed: f32, seed: u64) -> Vec<P> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let p = [
                rng.range(lo + r, hi - r),
                rng.range(lo + r, hi - r),
                rng.range(lo + r, hi - r),
            ];
            let v = [
                rng.range(-speed, speed),
                rng.range(-speed, speed),
                rng.range(-speed, speed),
            ];
            (p, v, r)
        })
        .collect()
}

/// A box domain `[lo, hi]^3` (walls on or off) with gravity `g` along y,
/// `[simulation]` extras and the default material's fields.
pub fn box_scene(lo: f32, hi: f32, g: f32, material: &str, sim_extra: &str, walls: bool) -> String {
    format!(
        "[simulation]\ngravity = [0, {g}, 0]\n{sim_extra}\n[domain]\nmin = [{lo}, {lo}, {lo}]\nmax = [{hi}, {hi}, {hi}]\nwalls = {walls}\n[materials.default]\n{material}\n"
    )
}

/// A simple-cubic lattice of `k^3` particles of radius `r` at spacing `s`
/// starting at `origin`, jittered by up to `jitter` and with random
/// velocities of up to `speed`.
pub fn lattice(
    k: usize,
    r: f32,
    s: f32,
    origin: f32,
    jitter: f32,
    speed: f32,
    seed: u64,
) -> Vec<P> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for z in 0..k {
        for y in 0..k {
            for x in 0..k {
                let c = [x, y, z].map(|i| origin + i as f32 * s);
                let p = c.map(|v| v + rng.range(-jitter, jitter));
                let v = [0; 3].map(|_| rng.range(-speed, speed));
                out.push((p, v, r));
            }
        }
    }
    out
}
