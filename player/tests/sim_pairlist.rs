//! The CPU engine's neighbour lists (`sim::pairlist`): no contact is missed
//! while every particle stays within half the skin of where the list was
//! built, contact history survives a rebuild, runs are bit-identical on any
//! number of threads, and the engine agrees with the GPU kernels' CPU twin to
//! rounding.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;

use common::{P, box_scene, lattice, random_particles, setup};
use pellet_formats::scene::Rng;
use pellet_player::sim::cpu::CpuSim;
use pellet_player::sim::pairlist::PairListSim;
use pellet_player::sim::{ForceKind, GridMode, HostState, SimSetup, Simulation};

fn bits(s: &HostState) -> Vec<u32> {
    let s = s.by_id();
    [&s.pos, &s.vel, &s.angvel, &s.force, &s.torque]
        .iter()
        .flat_map(|v| v.iter().flat_map(|x| x.map(f32::to_bits)))
        .collect()
}

/// Every touching pair (by brute force) and every touching wall is in the lists.
fn assert_lists_complete(sim: &PairListSim, what: &str) {
    let s = &sim.state;
    let listed: HashSet<(usize, usize)> = (0..s.len())
        .flat_map(|i| {
            (sim.list.row[i]..sim.list.row[i + 1])
                .map(move |k| (i, sim.list.partner[k as usize] as usize))
        })
        .collect();
    let mut touching = 0;
    for i in 0..s.len() {
        for j in i + 1..s.len() {
            let (a, b) = (s.pos[i], s.pos[j]);
            let d2: f32 = (0..3).map(|k| (a[k] - b[k]) * (a[k] - b[k])).sum();
            if d2 < (a[3] + b[3]) * (a[3] + b[3]) {
                touching += 1;
                assert!(listed.contains(&(i, j)), "{what}: pair {i}-{j} missed");
            }
        }
        let walls: HashSet<u32> = (sim.wall_list.row[i]..sim.wall_list.row[i + 1])
            .map(|k| sim.wall_list.wall[k as usize])
            .collect();
        for (w, wall) in sim.walls.iter().enumerate() {
            let p = s.pos[i];
            let dist: f32 = (0..3).map(|k| wall.normal[k] * p[k]).sum::<f32>() - wall.offset;
            if dist < p[3] {
                assert!(
                    walls.contains(&(w as u32)),
                    "{what}: particle {i} wall {w} missed"
                );
            }
        }
    }
    assert!(touching > 0, "{what}: the test needs contacts");
}

#[test]
fn no_contact_is_missed_within_half_the_skin() {
    let dir = tempfile::tempdir().unwrap();
    // Mixed radii, packed close, against the walls of a small box.
    let mut ps: Vec<P> = random_particles(1500, 0.006, 0.0, 0.2, 0.0, 3);
    let mut rng = Rng::new(11);
    for p in &mut ps {
        p.2 = rng.range(0.003, 0.006);
    }
    let s = setup(
        dir.path(),
        &box_scene(0.0, 0.2, 0.0, "", "skin = 0.004", true),
        &ps,
        GridMode::Auto,
    );
    let mut sim = PairListSim::new(&s);
    sim.prime();
    let built: Vec<[f32; 4]> = sim.state.pos.clone();
    let half = 0.5 * sim.skin;
    for round in 0..6 {
        // Every particle moved to just under half the skin from where the
        // list was built, in a random direction (pairs close by up to a skin).
        for (p, b) in sim.state.pos.iter_mut().zip(&built) {
            let d = [
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
                rng.range(-1.0, 1.0),
            ];
            let len = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt().max(1e-6);
            for k in 0..3 {
                p[k] = b[k] + d[k] / len * half * 0.999;
            }
        }
        sim.update_max_displacement();
        assert!(
            !sim.needs_rebuild(),
            "round {round}: {}",
            sim.max_displacement()
        );
        assert_lists_complete(&sim, &format!("round {round}"));
    }
    // A little further and the list is rebuilt.
    sim.state.pos[7][0] = built[7][0] + half * 1.01;
    sim.update_max_displacement();
    assert!(sim.needs_rebuild());
    let before = sim.rebuilds;
    sim.compute_forces(ForceKind::Commit);
    sim.rebuild();
    assert_eq!(sim.rebuilds, before + 1);
    assert_lists_complete(&sim, "after the rebuild");
}

/// Two spheres stacked on the floor, sliding over each other and over the
/// floor, with friction: tangential springs in play at every contact.
fn sliding_stack(dir: &std::path::Path, skin: f32) -> SimSetup {
    let r = 0.01;
    setup(
        dir,
        &box_scene(
            0.0,
            0.5,
            -9.81,
            "stiffness = 20000\nfriction = 0.8",
            &format!("skin = {skin}\ntime_step = 2e-5"),
            true,
        ),
        &[
            ([0.25, r * 0.999, 0.25], [0.02, 0.0, 0.0], r),
            ([0.25, 3.0 * r * 0.998, 0.25], [-0.05, 0.0, 0.01], r),
        ],
        GridMode::Auto,
    )
}

