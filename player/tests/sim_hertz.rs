//! Hertz-Mindlin contacts (`model = "hertz"`): a head-on collision against
//! Hertz's theory (contact duration, largest overlap, elastic rebound), the
//! restitution the material asks for, the engines against each other, the
//! automatic time step from the Rayleigh time, and scenes that are refused.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{box_scene, lattice, setup};
use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::sim::{GridMode, HostState, SimOptions, SimSetup, Simulation};

const E: f64 = 1.0e7;
const NU: f64 = 0.25;
const R: f64 = 0.01;
const RHO: f64 = 2500.0;

fn material(e: f32, friction: f32) -> String {
    format!(
        "model = \"hertz\"\nyoungs_modulus = {E}\npoisson_ratio = {NU}\nrestitution = {e}\nfriction = {friction}"
    )
}

/// Two equal spheres meeting head-on at `speed` each, without gravity or
/// walls, at time step `dt` ("auto" for the automatic one).
fn head_on(e: f32, speed: f32, dt: &str) -> SimSetup {
    let dir = tempfile::tempdir().unwrap();
    setup(
        dir.path(),
        &box_scene(
            0.0,
            1.0,
            0.0,
            &material(e, 0.0),
            &format!("time_step = {dt}"),
            false,
        ),
        &[
            ([0.4899, 0.5, 0.5], [speed, 0.0, 0.0], R as f32),
            ([0.5101, 0.5, 0.5], [-speed, 0.0, 0.0], R as f32),
        ],
        GridMode::Auto,
    )
}

fn by_id(sim: &Simulation) -> HostState {
    sim.host_state().unwrap().by_id()
}

/// Steps `sim` until the spheres have met and parted: the steps in contact,
/// the smallest centre distance, and the first sphere's final velocity.
fn collide(sim: &mut Simulation) -> (u32, f64, f32) {
    let (mut touching, mut closest) = (0, f64::INFINITY);
    for _ in 0..100_000 {
        sim.advance(1).unwrap();
        let s = by_id(sim);
        let d = f64::from(s.pos[1][0] - s.pos[0][0]);
        closest = closest.min(d);
        if d < 2.0 * R {
            touching += 1;
        } else if touching > 0 {
            return (touching, closest, s.vel[0][0]);
        }
    }
    panic!("the spheres never parted");
}

/// Hertz: duration `2.868 (m*^2 / (R* E*^2 v))^(1/5)`, largest overlap
/// `(15 m* v^2 / (16 E* sqrt(R*)))^(2/5)` for impact speed `v`.
fn hertz_theory(v: f64) -> (f64, f64) {
    let m = RHO * 4.0 / 3.0 * std::f64::consts::PI * R * R * R;
    let (m_eff, r_eff) = (m / 2.0, R / 2.0);
    let e_eff = E / (2.0 * (1.0 - NU * NU));
    let duration = 2.868 * (m_eff * m_eff / (r_eff * e_eff * e_eff * v)).powf(0.2);
    let overlap = (15.0 * m_eff * v * v / (16.0 * e_eff * r_eff.sqrt())).powf(0.4);
    (duration, overlap)
}

/// A way to start a simulation of a setup.
type Start = Box<dyn Fn(&SimSetup) -> Simulation>;

fn backends() -> Vec<(&'static str, Start)> {
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto).expect("a GPU adapter (lavapipe)"));
    vec![
        ("cpu", Box::new(Simulation::cpu)),
        (
            "gpu",
            Box::new(move |s: &SimSetup| Simulation::gpu(gpu.clone(), s).unwrap()),
        ),
    ]
}

#[test]
fn a_head_on_collision_follows_hertz_theory() {
    let (speed, dt) = (0.5f32, 2e-6);
    let (duration, overlap) = hertz_theory(2.0 * f64::from(speed));
    for (name, start) in backends() {
        let s = head_on(1.0, speed, &format!("{dt}"));
        let mut sim = start(&s);
        let (steps, closest, v_after) = collide(&mut sim);
        let measured = f64::from(steps) * dt;
        assert!(
            (measured - duration).abs() <= 0.01 * duration,
            "{name}: contact lasted {measured:.4e} s, Hertz says {duration:.4e} s"
        );
        let depth = 2.0 * R - closest;
        assert!(
            (depth - overlap).abs() <= 0.01 * overlap,
            "{name}: deepest overlap {depth:.4e} m, Hertz says {overlap:.4e} m"
        );
        // Elastic: the rebound has the impact speed.
        assert!(
            (v_after + speed).abs() <= 1e-3 * speed,
            "{name}: rebound {v_after} from {speed}"
        );
    }
}

