//! Rigid bodies made of particles: physics checks on the CPU twin, GPU
//! parity of the body kernels, and the bunny's mass properties end to end.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use pellet_bake::mesh::export::to_glb;
use pellet_bake::mesh::shapes::cuboid;
use pellet_formats::Scene;
use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::sim::bodies::MeshBaker;
use pellet_player::sim::cpu::CpuSim;
use pellet_player::sim::gpu::GpuSim;
use pellet_player::sim::stages::bodies::{BodyGpu, rotate_inv};
use pellet_player::sim::{ForceKind, SimOptions, SimSetup, Simulation};

/// Writes a box mesh `size` (centred on the origin) as `box.glb` in `dir`.
fn box_mesh(dir: &Path, size: [f32; 3]) {
    let h = size.map(|s| 0.5 * s);
    let mesh = cuboid([-h[0], -h[1], -h[2]], h);
    std::fs::write(dir.join("box.glb"), to_glb(&mesh)).unwrap();
}

fn setup_from(dir: &Path, toml: &str) -> SimSetup {
    let path = dir.join("scene.toml");
    std::fs::write(&path, toml).unwrap();
    let scene = Scene::load(&path).unwrap();
    let mut baker = MeshBaker::new(Some(dir.join("cache")));
    SimSetup::from_scene_with_bodies(&scene, dir, SimOptions::default(), &mut baker).unwrap()
}

fn body(sim: &Simulation) -> BodyGpu {
    sim.bodies().unwrap()[0]
}

fn norm(v: [f32; 3]) -> f32 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

#[test]
fn free_body_conserves_angular_momentum_and_flips_about_the_intermediate_axis() {
    let dir = tempfile::tempdir().unwrap();
    // 40 x 80 x 160 mm: three distinct moments, y the intermediate axis.
    box_mesh(dir.path(), [0.04, 0.08, 0.16]);
    let s = setup_from(
        dir.path(),
        "[simulation]\ngravity = [0, 0, 0]\ntime_step = 0.0005\n[domain]\nmin = [-5, -5, -5]\nmax = [5, 5, 5]\nwalls = false\n\
         [[bodies]]\nmesh = \"box.glb\"\nparticle_radius = 0.005\nangular_velocity = [0.01, 4.0, 0.01]\n",
    );
    assert_eq!(s.bodies.len(), 1);
    assert_eq!(s.particles.len(), 4 * 8 * 16);
    let mut sim = Simulation::cpu(&s);
    let b0 = body(&sim);
    let l0 = [
        b0.angular_momentum[0],
        b0.angular_momentum[1],
        b0.angular_momentum[2],
    ];
    let energy = |b: &BodyGpu| {
        0.5 * (b.omega[0] * b.angular_momentum[0]
            + b.omega[1] * b.angular_momentum[1]
            + b.omega[2] * b.angular_momentum[2])
    };
    let e0 = energy(&b0);
    let mut flipped = false;
    for _ in 0..200 {
        sim.advance(50).unwrap();
        let b = body(&sim);
        let l = [
            b.angular_momentum[0],
            b.angular_momentum[1],
            b.angular_momentum[2],
        ];
        let drift = norm([l[0] - l0[0], l[1] - l0[1], l[2] - l0[2]]) / norm(l0);
        assert!(
            drift < 1e-4,
            "angular momentum drift {drift} at step {}",
            sim.steps()
        );
        let e = energy(&b);
        assert!(
            ((e - e0) / e0).abs() < 1e-2,
            "rotational energy {e} vs {e0}"
        );
        // Body-frame angular velocity about the intermediate axis changes sign.
        let wb = rotate_inv(b.orientation, [b.omega[0], b.omega[1], b.omega[2]]);
        if wb[1] < -0.5 * 4.0 {
            flipped = true;
        }
    }
    assert_eq!(sim.steps(), 10_000);
    assert!(flipped, "no flip about the intermediate axis in 5 s");
}

