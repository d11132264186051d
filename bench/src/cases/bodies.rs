//! Rigid bodies made of particles: `bunnies.toml` and `avalanche.toml` on
//! the GPU path and the CPU backend, the cost of bodies per step next to the
//! same particles left free, and rapier3d (what a Rust user would otherwise
//! pick) with the same bodies as compound ball colliders, the free particles
//! as balls, the same time step, sleeping and CCD off.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rapier3d::na as nalgebra;
use rapier3d::prelude::*;

use pellet_gpu::{BackendChoice, Gpu};
use pellet_player::sim::run::load_setup_cached;
use pellet_sim::setup::FREE;
use pellet_sim::stages::bodies::KINEMATIC;
use pellet_sim::{GridMode, SimSetup, Simulation};

use crate::harness::{Row, Timing};

/// Wall time of `steps` steps after one untimed step, `samples` fresh runs.
fn pellet(
    setup: &SimSetup,
    gpu: Option<&Arc<Gpu>>,
    steps: u32,
    samples: usize,
) -> anyhow::Result<Timing> {
    let mut runs = Vec::new();
    for _ in 0..samples {
        let mut sim = match gpu {
            Some(g) => Simulation::gpu(g.clone(), setup)?,
            None => Simulation::cpu(setup),
        };
        sim.advance(1)?;
        sim.stats()?;
        let start = Instant::now();
        let mut left = steps;
        while left > 0 {
            let k = left.min(50);
            sim.advance(k)?;
            left -= k;
        }
        sim.stats()?;
        runs.push(start.elapsed().as_secs_f64());
    }
    Ok(Timing::of(&runs).expect("at least one run"))
}

/// The same particles with no bodies: every body particle free, with the
/// mass and spin inertia of a sphere of its share of the body's mass.
fn without_bodies(setup: &SimSetup) -> SimSetup {
    let mut s = setup.clone();
    s.bodies.clear();
    s.body_names.clear();
    let p = &mut s.particles;
    for k in 0..p.len() {
        if p.meta[k][2] != FREE {
            p.meta[k][2] = FREE;
            if p.vel[k][3] == 0.0 {
                p.vel[k][3] = 1.0; // immovable scenery: give it a mass
            }
            let m = 1.0 / p.vel[k][3];
            let r = p.pos[k][3];
            p.angvel[k][3] = 1.0 / (0.4 * m * r * r);
            p.local[k] = [0.0; 4];
        }
    }
    s
}

/// rapier3d on the same scene: wall time of `steps` steps after one.
fn rapier(setup: &SimSetup, steps: u32, samples: usize) -> Timing {
    let mut runs = Vec::new();
    for _ in 0..samples {
        let mut bodies = RigidBodySet::new();
        let mut colliders = ColliderSet::new();
        let pair = setup.pairs[0];
        let restitution = pellet_sim::setup::restitution_of(&pair, false);
        let p = &setup.particles;
        for k in 0..p.len() {
            if p.meta[k][2] != FREE {
                continue;
            }
            let [x, y, z, r] = p.pos[k];
            let v = p.vel[k];
            let rb = RigidBodyBuilder::dynamic()
                .translation(vector![x, y, z])
                .linvel(vector![v[0], v[1], v[2]])
                .can_sleep(false)
                .ccd_enabled(false)
                .build();
            let h = bodies.insert(rb);
            let c = ColliderBuilder::ball(r)
                .mass(1.0 / v[3])
                .friction(pair.mu)
                .restitution(restitution)
                .build();
            colliders.insert_with_parent(c, h, &mut bodies);
        }
        for b in &setup.bodies {
            let (first, count) = (b.range[0] as usize, b.range[1] as usize);
            let shapes: Vec<(Isometry<Real>, SharedShape)> = (first..first + count)
                .map(|k| {
                    let l = p.local[k];
                    (
                        Isometry::translation(l[0], l[1], l[2]),
                        SharedShape::ball(p.pos[k][3]),
                    )
                })
                .collect();
            let q = b.orientation;
            let rot = nalgebra::UnitQuaternion::from_quaternion(nalgebra::Quaternion::new(
                q[3], q[0], q[1], q[2],
            ));
            let builder = match b.range[2] {
                0 => RigidBodyBuilder::dynamic(),
                KINEMATIC => RigidBodyBuilder::kinematic_velocity_based(),
                _ => RigidBodyBuilder::fixed(),
            };
            let rb = builder
                .translation(vector![b.position[0], b.position[1], b.position[2]])
                .rotation(rot.scaled_axis())
                .linvel(vector![b.velocity[0], b.velocity[1], b.velocity[2]])
                .angvel(vector![b.omega[0], b.omega[1], b.omega[2]])
                .can_sleep(false)
                .ccd_enabled(false)
                .build();
            let h = bodies.insert(rb);
            let mut c = ColliderBuilder::compound(shapes)
                .friction(pair.mu)
                .restitution(restitution);
            if b.position[3] > 0.0 {
                c = c.mass(1.0 / b.position[3]);
            }
            colliders.insert_with_parent(c.build(), h, &mut bodies);
        }
        // The walls: half-spaces on one fixed body.
        let ground = bodies.insert(RigidBodyBuilder::fixed().build());
        for w in &setup.walls {
            let n = vector![w.normal[0], w.normal[1], w.normal[2]];
            let c = ColliderBuilder::halfspace(UnitVector::new_normalize(n))
                .translation(n * w.offset)
                .friction(pair.mu)
                .restitution(restitution)
                .build();
            colliders.insert_with_parent(c, ground, &mut bodies);
        }
        let g = setup.gravity;
        let gravity = vector![g[0], g[1], g[2]];
        let params = IntegrationParameters {
            dt: setup.dt as f32,
            ..Default::default()
        };
        let mut pipeline = PhysicsPipeline::new();
        let mut islands = IslandManager::new();
        let mut broad_phase = DefaultBroadPhase::new();
        let mut narrow_phase = NarrowPhase::new();
        let mut impulse_joints = ImpulseJointSet::new();
        let mut multibody_joints = MultibodyJointSet::new();
        let mut ccd = CCDSolver::new();
        let mut step = || {
            pipeline.step(
                &gravity,
                &params,
                &mut islands,
                &mut broad_phase,
                &mut narrow_phase,
                &mut bodies,
                &mut colliders,
                &mut impulse_joints,
                &mut multibody_joints,
                &mut ccd,
                None,
                &(),
                &(),
            );
        };
        step();
        let start = Instant::now();
        for _ in 0..steps {
            step();
        }
        runs.push(start.elapsed().as_secs_f64());
    }
    Timing::of(&runs).expect("at least one run")
}

