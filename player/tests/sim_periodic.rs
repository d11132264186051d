//! Periodic boundaries (`[domain] periodic`) on the CPU engine: contacts
//! across the boundary at the minimum image, particles that wrap, no
//! contact missed against brute force, momentum conserved, and the scenes
//! that are refused with one line.
#![allow(clippy::unwrap_used)]

mod common;

use common::{P, random_particles, setup};
use pellet_player::sim::{GridMode, HostState, SimOptions, SimSetup, Simulation};

/// A box `[0, 0.2]^3` periodic along `periodic`, walls on the other faces
/// (`walls`), gravity `g` along y, and the default material's `material`.
fn periodic_scene(periodic: &str, walls: bool, g: f32, material: &str, extra: &str) -> String {
    format!(
        "[simulation]\ngravity = [0, {g}, 0]\n{extra}\n[domain]\nmin = [0, 0, 0]\nmax = [0.2, 0.2, 0.2]\nperiodic = {periodic}\nwalls = {walls}\n[materials.default]\n{material}\n"
    )
}

fn by_id(sim: &Simulation) -> HostState {
    sim.host_state().unwrap().by_id()
}

#[test]
fn particles_collide_across_a_periodic_boundary() {
    let dir = tempfile::tempdir().unwrap();
    // Particle 0 near the upper x face moving up, particle 1 near the lower
    // face moving down: they meet across the boundary.
    let s = setup(
        dir.path(),
        &periodic_scene(
            "[true, false, false]",
            true,
            0.0,
            "restitution = 0.7\nfriction = 0.5",
            "",
        ),
        &[
            ([0.185, 0.1, 0.1], [1.0, 0.0, 0.0], 0.01),
            ([0.015, 0.1, 0.1], [-1.0, 0.0, 0.0], 0.01),
        ],
        GridMode::Auto,
    );
    let mut sim = Simulation::cpu(&s);
    let steps = ((0.02 + 3.0 * s.contact_time) / s.dt).ceil() as u32;
    sim.advance(steps).unwrap();
    let st = by_id(&sim);
    let e = -st.vel[0][0];
    assert!((e - 0.7).abs() <= 0.02 * 0.7, "measured {e}");
    assert!((st.vel[1][0] - 0.7).abs() <= 0.02 * 0.7, "{:?}", st.vel[1]);
    assert!(sim.stats().unwrap().rebuilds >= 1);
}

#[test]
fn a_particle_leaving_one_face_enters_the_opposite_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &periodic_scene("[true, false, true]", true, 0.0, "friction = 0.5", ""),
        &[([0.15, 0.1, 0.15], [1.0, 0.0, 0.5], 0.01)],
        GridMode::Auto,
    );
    let mut sim = Simulation::cpu(&s);
    // 0.2 s at 1 m/s along x: 0.2 m, once around; 0.1 m along z.
    let steps = (0.2 / s.dt).round() as u32;
    for _ in 0..10 {
        sim.advance(steps / 10).unwrap();
        let p = by_id(&sim).pos[0];
        // Within the box up to the skin's half between rebuilds.
        for a in [0, 2] {
            assert!(p[a] > -0.01 && p[a] < 0.21, "{p:?}");
        }
    }
    let p = by_id(&sim).pos[0];
    let t = f64::from(steps / 10 * 10) * s.dt;
    let expect = |x0: f64, v: f64| (x0 + v * t).rem_euclid(0.2);
    assert!((f64::from(p[0]) - expect(0.15, 1.0)).abs() < 1e-4, "{p:?}");
    assert!((f64::from(p[2]) - expect(0.15, 0.5)).abs() < 1e-4, "{p:?}");
}

