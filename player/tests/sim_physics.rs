//! Physics checks on the CPU backend (the GPU's twin; the parity tests tie
//! the two together): restitution, energy, momentum, settling, containment,
//! and the non-finite check. A few also run on the GPU.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{box_scene, lattice, random_particles, setup};
use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::sim::cpu::momentum;
use pellet_player::sim::{Engine, GridMode, SimError, Simulation};

/// Speed of particle `id` (input order) along y.
fn vy(sim: &Simulation, id: u32) -> f32 {
    let s = sim.host_state().unwrap();
    let k = s.meta.iter().position(|m| m[0] == id).unwrap();
    s.vel[k][1]
}

/// Drops one particle on the floor without gravity and measures the rebound.
/// `steps_per_contact`: `None` for the automatic time step.
fn rebound(e: f32, speed: f32, integrator: &str, steps_per_contact: Option<f64>) -> f32 {
    let m = 2500.0 * 4.0 / 3.0 * std::f64::consts::PI * 1e-6;
    let wall_contact = std::f64::consts::PI * (m / 1e4f64).sqrt();
    let dt = steps_per_contact.map_or(String::new(), |k| {
        format!("time_step = {}", wall_contact / k)
    });
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(
            0.0,
            1.0,
            0.0,
            &format!("restitution = {e}\nfriction = 0.5"),
            &format!("integrator = \"{integrator}\"\n{dt}"),
            true,
        ),
        &[([0.5, 0.02, 0.5], [0.0, -speed, 0.0], 0.01)],
        GridMode::Auto,
    );
    let mut sim = Simulation::cpu(&s);
    // Flight to the wall (0.01 m) plus the contact, with margin.
    let steps = ((0.01 / f64::from(speed) + 3.0 * s.contact_time) / s.dt).ceil() as u32;
    sim.advance(steps).unwrap();
    vy(&sim, 0) / speed
}

#[test]
fn particle_rebounds_from_wall_with_configured_restitution() {
    // The automatic step: 20 steps per particle contact, ~28 per wall contact.
    for e in [0.7f32, 0.9] {
        for integrator in ["verlet", "rk2"] {
            let measured = rebound(e, 1.0, integrator, None);
            assert!(
                (measured - e).abs() <= 0.02 * e,
                "{integrator}: restitution {e} measured {measured}"
            );
        }
    }
    // Damping is evaluated with half-step velocities (as LIGGGHTS does), an
    // error of about `zeta omega dt` (2.6 % at e = 0.5 with the automatic
    // step; see docs/simulation.md): finer steps for low restitution.
    for (e, steps) in [(0.5f32, 100.0), (0.3, 200.0)] {
        let measured = rebound(e, 1.0, "verlet", Some(steps));
        assert!(
            (measured - e).abs() <= 0.02 * e,
            "restitution {e} measured {measured}"
        );
    }
}

#[test]
fn head_on_particles_rebound_with_configured_restitution() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(0.0, 1.0, 0.0, "restitution = 0.7\nfriction = 0.5", "", true),
        &[
            ([0.45, 0.5, 0.5], [1.0, 0.0, 0.0], 0.01),
            ([0.55, 0.5, 0.5], [-1.0, 0.0, 0.0], 0.01),
        ],
        GridMode::Auto,
    );
    let mut sim = Simulation::cpu(&s);
    let steps = ((0.04 + 3.0 * s.contact_time) / s.dt).ceil() as u32;
    sim.advance(steps).unwrap();
    let st = sim.host_state().unwrap();
    let k = st.meta.iter().position(|m| m[0] == 0).unwrap();
    let e = -st.vel[k][0];
    assert!((e - 0.7).abs() <= 0.02 * 0.7, "measured {e}");
}

#[test]
fn energy_is_conserved_without_damping_or_friction() {
    let dir = tempfile::tempdir().unwrap();
    // 343 particles at 1 m/s in a closed box: many collisions, no losses.
    let s = setup(
        dir.path(),
        &box_scene(0.0, 0.2, 0.0, "restitution = 1.0\nfriction = 0.0", "", true),
        &lattice(7, 0.01, 0.026, 0.022, 0.002, 1.0, 9),
        GridMode::Auto,
    );
    let mut sim = Simulation::cpu(&s);
    let energy = |sim: &Simulation| {
        let Engine::Cpu(c) = sim.engine() else {
            unreachable!()
        };
        let (ke, _) = pellet_player::sim::cpu::kinetic_energy(&c.state);
        ke + c.spring_energy()
    };
    let e0 = energy(&sim);
    let mut contacts = 0;
    for _ in 0..100 {
        sim.advance(100).unwrap();
        contacts += sim.stats().unwrap().contacts + sim.stats().unwrap().wall_contacts;
        let e = energy(&sim);
        assert!(
            ((e - e0) / e0).abs() < 0.01,
            "energy {e} vs {e0} at step {}",
            sim.steps()
        );
    }
    assert!(contacts > 100, "the test needs collisions, saw {contacts}");
}

