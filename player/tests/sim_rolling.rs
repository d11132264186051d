//! Rolling resistance (`rolling_friction`, `rolling_model = "epsd2"` or
//! `"cdt"`): a sphere rolling on a floor stops where the model says, a
//! sphere on a slope below the critical angle stays, above it rolls away,
//! and without rolling friction nothing changes.
#![allow(clippy::unwrap_used)]

use pellet_formats::assets::SimState;
use pellet_formats::io::write_asset;
use pellet_player::sim::{GridMode, HostState, SimOptions, SimSetup, Simulation};

const R: f32 = 0.01;
const G: f32 = 9.81;

/// One sphere of radius `R` on the floor of a walled box (gravity `g`),
/// moving at `v` and spinning at `w`, with the default material's `material`.
fn one_sphere(
    dir: &std::path::Path,
    material: &str,
    g: [f32; 3],
    v: [f32; 3],
    w: [f32; 3],
) -> SimSetup {
    // Resting on the floor at its equilibrium overlap (kn = 1e4 N/m).
    let m = 2500.0 * 4.0 / 3.0 * std::f32::consts::PI * R * R * R;
    let y = R - m * G / 1.0e4;
    let state = SimState {
        time: 0.0,
        step: 0,
        positions: vec![[0.2f32, y, 0.2]].into(),
        velocities: vec![v].into(),
        angular_velocities: vec![w].into(),
        radii: vec![R].into(),
        body_of_particle: vec![u32::MAX].into(),
        bodies: Vec::new().into(),
        ..Default::default()
    };
    write_asset(&dir.join("particles.pellet"), &state).unwrap();
    let text = format!(
        "[simulation]\ngravity = [{}, {}, {}]\ntime_step = 2e-5\n[domain]\nmin = [0, 0, 0]\nmax = [1, 0.4, 0.4]\n[materials.default]\n{material}\n[[particles]]\nfile = \"particles.pellet\"\n",
        g[0], g[1], g[2]
    );
    std::fs::write(dir.join("scene.toml"), &text).unwrap();
    let scene = pellet_formats::Scene::load(&dir.join("scene.toml")).unwrap();
    SimSetup::from_scene(
        &scene,
        dir,
        SimOptions {
            grid: GridMode::Auto,
        },
    )
    .unwrap()
}

fn state(sim: &Simulation) -> HostState {
    sim.host_state().unwrap()
}

/// A sphere rolling at `v0` on the floor: resisted by the torque
/// `mu_r m g r`, it decelerates at `5/7 mu_r g` (the spin slows the
/// translation through friction) and stops after `7 v0^2 / (10 mu_r g)`.
#[test]
fn a_rolling_sphere_stops_where_the_model_says() {
    let (v0, mu_r) = (0.2f32, 0.1f32);
    let expected = 7.0 * v0 * v0 / (10.0 * mu_r * G);
    for model in ["epsd2", "cdt"] {
        let dir = tempfile::tempdir().unwrap();
        let material = format!(
            "stiffness = 1e4\nrestitution = 0.5\nfriction = 0.5\nrolling_friction = {mu_r}\nrolling_model = \"{model}\""
        );
        let s = one_sphere(
            dir.path(),
            &material,
            [0.0, -G, 0.0],
            [v0, 0.0, 0.0],
            [0.0, 0.0, -v0 / R],
        );
        let mut sim = Simulation::cpu(&s);
        let x0 = state(&sim).pos[0][0];
        // Theory: stopped after v0 / (5/7 mu_r g) = 0.29 s; run 0.6 s.
        for _ in 0..60 {
            sim.advance(500).unwrap();
        }
        let st = state(&sim);
        let travelled = st.pos[0][0] - x0;
        assert!(
            (travelled - expected).abs() <= 0.03 * expected,
            "{model}: rolled {travelled} m, the model says {expected} m"
        );
        assert!(
            st.vel[0][0].abs() < 2e-3,
            "{model}: still moving {:?}",
            st.vel[0]
        );
    }
    // Without rolling friction it keeps rolling.
    let dir = tempfile::tempdir().unwrap();
    let s = one_sphere(
        dir.path(),
        "stiffness = 1e4\nrestitution = 0.5\nfriction = 0.5",
        [0.0, -G, 0.0],
        [v0, 0.0, 0.0],
        [0.0, 0.0, -v0 / R],
    );
    let mut sim = Simulation::cpu(&s);
    sim.advance(10_000).unwrap();
    let st = state(&sim);
    assert!((st.vel[0][0] - v0).abs() < 0.01 * v0, "{:?}", st.vel[0]);
}