#[test]
fn contact_history_is_carried_across_a_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let run = |skin: f32, forced_rebuild: bool, drop_history: bool| {
        let mut sim = PairListSim::new(&sliding_stack(dir.path(), skin));
        sim.prime();
        sim.advance(400);
        if forced_rebuild {
            sim.rebuild();
            if drop_history {
                sim.list.spring.iter_mut().flatten().for_each(|x| *x = 0.0);
                sim.wall_list.spring.iter_mut().for_each(|x| *x = [0.0; 3]);
            }
        }
        sim.advance(400);
        (sim.state.by_id(), sim.rebuilds)
    };
    // Default skin, one forced rebuild mid-slide, against a run that
    // rebuilds every step (skin 0).
    let (kept, builds) = run(0.002, true, false);
    let (every_step, every_builds) = run(0.0, false, false);
    assert!(builds >= 2 && every_builds > 700, "{builds} {every_builds}");
    let diff = |a: &HostState, b: &HostState| {
        a.vel
            .iter()
            .zip(&b.vel)
            .flat_map(|(x, y)| (0..3).map(move |k| (x[k] - y[k]).abs()))
            .fold(0.0f32, f32::max)
    };
    let d = diff(&kept, &every_step);
    assert!(d < 1e-6, "velocities differ by {d}");
    // Dropping the springs at the rebuild changes the motion: the test
    // sees history.
    let (dropped, _) = run(0.002, true, true);
    let lost = diff(&dropped, &every_step);
    assert!(
        lost > 100.0 * d.max(1e-8),
        "dropping history moved velocities by only {lost}"
    );
}

#[test]
fn runs_are_bit_identical_on_one_two_and_three_threads() {
    let dir = tempfile::tempdir().unwrap();
    // Enough particles that every pass runs in parallel, falling into a
    // pile (rebuilds, walls, contacts). One thread takes the slabs in one
    // sweep, more in an even and an odd phase: the same sums either way.
    let s = setup(
        dir.path(),
        &box_scene(0.0, 0.4, -9.81, "friction = 0.5", "", true),
        &lattice(18, 0.005, 0.0105, 0.01, 0.001, 0.5, 7),
        GridMode::Auto,
    );
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut sim = Simulation::cpu(&s);
            sim.advance(300).unwrap();
            let stats = sim.stats().unwrap();
            (
                bits(&sim.host_state().unwrap()),
                stats.contacts,
                stats.rebuilds,
            )
        })
    };
    let one = run(1);
    assert!(
        one.1 > 0 && one.2 > 1,
        "contacts {} rebuilds {}",
        one.1,
        one.2
    );
    assert_eq!(one, run(1), "reruns on one thread");
    assert_eq!(one, run(2), "one vs two threads");
    assert_eq!(one, run(3), "one vs three threads");
}

#[test]
fn the_engine_agrees_with_the_kernel_twin_to_rounding() {
    let dir = tempfile::tempdir().unwrap();
    for extra in ["", "integrator = \"rk2\""] {
        let s = setup(
            dir.path(),
            &box_scene(0.0, 0.3, -9.81, "friction = 0.5", extra, true),
            &lattice(10, 0.01, 0.0199, 0.02, 0.0005, 0.3, 5),
            GridMode::Auto,
        );
        let mut engine = Simulation::cpu(&s);
        engine.advance(5).unwrap();
        let mut twin = CpuSim::new(&s);
        twin.prime();
        twin.advance(5);
        let (a, b) = (engine.host_state().unwrap().by_id(), twin.state.by_id());
        for i in 0..a.len() {
            for k in 0..3 {
                assert!((a.pos[i][k] - b.pos[i][k]).abs() < 1e-7, "{extra} pos {i}");
                assert!((a.vel[i][k] - b.vel[i][k]).abs() < 1e-6, "{extra} vel {i}");
                assert!(
                    (a.angvel[i][k] - b.angvel[i][k]).abs() < 1e-3,
                    "{extra} spin {i}"
                );
            }
        }
        let stats = engine.stats().unwrap();
        assert!(stats.contacts > 1000, "{extra}: {stats:?}");
    }
}

/// The viewer's live controls on the CPU engine: new gravity and materials
/// take effect at the next step (the list rebuilds with the new constants).
#[test]
fn live_parameters_take_effect_on_the_cpu_engine() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(0.0, 1.0, -9.81, "friction = 0.5", "", true),
        &[([0.5, 0.5, 0.5], [0.0; 3], 0.01)],
        GridMode::Auto,
    );
    let mut sim = PairListSim::new(&s);
    sim.prime();
    let built = sim.rebuilds;
    let mut params = s.params();
    params.gravity = [0.0, 9.81, 0.0];
    let mut pairs = s.pairs.clone();
    pairs[0].kn *= 2.0;
    sim.update_parameters(&params, &pairs);
    sim.advance(100);
    assert!(sim.state.vel[0][1] > 0.0, "{:?}", sim.state.vel[0]);
    assert_eq!(sim.rebuilds, built + 1, "the list rebuilt once");
    assert_eq!(sim.pairs[0].kn, pairs[0].kn);
}