#[test]
fn momentum_is_conserved_without_gravity_or_walls() {
    let dir = tempfile::tempdir().unwrap();
    let mut ps = random_particles(400, 0.01, 0.0, 0.25, 0.5, 21);
    for p in &mut ps {
        p.1[0] += 0.3; // a net drift so the relative change means something
    }
    let s = setup(
        dir.path(),
        &box_scene(
            -1.0,
            1.0,
            0.0,
            "restitution = 0.5\nfriction = 0.5",
            "",
            false,
        ),
        &ps,
        GridMode::Auto,
    );
    for integrator in [0, 1] {
        let mut s = s.clone();
        if integrator == 1 {
            s.integrator = pellet_formats::scene::Integrator::Rk2;
        }
        let mut sim = Simulation::cpu(&s);
        let p0 = momentum(&sim.host_state().unwrap());
        sim.advance(10_000).unwrap();
        let p1 = momentum(&sim.host_state().unwrap());
        let norm = |p: [f64; 3]| (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
        let change = norm([p1[0] - p0[0], p1[1] - p0[1], p1[2] - p0[2]]) / norm(p0);
        assert!(
            change < 1e-5,
            "integrator {integrator}: relative change {change}"
        );
    }
}

fn pour(sim: &mut Simulation, lo: f32, hi: f32, batches: u32, batch: u32) -> f64 {
    let mut max_speed = f64::INFINITY;
    for _ in 0..batches {
        sim.advance(batch).unwrap();
        let st = sim.host_state().unwrap();
        for p in &st.pos {
            for k in 0..3 {
                assert!(
                    p[k] >= lo && p[k] <= hi,
                    "a particle left the domain at step {}: {p:?}",
                    sim.steps()
                );
            }
        }
        max_speed = sim.stats().unwrap().max_speed;
    }
    max_speed
}

#[test]
fn poured_pile_comes_to_rest_inside_the_domain() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(
            0.0,
            0.2,
            -9.81,
            "restitution = 0.3\nfriction = 0.5",
            "",
            true,
        ),
        &lattice(8, 0.01, 0.022, 0.02, 0.001, 0.2, 4),
        GridMode::Auto,
    );
    let mut sim = Simulation::cpu(&s);
    // ~1.5 s simulated.
    let batch = 500;
    let batches = (1.5 / s.dt / f64::from(batch)).ceil() as u32;
    let max_speed = pour(&mut sim, 0.0, 0.2, batches, batch);
    assert!(max_speed < 0.02, "still moving at {max_speed} m/s");
    let stats = sim.stats().unwrap();
    assert!(stats.contacts > 500, "a pile has contacts: {stats:?}");
    assert_eq!(stats.slot_overflows, 0);
}

#[test]
fn a_blow_up_stops_the_run_naming_step_and_particle() {
    let dir = tempfile::tempdir().unwrap();
    // A particle squeezed between walls 19 mm apart, a very stiff spring and
    // a huge step: every step multiplies the overlap until it overflows.
    let s = setup(
        dir.path(),
        &box_scene(
            0.0,
            0.019,
            0.0,
            "stiffness = 1e12\nrestitution = 1.0",
            "time_step = 0.01",
            true,
        ),
        &[([0.0095, 0.0096, 0.0094], [0.0; 3], 0.01)],
        GridMode::Auto,
    );
    let g = Arc::new(Gpu::new(BackendChoice::Auto).unwrap());
    for mut sim in [Simulation::cpu(&s), Simulation::gpu(g, &s).unwrap()] {
        let mut err = None;
        for _ in 0..200 {
            if let Err(e) = sim.advance(10) {
                err = Some(e);
                break;
            }
        }
        match err {
            Some(SimError::NonFinite { step, particle }) => {
                assert_eq!(particle, 0, "particle {particle}");
                assert!(step >= 1 && step <= sim.steps(), "step {step}");
                let msg = SimError::NonFinite { step, particle }.to_string();
                assert!(msg.contains(&format!("step {step}")) && msg.contains("particle"));
            }
            other => panic!("expected a non-finite error, got {other:?}"),
        }
    }
}