/// On a slope of angle `theta` (gravity tilted), rolling resistance holds a
/// sphere while `tan theta <= mu_r`.
#[test]
fn a_sphere_on_a_slope_stays_below_the_critical_angle() {
    let mu_r = 0.2f32;
    let critical = mu_r.atan();
    for model in ["epsd2", "cdt"] {
        for (factor, stays) in [(0.7f32, true), (1.4, false)] {
            let theta = critical * factor;
            let g = [G * theta.sin(), -G * theta.cos(), 0.0];
            let dir = tempfile::tempdir().unwrap();
            let material = format!(
                "stiffness = 1e4\nrestitution = 0.5\nfriction = 0.8\nrolling_friction = {mu_r}\nrolling_model = \"{model}\""
            );
            let s = one_sphere(dir.path(), &material, g, [0.0; 3], [0.0; 3]);
            let mut sim = Simulation::cpu(&s);
            let x0 = state(&sim).pos[0][0];
            sim.advance(25_000).unwrap(); // 0.5 s
            let st = state(&sim);
            let moved = st.pos[0][0] - x0;
            if stays {
                assert!(
                    moved.abs() < 2e-4,
                    "{model}: at {:.1} deg it moved {moved} m",
                    theta.to_degrees()
                );
            } else {
                // Rolling down at 5/7 g (sin - mu_r cos): about 0.15 m in 0.5 s.
                let a = 5.0 / 7.0 * G * (theta.sin() - mu_r * theta.cos());
                let expected = 0.5 * a * 0.25;
                assert!(
                    (moved - expected).abs() <= 0.05 * expected,
                    "{model}: at {:.1} deg it moved {moved} m, the model says {expected} m",
                    theta.to_degrees()
                );
            }
        }
    }
    // Without rolling friction the gentler slope does not hold it either.
    let theta = critical * 0.7;
    let dir = tempfile::tempdir().unwrap();
    let s = one_sphere(
        dir.path(),
        "stiffness = 1e4\nrestitution = 0.5\nfriction = 0.8",
        [G * theta.sin(), -G * theta.cos(), 0.0],
        [0.0; 3],
        [0.0; 3],
    );
    let mut sim = Simulation::cpu(&s);
    sim.advance(25_000).unwrap();
    assert!(state(&sim).pos[0][0] - 0.2 > 0.01);
}