/// Touching pairs by brute force, at the minimum image along `periodic`.
fn touching_pairs(s: &HostState, period: [f32; 3]) -> u64 {
    let mut n = 0;
    for i in 0..s.pos.len() {
        for j in i + 1..s.pos.len() {
            let (pi, mut pj) = (s.pos[i], s.pos[j]);
            for a in 0..3 {
                if period[a] > 0.0 {
                    let k = ((pi[a] - pj[a]) * (1.0 / period[a])).round_ties_even();
                    pj[a] += k * period[a];
                }
            }
            let d = [pi[0] - pj[0], pi[1] - pj[1], pi[2] - pj[2]];
            let rsum = pi[3] + pj[3];
            if d[0] * d[0] + d[1] * d[1] + d[2] * d[2] < rsum * rsum {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn no_contact_is_missed_across_periodic_boundaries() {
    // Two periodic axes with walls and gravity; all three (pairs across the
    // major axis' face are evaluated after the slabs).
    for (periodic, g, period) in [
        ("[true, false, true]", -9.81, [0.2, 0.0, 0.2]),
        ("[true, true, true]", 0.0, [0.2, 0.2, 0.2]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let ps: Vec<P> = random_particles(600, 0.01, 0.0, 0.2, 2.0, 11);
        let s = setup(
            dir.path(),
            &periodic_scene(
                periodic,
                true,
                g,
                "restitution = 0.8\nfriction = 0.3",
                "skin = 0.004",
            ),
            &ps,
            GridMode::Auto,
        );
        let mut sim = Simulation::cpu(&s);
        let mut checked = 0;
        for _ in 0..30 {
            sim.advance(10).unwrap();
            let stats = sim.stats().unwrap();
            let want = touching_pairs(&sim.host_state().unwrap(), period);
            assert_eq!(stats.contacts, want, "{periodic}: at step {}", sim.steps());
            checked += want;
        }
        assert!(checked > 100, "the test needs contacts: {checked}");
    }
}

#[test]
fn momentum_is_conserved_across_periodic_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let ps: Vec<P> = random_particles(300, 0.01, 0.0, 0.2, 1.0, 5);
    let s = setup(
        dir.path(),
        &periodic_scene(
            "[true, true, true]",
            false,
            0.0,
            "restitution = 0.5\nfriction = 0.5\nrolling_friction = 0.2",
            "",
        ),
        &ps,
        GridMode::Auto,
    );
    let mut sim = Simulation::cpu(&s);
    let momentum = |sim: &Simulation| {
        let s = sim.host_state().unwrap();
        let mut p = [0.0f64; 3];
        for v in &s.vel {
            for a in 0..3 {
                p[a] += f64::from(v[a]) / f64::from(v[3]);
            }
        }
        p
    };
    let scale: f64 = sim
        .host_state()
        .unwrap()
        .vel
        .iter()
        .map(|v| f64::from(v[0].abs() + v[1].abs() + v[2].abs()) / f64::from(v[3]))
        .sum();
    let p0 = momentum(&sim);
    let mut contacts = 0;
    for _ in 0..20 {
        sim.advance(100).unwrap();
        contacts += sim.stats().unwrap().contacts;
    }
    let p1 = momentum(&sim);
    for a in 0..3 {
        assert!(
            (p1[a] - p0[a]).abs() < 1e-5 * scale,
            "axis {a}: {p0:?} -> {p1:?}"
        );
    }
    assert!(contacts > 50, "{contacts}");
}

fn refused(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scene.toml");
    std::fs::write(&path, text).unwrap();
    let scene = pellet_formats::Scene::load(&path).unwrap();
    SimSetup::from_scene(&scene, dir.path(), SimOptions::default())
        .unwrap_err()
        .to_string()
}

#[test]
fn unsupported_periodic_scenes_are_refused_with_one_line() {
    let base = |domain: &str, extra: &str| {
        format!(
            "name = \"p\"\n[simulation]\n{extra}\n[domain]\nmin = [0, 0, 0]\n{domain}\n[[particles]]\nregion = {{ min = [0, 0, 0], max = [0.04, 0.04, 0.04] }}\nspacing = 0.02\nradius = 0.01\n"
        )
    };
    for (text, expected) in [
        (
            base(
                "max = [0.05, 0.2, 0.2]\nperiodic = [true, false, false]",
                "",
            ),
            "at least three neighbour cells",
        ),
        (
            base(
                "max = [0.2, 0.2, 0.2]\nperiodic = [true, false, false]",
                "integrator = \"rk2\"",
            ),
            "velocity Verlet",
        ),
    ] {
        let err = refused(&text);
        assert!(err.contains(expected), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

/// The full example of docs/scene-format.md (periodic along z, a static
/// bunny, a gate) runs from the command line.
#[test]
fn the_documented_example_scene_runs() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/scene-format.md"),
    )
    .unwrap();
    let at = text.find("## A full example").unwrap();
    let block = &text[at..];
    let start = block.find("```toml\n").unwrap() + 8;
    let toml = &block[start..start + block[start..].find("```").unwrap()];
    assert!(toml.contains("periodic = [false, false, true]"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::create_dir_all(dir.path().join("meshes")).unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/meshes/bunny.glb"),
        dir.path().join("meshes/bunny.glb"),
    )
    .unwrap();
    let scene = dir.path().join("docs/gate.toml");
    std::fs::write(&scene, toml).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_player"))
        .args([
            "run",
            scene.to_str().unwrap(),
            "--headless",
            "--backend",
            "cpu",
        ])
        .args([
            "--steps",
            "300",
            "--cache-dir",
            dir.path().join("cache").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // And on the GPU path.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_player"))
        .args([
            "run",
            scene.to_str().unwrap(),
            "--headless",
            "--steps",
            "100",
        ])
        .args(["--cache-dir", dir.path().join("cache").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The GPU path and block-wise stepping against the CPU engine on a
/// periodic scene: the same collisions across the boundaries.
#[test]
fn every_engine_agrees_across_periodic_boundaries() {
    for (periodic, g) in [("[true, false, true]", -9.81), ("[true, true, true]", 0.0)] {
        every_engine_agrees(periodic, g);
    }
}

fn every_engine_agrees(periodic: &str, g: f32) {
    let dir = tempfile::tempdir().unwrap();
    let ps: Vec<P> = random_particles(500, 0.01, 0.0, 0.2, 1.0, 3);
    let s = setup(
        dir.path(),
        &periodic_scene(
            periodic,
            true,
            g,
            "restitution = 0.6\nfriction = 0.4\nrolling_friction = 0.1",
            "",
        ),
        &ps,
        GridMode::Auto,
    );
    let all = periodic == "[true, true, true]";
    let gpu = std::sync::Arc::new(
        pellet_player::gpu::Gpu::new(pellet_player::gpu::BackendChoice::Auto)
            .expect("a GPU adapter (lavapipe)"),
    );
    let mut cpu = Simulation::cpu(&s);
    let mut gs = Simulation::gpu(gpu.clone(), &s).unwrap();
    let budget = pellet_player::sim::blocks::budget_for_block(&s, 300);
    let mut blocks = Simulation::blocks(gpu, &s, budget).unwrap();
    let mut contacts = 0;
    for _ in 0..4 {
        for sim in [&mut cpu, &mut gs, &mut blocks] {
            sim.advance(25).unwrap();
        }
        let (c, g) = (cpu.stats().unwrap(), gs.stats().unwrap());
        assert_eq!(c.contacts, g.contacts, "contacts at step {}", cpu.steps());
        contacts += c.contacts;
    }
    assert!(contacts > 50, "{contacts}");
    assert!(blocks.block_stats().unwrap().blocks > 1);
    let c = by_id(&cpu);
    for (name, other) in [("gpu", by_id(&gs)), ("blocks", by_id(&blocks))] {
        for (i, (p, q)) in c.pos.iter().zip(&other.pos).enumerate() {
            for a in 0..3 {
                // Wrapped at builds: compare at the minimum image.
                let mut d = p[a] - q[a];
                if a != 1 || all {
                    d -= 0.2 * (d / 0.2).round();
                }
                assert!(
                    d.abs() <= 1e-5,
                    "{name}: particle {i} axis {a}: {} vs {}",
                    p[a],
                    q[a]
                );
            }
        }
    }
}

/// A dynamic tile crosses the periodic x face at 1 m/s and hits a grain
/// resting beyond it, at the minimum image: its pose stays continuous (it
/// leaves the box), its particles meet the grain across the boundary, on
/// the CPU engine and the GPU path alike.
#[test]
fn a_rigid_body_crosses_a_periodic_boundary() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("meshes")).unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/meshes/tile.glb"),
        dir.path().join("meshes/tile.glb"),
    )
    .unwrap();
    std::fs::write(dir.path().join("grain.csv"), "0.03,0.1,0.1\n").unwrap();
    let scene = dir.path().join("scene.toml");
    std::fs::write(
        &scene,
        "name = \"cross\"\n[simulation]\nparticle_radius = 0.01\ngravity = [0, 0, 0]\n\
         [domain]\nmin = [0, 0, 0]\nmax = [0.3, 0.2, 0.2]\nperiodic = [true, false, false]\n\
         [materials.default]\nrestitution = 0.8\nfriction = 0.2\n\
         [[particles]]\nfile = \"grain.csv\"\n\
         [[bodies]]\nmesh = \"meshes/tile.glb\"\nposition = [0.22, 0.1, 0.1]\nvelocity = [1, 0, 0]\n",
    )
    .unwrap();
    let s = pellet_player::sim::run::load_setup(&scene, GridMode::Auto).unwrap();
    assert_eq!(s.bodies.len(), 1);
    let gpu = std::sync::Arc::new(
        pellet_player::gpu::Gpu::new(pellet_player::gpu::BackendChoice::Auto)
            .expect("a GPU adapter (lavapipe)"),
    );
    let steps = (0.15 / s.dt) as u32;
    let mut results = Vec::new();
    for mut sim in [Simulation::cpu(&s), Simulation::gpu(gpu, &s).unwrap()] {
        sim.advance(steps).unwrap();
        let body = sim.bodies().unwrap()[0];
        let st = sim.host_state().unwrap();
        let grain = st.meta.iter().position(|m| m[2] == u32::MAX).unwrap();
        results.push((body.position, body.velocity, st.vel[grain]));
    }
    for (body, body_v, grain_v) in &results {
        // The body went on past the face (its pose is continuous) ...
        assert!(body[0] > 0.3, "{body:?}");
        // ... and knocked the grain forward across the boundary.
        assert!(grain_v[0] > 0.5, "grain {grain_v:?}, body {body_v:?}");
    }
    let (a, b) = (&results[0], &results[1]);
    assert!((a.2[0] - b.2[0]).abs() < 1e-3, "{:?} vs {:?}", a.2, b.2);
    assert!((a.0[0] - b.0[0]).abs() < 1e-4, "{:?} vs {:?}", a.0, b.0);
}