#[test]
fn body_dropped_on_the_floor_comes_to_rest_without_sinking() {
    let dir = tempfile::tempdir().unwrap();
    box_mesh(dir.path(), [0.1, 0.1, 0.1]);
    let r = 0.005f32;
    let s = setup_from(
        dir.path(),
        "[simulation]\ngravity = [0, -9.81, 0]\n[domain]\nmin = [-0.5, 0, -0.5]\nmax = [0.5, 1, 0.5]\n\
         [materials.default]\nrestitution = 0.3\nfriction = 0.5\nstiffness = 20000\n\
         [[bodies]]\nmesh = \"box.glb\"\nparticle_radius = 0.005\nposition = [0, 0.08, 0]\n",
    );
    assert_eq!(s.particles.len(), 1000);
    let mut sim = Simulation::cpu(&s);
    let steps_per_second = (1.0 / s.dt) as u32;
    sim.advance(steps_per_second).unwrap();
    let mut worst = 0.0f32;
    // Another 0.2 s: at rest, no jitter, no sinking.
    for _ in 0..20 {
        sim.advance(steps_per_second / 100).unwrap();
        let b = body(&sim);
        assert!(
            norm([b.velocity[0], b.velocity[1], b.velocity[2]]) < 2e-3,
            "moving: {b:?}"
        );
        assert!(
            norm([b.omega[0], b.omega[1], b.omega[2]]) < 2e-2,
            "spinning: {b:?}"
        );
        let st = sim.host_state().unwrap();
        let lowest = st.pos.iter().map(|p| p[1]).fold(f32::INFINITY, f32::min);
        worst = worst.max(r - lowest);
    }
    assert!(
        worst < 0.1 * r,
        "penetration {worst} m, more than 10% of the radius"
    );
}

/// How far a 6 cm cube slides in 0.5 s on a floor tilted by `degrees`
/// (gravity turned instead of the floor), friction 0.5.
fn slide(degrees: f32) -> f32 {
    let dir = tempfile::tempdir().unwrap();
    box_mesh(dir.path(), [0.06, 0.06, 0.06]);
    let t = degrees.to_radians();
    let (gx, gy) = (9.81 * t.sin(), -9.81 * t.cos());
    let s = setup_from(
        dir.path(),
        &format!(
            "[simulation]\ngravity = [{gx}, {gy}, 0]\n[domain]\nmin = [-1, 0, -1]\nmax = [1, 1, 1]\n\
             [materials.default]\nrestitution = 0.3\nfriction = 0.5\nstiffness = 20000\n\
             [[bodies]]\nmesh = \"box.glb\"\nparticle_radius = 0.005\nposition = [0, 0.0305, 0]\n"
        ),
    );
    let mut sim = Simulation::cpu(&s);
    // Land and settle first with the same gravity (the landing itself slips
    // a few mm: contacts start without tangential history), then measure.
    sim.advance((0.3 / s.dt) as u32).unwrap();
    let x0 = body(&sim).position[0];
    sim.advance((0.5 / s.dt) as u32).unwrap();
    body(&sim).position[0] - x0
}

#[test]
fn cube_on_an_incline_sticks_below_the_friction_angle_and_slides_above() {
    // atan(0.5) = 26.57 degrees.
    let below = slide(24.6);
    let above = slide(28.5);
    assert!(below.abs() < 1e-3, "slid {below} m at 24.6 degrees");
    assert!(above > 0.02, "slid only {above} m at 28.5 degrees");
}

#[test]
fn baked_bunny_keeps_its_mass_and_centre_of_mass() {
    let dir = tempfile::tempdir().unwrap();
    let mesh = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/meshes/bunny.glb");
    std::fs::copy(&mesh, dir.path().join("bunny.glb")).unwrap();
    let toml = "[simulation]\ngravity = [0, 0, 0]\n[domain]\nmin = [-30, -30, -30]\nmax = [30, 30, 30]\n\
                [[bodies]]\nmesh = \"bunny.glb\"\nparticle_radius = 0.1\nposition = [0.1, 0.2, 0.3]\nrotation = [0, 90, 0]\nmass = 2.5\n";
    let s = setup_from(dir.path(), toml);
    let b = s.bodies[0];
    let n = s.particles.len();
    let mass: f64 = s.particles.vel.iter().map(|v| 1.0 / f64::from(v[3])).sum();
    assert!(
        (mass - 2.5).abs() < 1e-4 * 2.5,
        "particle masses sum to {mass}"
    );
    assert!((1.0 / b.position[3] - 2.5).abs() < 1e-5);
    // The body's centre is the particles' centre of mass.
    let mut c = [0.0f64; 3];
    for p in &s.particles.pos {
        for k in 0..3 {
            c[k] += f64::from(p[k]) / n as f64;
        }
    }
    for k in 0..3 {
        assert!(
            (c[k] - f64::from(b.position[k])).abs() < 1e-5,
            "axis {k}: {c:?} vs {b:?}"
        );
    }
    // And it survives a run and a snapshot.
    let mut sim = Simulation::cpu(&s);
    sim.advance(10).unwrap();
    let state = sim.snapshot().unwrap();
    assert_eq!(state.bodies.len(), 1);
    for k in 0..3 {
        assert!((state.bodies[0].position[k] - b.position[k]).abs() < 1e-6);
    }
    // A second setup comes from the cache, identical.
    let again = setup_from(dir.path(), toml);
    assert_eq!(again.particles, s.particles);
}