/// A column of 120 spheres collapses on the floor of a thin box: with
/// rolling friction the grains stop sooner, so the pile runs out less far
/// (90th percentile) and stands higher than without.
#[test]
fn a_collapsed_column_stands_steeper_with_rolling_friction() {
    let collapse = |material: &str| -> (f32, f32) {
        let dir = tempfile::tempdir().unwrap();
        let mut ps = Vec::new();
        for ix in 0..4 {
            for iy in 0..15 {
                for iz in 0..2 {
                    let p = [
                        0.6 + (ix as f32 - 1.5) * 0.0205,
                        0.0105 + iy as f32 * 0.0205,
                        0.0105 + iz as f32 * 0.0205,
                    ];
                    // A small sideways nudge alternating by layer breaks the symmetry.
                    let v = [if iy % 2 == 0 { 0.01 } else { -0.01 }, 0.0, 0.0];
                    ps.push((p, v));
                }
            }
        }
        let file = SimState {
            time: 0.0,
            step: 0,
            positions: ps.iter().map(|p| p.0).collect::<Vec<_>>().into(),
            velocities: ps.iter().map(|p| p.1).collect::<Vec<_>>().into(),
            angular_velocities: vec![[0.0f32; 3]; ps.len()].into(),
            radii: vec![R; ps.len()].into(),
            body_of_particle: vec![u32::MAX; ps.len()].into(),
            bodies: Vec::new().into(),
            ..Default::default()
        };
        write_asset(&dir.path().join("particles.pellet"), &file).unwrap();
        let text = format!(
            "[simulation]\ngravity = [0, -9.81, 0]\n[domain]\nmin = [0, 0, 0]\nmax = [1.2, 0.4, 0.042]\n[materials.default]\n{material}\n[[particles]]\nfile = \"particles.pellet\"\n"
        );
        std::fs::write(dir.path().join("scene.toml"), &text).unwrap();
        let scene = pellet_formats::Scene::load(&dir.path().join("scene.toml")).unwrap();
        let s = SimSetup::from_scene(&scene, dir.path(), SimOptions::default()).unwrap();
        let mut sim = Simulation::cpu(&s);
        sim.advance((1.5 / s.dt) as u32).unwrap();
        let st = state(&sim);
        // The 90th percentile of the distance from the column's axis (a few
        // grains may roll to the walls either way).
        let mut reach: Vec<f32> = st.pos.iter().map(|p| (p[0] - 0.6).abs()).collect();
        reach.sort_by(f32::total_cmp);
        let runout = reach[reach.len() * 9 / 10];
        let height = st.pos.iter().map(|p| p[1]).fold(0.0f32, f32::max);
        (runout, height)
    };
    let base = "stiffness = 1e4\nrestitution = 0.3\nfriction = 0.5";
    let (runout0, height0) = collapse(base);
    for model in ["epsd2", "cdt"] {
        let (runout, height) = collapse(&format!(
            "{base}\nrolling_friction = 0.3\nrolling_model = \"{model}\""
        ));
        assert!(
            runout < 0.8 * runout0 && height > height0,
            "{model}: runout {runout} m, height {height} m; without rolling friction {runout0} m, {height0} m"
        );
    }
}

/// The GPU path against the CPU engine on the rolling sphere: the same
/// deceleration, to rounding.
#[test]
fn the_gpu_path_rolls_alike() {
    let gpu = std::sync::Arc::new(
        pellet_player::gpu::Gpu::new(pellet_player::gpu::BackendChoice::Auto)
            .expect("a GPU adapter (lavapipe)"),
    );
    for model in ["epsd2", "cdt"] {
        let dir = tempfile::tempdir().unwrap();
        let material = format!(
            "stiffness = 1e4\nrestitution = 0.5\nfriction = 0.5\nrolling_friction = 0.1\nrolling_model = \"{model}\""
        );
        let s = one_sphere(
            dir.path(),
            &material,
            [0.0, -G, 0.0],
            [0.2, 0.0, 0.0],
            [0.0, 0.0, -20.0],
        );
        let mut cpu = Simulation::cpu(&s);
        let mut gs = Simulation::gpu(gpu.clone(), &s).unwrap();
        for _ in 0..6 {
            cpu.advance(500).unwrap();
            gs.advance(500).unwrap();
        }
        let (c, g) = (state(&cpu), state(&gs));
        // 0.06 s at 5/7 mu_r g: 0.2 - 0.042 m/s.
        assert!(
            (c.vel[0][0] - (0.2 - 5.0 / 7.0 * 0.1 * G * 0.06)).abs() < 2e-3,
            "{model}: {:?}",
            c.vel[0]
        );
        assert!(
            (c.vel[0][0] - g.vel[0][0]).abs() < 1e-5,
            "{model}: {:?} vs {:?}",
            c.vel[0],
            g.vel[0]
        );
        assert!(
            (c.angvel[0][2] - g.angvel[0][2]).abs() < 1e-3,
            "{model}: {:?} vs {:?}",
            c.angvel[0],
            g.angvel[0]
        );
        assert!((c.pos[0][0] - g.pos[0][0]).abs() < 1e-6, "{model}");
    }
}