/// Rows for `bunnies.toml` and (unless `quick`) `avalanche.toml`.
pub fn run(samples: usize, quick: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    let scenes = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/scenes");
    let cache = std::env::temp_dir().join(format!("pellet-bench-bodies-{}", std::process::id()));
    let gpu = Gpu::new(BackendChoice::Auto).ok().map(Arc::new);
    let samples = samples.clamp(1, 3);
    // (scene, CPU steps, GPU steps, rapier steps; 0: rapier not run)
    // rapier3d is not run on the avalanche: building its 1 M ball colliders
    // took more than 23 GB of this machine's 24 GB before the first step.
    let cases: &[(&str, u32, u32, u32)] = if quick {
        &[("bunnies", 20, 5, 20)]
    } else {
        &[("bunnies", 200, 50, 30), ("avalanche", 10, 3, 0)]
    };
    for &(name, cpu_steps, gpu_steps, rapier_steps) in cases {
        let setup = match load_setup_cached(
            &scenes.join(format!("{name}.toml")),
            GridMode::Auto,
            Some(cache.clone()),
        ) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("bench: {name}: {e}");
                continue;
            }
        };
        let free = without_bodies(&setup);
        let n = setup.particles.len();
        let b = setup.bodies.len();
        eprintln!("bench: bodies {name} ({n} particles, {b} bodies): rapier3d");
        // One sample: rapier3d takes seconds per step on these scenes.
        let peer = (rapier_steps > 0).then(|| rapier(&setup, rapier_steps, 1));
        let peer_per_step = peer.as_ref().map(|p| p.median_s / f64::from(rapier_steps));
        for (path, steps, g) in [
            ("CPU backend", cpu_steps, None),
            ("GPU path", gpu_steps, gpu.as_ref()),
        ] {
            if path == "GPU path" && g.is_none() {
                continue;
            }
            eprintln!("bench: bodies {name}: {path}");
            let (with, without) = match (
                pellet(&setup, g, steps, samples),
                pellet(&free, g, steps, samples),
            ) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => {
                    eprintln!("bench: {name} {path}: {e}");
                    continue;
                }
            };
            let per_step = with.median_s / f64::from(steps);
            let free_per_step = without.median_s / f64::from(steps);
            // Scale the peer to the same number of steps for the ratio.
            let scaled = peer.as_ref().map(|peer| Timing {
                median_s: peer.median_s / f64::from(rapier_steps) * f64::from(steps),
                min_s: peer.min_s / f64::from(rapier_steps) * f64::from(steps),
                max_s: peer.max_s / f64::from(rapier_steps) * f64::from(steps),
                samples: peer.samples,
            });
            let peer_note = match peer_per_step {
                Some(t) => format!("rapier3d {:.2} ms/step over {rapier_steps} steps", t * 1e3),
                None => "rapier3d not run: its 1 M ball colliders exhausted this machine's 24 GB before the first step".into(),
            };
            rows.push(Row {
                group: "rigid bodies",
                name: format!("{name}, {path}"),
                workload: format!("{n} particles in all, {b} bodies, {steps} steps"),
                pellet: with,
                peer: "rapier3d 0.25, compound ball colliders (sleep and CCD off)".into(),
                peer_timing: scaled,
                notes: format!(
                    "{:.2} ms/step with bodies, {:.2} ms/step with the same particles free (bodies cost {:+.0} %); {peer_note}",
                    per_step * 1e3,
                    free_per_step * 1e3,
                    (per_step / free_per_step - 1.0) * 100.0,
                ),
            });
        }
    }
    let _ = std::fs::remove_dir_all(&cache);
    rows
}