fn mixed_scene(dir: &Path) -> SimSetup {
    box_mesh(dir, [0.06, 0.04, 0.05]);
    setup_from(
        dir,
        "[simulation]\ngravity = [0, -9.81, 0]\nparticle_radius = 0.006\n[domain]\nmin = [-0.3, 0, -0.3]\nmax = [0.3, 0.6, 0.3]\n\
         [[particles]]\nregion = { min = [-0.25, 0.05, -0.25], max = [0.25, 0.2, 0.25] }\nspacing = 0.0125\njitter = 0.3\nseed = 2\n\
         [[bodies]]\nmesh = \"box.glb\"\nparticle_radius = 0.0025\nposition = [0, 0.3, 0]\nrotation = [10, 20, 30]\nangular_velocity = [1, 2, 3]\narray = { count = [3, 1, 3], spacing = [0.12, 0, 0.12] }\n\
         [[bodies]]\nmesh = \"box.glb\"\nparticle_radius = 0.005\nmotion = \"static\"\nposition = [0, 0.03, 0]\n\
         [[bodies]]\nmesh = \"box.glb\"\nparticle_radius = 0.005\nmotion = \"kinematic\"\nposition = [-0.2, 0.1, 0]\nvelocity = [0.5, 0, 0]\n",
    )
}

fn close(what: &str, a: &[[f32; 4]], b: &[[f32; 4]], tol: f32) {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        for k in 0..4 {
            let scale = x[k].abs().max(1.0);
            assert!(
                (x[k] - y[k]).abs() <= tol * scale,
                "{what}[{i}][{k}]: cpu {} gpu {}",
                x[k],
                y[k]
            );
        }
    }
}