#[test]
fn the_rebound_has_the_materials_restitution() {
    for (name, start) in backends() {
        for e in [0.3f32, 0.6, 0.9] {
            let mut restitutions = Vec::new();
            for speed in [0.2f32, 1.0] {
                let s = head_on(e, speed, "5e-6");
                let mut sim = start(&s);
                let (_, _, v_after) = collide(&mut sim);
                restitutions.push(-v_after / speed);
            }
            for (k, r) in restitutions.iter().enumerate() {
                assert!(
                    (r - e).abs() <= 0.01 * e,
                    "{name}: restitution {e} measured {r} (speed {k})"
                );
            }
            // The model's restitution does not depend on the speed.
            assert!(
                (restitutions[0] - restitutions[1]).abs() <= 0.002,
                "{name}: {restitutions:?}"
            );
        }
    }
}

#[test]
fn the_automatic_step_is_a_tenth_of_the_rayleigh_time() {
    let s = head_on(0.5, 0.5, "\"auto\"");
    let g = E / (2.0 * (1.0 + NU));
    let rayleigh = std::f64::consts::PI * R * (RHO / g).sqrt() / (0.1631 * NU + 0.8766);
    assert!((s.contact_time - rayleigh).abs() <= 1e-6 * rayleigh);
    assert!((s.dt - rayleigh / 10.0).abs() <= 1e-6 * s.dt);
    // And the collision with it stays within a few percent of theory.
    let (duration, _) = hertz_theory(1.0);
    let mut sim = Simulation::cpu(&s);
    let (steps, _, _) = collide(&mut sim);
    let measured = f64::from(steps) * s.dt;
    assert!(
        (measured - duration).abs() <= 0.1 * duration,
        "{measured} vs {duration}"
    );
}

/// A settling Hertz pack with walls and friction: the GPU path and block
/// by block against the CPU engine.
#[test]
fn a_hertz_pack_settles_alike_on_every_engine() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(0.0, 0.3, -9.81, &material(0.5, 0.5), "", true),
        &lattice(8, 0.01, 0.0199, 0.02, 0.0005, 0.0, 5),
        GridMode::Auto,
    );
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto).unwrap());
    let mut cpu = Simulation::cpu(&s);
    let mut gs = Simulation::gpu(gpu.clone(), &s).unwrap();
    let budget = pellet_player::sim::blocks::budget_for_block(&s, 250);
    let mut blocks = Simulation::blocks(gpu, &s, budget).unwrap();
    // The lattice starts a little compressed: it springs apart and falls.
    let mut contacts = 0;
    for _ in 0..6 {
        for sim in [&mut cpu, &mut gs, &mut blocks] {
            sim.advance(50).unwrap();
        }
        contacts += cpu.stats().unwrap().contacts;
    }
    let c = by_id(&cpu);
    let start = by_id(&Simulation::cpu(&s));
    let fell = c
        .pos
        .iter()
        .zip(&start.pos)
        .map(|(p, q)| q[1] - p[1])
        .fold(0.0f32, f32::max);
    assert!(fell > 1e-3, "the grains fell {fell} m");
    assert!(contacts > 100, "{contacts} contacts");
    for (name, other) in [("gpu", by_id(&gs)), ("blocks", by_id(&blocks))] {
        for (i, (p, q)) in c.pos.iter().zip(&other.pos).enumerate() {
            for a in 0..3 {
                assert!(
                    (p[a] - q[a]).abs() <= 1e-4,
                    "{name}: particle {i} axis {a}: {} vs {}",
                    p[a],
                    q[a]
                );
            }
        }
    }
}

fn refused(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scene.toml");
    std::fs::write(&path, text).unwrap();
    match pellet_formats::Scene::load(&path) {
        Err(e) => e.to_string(),
        Ok(scene) => SimSetup::from_scene(&scene, dir.path(), SimOptions::default())
            .unwrap_err()
            .to_string(),
    }
}

#[test]
fn unclear_hertz_scenes_are_refused_with_one_line() {
    let base = "name = \"h\"\n[domain]\nmin = [0, 0, 0]\nmax = [1, 1, 1]\n[[particles]]\nregion = { min = [0, 0, 0], max = [0.2, 0.2, 0.2] }\nspacing = 0.05\nradius = 0.01\n";
    let cases = [
        (
            "[materials.default]\nmodel = \"hertz\"\n",
            "is required with model",
        ),
        (
            "[materials.default]\nyoungs_modulus = 1e7\n",
            "set model = \"hertz\"",
        ),
        (
            "[materials.default]\nmodel = \"hertz\"\nyoungs_modulus = 1e7\npoisson_ratio = 0.7\n",
            "poisson_ratio",
        ),
        (
            "[materials.default]\nmodel = \"hertz\"\nyoungs_modulus = 1e7\ndamping = 3\n",
            "follows from `restitution`",
        ),
        (
            "[materials.default]\nmodel = \"hertz\"\nyoungs_modulus = 1e7\n[materials.b]\nstiffness = 100\n",
            "same contact model",
        ),
        (
            "[materials.glass]\nmodel = \"hertz\"\nyoungs_modulus = 1e7\n",
            "define [materials.default]",
        ),
        ("[materials.default]\nmodel = \"maxwell\"\n", "maxwell"),
    ];
    for (extra, expected) in cases {
        let err = refused(&format!("{base}{extra}"));
        assert!(err.contains(expected), "{extra}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