#[test]
fn body_kernels_match_the_cpu_and_mixed_runs_are_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let s = mixed_scene(dir.path());
    assert_eq!(s.bodies.len(), 11);
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto).unwrap());

    // Stage by stage from identical inputs.
    let mut cpu = CpuSim::new(&s);
    let mut gs = GpuSim::sorting(gpu.clone(), &s).unwrap();
    cpu.sort(false);
    cpu.compute_forces(ForceKind::Prime);
    for _ in 0..3 {
        gs.upload(&cpu.state);
        gs.upload_bodies(&cpu.bodies, &cpu.body_force, &cpu.body_torque);
        cpu.sort(false);
        gs.stage_sort(false);
        assert_eq!(gs.download_inv_index().unwrap(), cpu.inv_index);
        cpu.compute_forces(ForceKind::Commit);
        gs.stage_forces(ForceKind::Commit);
        // Reduce from the CPU's forces so only the reduction is compared.
        gs.upload(&cpu.state);
        cpu.body_reduce();
        gs.stage_integrate("body_reduce");
        let (f, t) = gs.download_body_forces().unwrap();
        close("body force", &cpu.body_force, &f, 1e-4);
        close("body torque", &cpu.body_torque, &t, 1e-4);
        for k in ["body_end", "body_begin"] {
            gs.upload_bodies(&cpu.bodies, &cpu.body_force, &cpu.body_torque);
            if k == "body_end" {
                cpu.body_end();
            } else {
                cpu.body_begin();
            }
            gs.stage_integrate(k);
            let g: Vec<[f32; 4]> = gs
                .download_bodies()
                .unwrap()
                .iter()
                .flat_map(|b| {
                    [
                        b.position,
                        b.orientation,
                        b.momentum,
                        b.angular_momentum,
                        b.omega,
                        b.velocity,
                    ]
                })
                .collect();
            let c: Vec<[f32; 4]> = cpu
                .bodies
                .iter()
                .flat_map(|b| {
                    [
                        b.position,
                        b.orientation,
                        b.momentum,
                        b.angular_momentum,
                        b.omega,
                        b.velocity,
                    ]
                })
                .collect();
            close(k, &c, &g, 1e-5);
        }
        gs.upload(&cpu.state);
        gs.upload_bodies(&cpu.bodies, &cpu.body_force, &cpu.body_torque);
        cpu.body_particles();
        gs.stage_integrate("body_particles");
        let g = gs.download().unwrap();
        close("body particle positions", &cpu.state.pos, &g.pos, 1e-6);
        close("body particle velocities", &cpu.state.vel, &g.vel, 1e-5);
    }

    // Whole runs: bit-identical twice on each backend, static stays, kinematic moves.
    let run = |gpu: Option<&Arc<Gpu>>| {
        let mut sim = match gpu {
            Some(g) => Simulation::gpu(g.clone(), &s).unwrap(),
            None => Simulation::cpu(&s),
        };
        sim.advance(200).unwrap();
        (sim.host_state().unwrap(), sim.bodies().unwrap())
    };
    for g in [None, Some(&gpu)] {
        let (a, ab) = run(g);
        let (b, bb) = run(g);
        for (what, x, y) in [
            ("pos", &a.pos, &b.pos),
            ("vel", &a.vel, &b.vel),
            ("angvel", &a.angvel, &b.angvel),
            ("force", &a.force, &b.force),
            ("torque", &a.torque, &b.torque),
            ("local", &a.local, &b.local),
        ] {
            if let Some(i) = x.iter().zip(y.iter()).position(|(p, q)| p != q) {
                panic!(
                    "runs differ (gpu: {}): {what}[{i}] {:?} vs {:?}",
                    g.is_some(),
                    x[i],
                    y[i]
                );
            }
        }
        assert_eq!(a.meta, b.meta, "runs differ (gpu: {})", g.is_some());
        assert_eq!(
            a.hist_count,
            b.hist_count,
            "runs differ (gpu: {})",
            g.is_some()
        );
        let bits = |h: &[[f32; 4]]| {
            h.iter()
                .flat_map(|v| v.map(f32::to_bits))
                .collect::<Vec<_>>()
        };
        assert!(
            bits(&a.hist) == bits(&b.hist),
            "histories differ (gpu: {})",
            g.is_some()
        );
        assert_eq!(ab, bb);
        let st = &ab[9];
        assert_eq!(st.position, s.bodies[9].position, "the static body moved");
        let kin = &ab[10];
        let moved = kin.position[0] - s.bodies[10].position[0];
        assert!(
            (moved - 0.5 * 200.0 * s.dt as f32).abs() < 1e-4,
            "kinematic moved {moved}"
        );
    }
}

#[test]
fn hot_reload_carries_pose_and_momentum_into_a_rebaked_body() {
    let dir = tempfile::tempdir().unwrap();
    box_mesh(dir.path(), [0.06, 0.04, 0.05]);
    let scene = |radius: f32| {
        format!(
            "[simulation]\ngravity = [0, 0, 0]\n[domain]\nmin = [-1, -1, -1]\nmax = [1, 1, 1]\n\
             [[particles]]\nregion = {{ min = [0.5, 0.5, 0.5], max = [0.6, 0.6, 0.6] }}\nspacing = 0.03\n\
             [[bodies]]\nmesh = \"box.glb\"\nparticle_radius = {radius}\nvelocity = [0.3, 0, 0]\nangular_velocity = [0, 2, 1]\n"
        )
    };
    let old = setup_from(dir.path(), &scene(0.005));
    let mut sim = Simulation::cpu(&old);
    sim.advance(200).unwrap();
    let state = sim.snapshot().unwrap();
    let bodies = sim.bodies().unwrap();
    // The edit: the body re-baked at half the particle size.
    let mut new = setup_from(dir.path(), &scene(0.0025));
    assert!(new.particles.len() > old.particles.len());
    new.carry_state_from(&old, &state, &bodies);
    let (a, b) = (bodies[0], new.bodies[0]);
    assert_eq!(a.position[..3], b.position[..3]);
    assert_eq!(a.orientation, b.orientation);
    assert_eq!(a.momentum, b.momentum);
    assert_eq!(a.angular_momentum, b.angular_momentum);
    // Free particles kept their state; body particles follow the kept pose.
    assert_eq!(new.particles.pos[0][..3], state.positions[0]);
    let mut c = [0.0f64; 3];
    let mut m = 0.0f64;
    for k in 0..new.particles.len() {
        if new.particles.meta[k][2] == 0 {
            let w = 1.0 / f64::from(new.particles.vel[k][3]);
            m += w;
            for a in 0..3 {
                c[a] += w * f64::from(new.particles.pos[k][a]);
            }
        }
    }
    for a in 0..3 {
        assert!((c[a] / m - f64::from(b.position[a])).abs() < 1e-5);
    }
}

/// Rigid bodies stepped block by block (host integration, GPU forces in
/// blocks) follow the in-core CPU run: the bodies' particles get their
/// forces from several blocks and are summed on the host.
#[test]
fn mixed_scene_block_by_block_tracks_in_core() {
    use pellet_player::sim::blocks::budget_for_block;
    let dir = tempfile::tempdir().unwrap();
    let s = mixed_scene(dir.path());
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto).unwrap());
    let n = s.particles.len() as u64;
    let budget = budget_for_block(&s, n / 2);
    let mut blocks = Simulation::blocks(gpu, &s, budget).unwrap();
    let mut cpu = Simulation::cpu(&s);
    blocks.advance(200).unwrap();
    cpu.advance(200).unwrap();
    assert!(blocks.block_stats().unwrap().blocks > 1);
    let (bb, cb) = (blocks.bodies().unwrap(), cpu.bodies().unwrap());
    for (i, (x, y)) in bb.iter().zip(&cb).enumerate() {
        for k in 0..3 {
            assert!(
                (x.position[k] - y.position[k]).abs() < 1e-5,
                "body {i}: {:?} vs {:?}",
                x.position,
                y.position
            );
            assert!(
                (x.velocity[k] - y.velocity[k]).abs() < 1e-3,
                "body {i}: {:?} vs {:?}",
                x.velocity,
                y.velocity
            );
        }
    }
    // The dynamic bodies fall (at least half of free fall's speed).
    let free_fall = 9.81 * 200.0 * s.dt as f32;
    assert!(bb[0].velocity[1] < -0.5 * free_fall, "{:?}", bb[0].velocity);
}

/// Dynamic, static and kinematic bodies spread over the slabs of 2, 3 and 4
/// ranks (threads standing in for MPI processes): the particles and the
/// bodies are bit-identical to one rank's.
#[test]
fn bodies_across_rank_cuts_are_bit_identical_to_one_rank() {
    use pellet_player::sim::ranks::{RankedSim, ThreadComm};
    let dir = tempfile::tempdir().unwrap();
    let s = mixed_scene(dir.path());
    let bits = |st: &pellet_player::sim::HostState, b: &[BodyGpu]| {
        let st = st.by_id();
        let mut v: Vec<u32> = [&st.pos, &st.vel, &st.angvel]
            .iter()
            .flat_map(|v| v.iter().flat_map(|x| x.map(f32::to_bits)))
            .collect();
        for body in b {
            v.extend(bytemuck::bytes_of(body).iter().map(|&x| u32::from(x)));
        }
        v
    };
    let mut one = Simulation::cpu(&s);
    one.advance(200).unwrap();
    let want = bits(&one.host_state().unwrap(), &one.bodies().unwrap());
    for ranks in [2, 3, 4] {
        let comms = ThreadComm::group(ranks);
        let got: Vec<Vec<u32>> = std::thread::scope(|scope| {
            let handles: Vec<_> = comms
                .into_iter()
                .map(|c| {
                    let s = &s;
                    scope.spawn(move || {
                        let mut sim = RankedSim::new(s, Box::new(c)).unwrap();
                        sim.advance(120).unwrap();
                        sim.advance(80).unwrap();
                        // Bodies own by rank: some rank owns particles of several.
                        assert!(
                            sim.plan()
                                .rank_slabs
                                .iter()
                                .filter(|r| !r.is_empty())
                                .count()
                                == ranks
                        );
                        bits(&sim.gather_state().unwrap(), sim.bodies())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (r, g) in got.iter().enumerate() {
            assert!(*g == want, "rank {r} of {ranks} differs from one rank");
        }
    }
}
