//! The GPU pair-list path against its CPU twin (`stages/pairs.rs`), stage
//! by stage from identical inputs; bit-identical reruns; the grow-and-resume
//! path; no contact missed against brute force between rebuilds.
//!
//! Needs a GPU adapter (lavapipe in CI): fails, not skips, without one.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{P, box_scene, lattice, random_particles, setup};
use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::sim::cpu::CpuSim;
use pellet_player::sim::gpu::GpuSim;
use pellet_player::sim::stages::pairs::ListBuffers;
use pellet_player::sim::{Counter, ForceKind, GridMode, SimSetup};

fn gpu() -> Arc<Gpu> {
    Arc::new(Gpu::new(BackendChoice::Auto).expect("a GPU adapter (install mesa-vulkan-drivers)"))
}

fn close(what: &str, a: &[[f32; 4]], b: &[[f32; 4]], abs: f32, rel: f32) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let scale = a
        .iter()
        .flat_map(|v| v[..3].iter())
        .fold(0.0f32, |m, x| m.max(x.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        for k in 0..3 {
            let d = (x[k] - y[k]).abs();
            assert!(
                d <= abs + rel * scale.max(x[k].abs()),
                "{what}[{i}][{k}]: cpu {} gpu {} (scale {scale})",
                x[k],
                y[k]
            );
        }
    }
}

/// The list structure exactly, the springs and pair forces to rounding.
fn compare_lists(what: &str, cpu: &ListBuffers, gpu: &ListBuffers) {
    assert_eq!(gpu.row_count, cpu.row_count, "{what}: row counts");
    assert_eq!(gpu.pair_start, cpu.pair_start, "{what}: row starts");
    assert_eq!(gpu.low_start, cpu.low_start, "{what}: partner starts");
    assert_eq!(gpu.pair_i, cpu.pair_i, "{what}: owners");
    assert_eq!(gpu.pair_j, cpu.pair_j, "{what}: partners");
    assert_eq!(gpu.low_index, cpu.low_index, "{what}: partner entries");
    assert_eq!(gpu.old_start, cpu.old_start, "{what}: old rows");
    assert_eq!(gpu.rebuilds, cpu.rebuilds, "{what}: rebuilds");
    let ids = |l: &ListBuffers| {
        l.pair_hist
            .iter()
            .map(|h| h[3].to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(gpu), ids(cpu), "{what}: partner ids");
    assert_eq!(gpu.pos_ref, cpu.pos_ref, "{what}: build positions");
    assert_eq!(gpu.wall_mask, cpu.wall_mask, "{what}: walls within reach");
    let damping = |l: &ListBuffers| {
        l.pair_const
            .iter()
            .map(|k| [k[3], 0.0, 0.0, 0.0])
            .collect::<Vec<_>>()
    };
    close(
        &format!("{what}: pair constants"),
        &cpu.pair_const,
        &gpu.pair_const,
        0.0,
        1e-6,
    );
    close(
        &format!("{what}: pair damping"),
        &damping(cpu),
        &damping(gpu),
        0.0,
        1e-6,
    );
    close(
        &format!("{what}: springs"),
        &cpu.pair_hist,
        &gpu.pair_hist,
        1e-9,
        1e-4,
    );
    let fscale = cpu
        .pair_force
        .iter()
        .flat_map(|f| f[..3].iter())
        .fold(0.0f32, |m, x| m.max(x.abs()));
    close(
        &format!("{what}: pair forces"),
        &cpu.pair_force,
        &gpu.pair_force,
        1e-6 * fscale,
        1e-4,
    );
    close(
        &format!("{what}: pair torques"),
        &cpu.pair_torque,
        &gpu.pair_torque,
        1e-6 * fscale,
        1e-3,
    );
    close(
        &format!("{what}: wall springs"),
        &cpu.wall_hist,
        &gpu.wall_hist,
        1e-9,
        1e-4,
    );
    // Rolling resistance: the stored torques and each pair's torque.
    assert_eq!(
        gpu.pair_roll.len(),
        cpu.pair_roll.len(),
        "{what}: stored rolling torques"
    );
    assert_eq!(
        gpu.pair_roll_m.len(),
        cpu.pair_roll_m.len(),
        "{what}: rolling torques"
    );
    assert_eq!(
        gpu.wall_roll.len(),
        cpu.wall_roll.len(),
        "{what}: wall rolling torques"
    );
    let mscale = cpu
        .pair_roll_m
        .iter()
        .chain(&cpu.pair_roll)
        .chain(&cpu.wall_roll)
        .flat_map(|m| m[..3].iter())
        .fold(0.0f32, |m, x| m.max(x.abs()));
    for (name, c, g) in [
        ("stored rolling torques", &cpu.pair_roll, &gpu.pair_roll),
        ("rolling torques", &cpu.pair_roll_m, &gpu.pair_roll_m),
        ("wall rolling torques", &cpu.wall_roll, &gpu.wall_roll),
    ] {
        close(&format!("{what}: {name}"), c, g, 1e-5 * mscale, 1e-3);
    }
}

fn compare_forces(what: &str, cpu: &CpuSim, gs: &GpuSim) {
    let g = gs.download().unwrap();
    let fscale = cpu
        .state
        .force
        .iter()
        .flat_map(|f| f[..3].iter())
        .fold(0.0f32, |m, x| m.max(x.abs()));
    close(
        &format!("{what}: force"),
        &cpu.state.force,
        &g.force,
        1e-6 * fscale,
        1e-4,
    );
    close(
        &format!("{what}: torque"),
        &cpu.state.torque,
        &g.torque,
        1e-6 * fscale,
        1e-3,
    );
    let c = gs.counters().unwrap();
    assert_eq!(c[0], cpu.counter(Counter::Contacts), "{what}: contacts");
    assert_eq!(
        c[1],
        cpu.counter(Counter::WallContacts),
        "{what}: wall contacts"
    );
}

/// Every stage of the pair-list path on both backends from the twin's state.
fn compare_stages(setup: &SimSetup, rk2: bool) {
    let list_setup = setup.for_pair_list().unwrap();
    let mut cpu = CpuSim::new(&list_setup);
    let mut list = ListBuffers::new(list_setup.particles.len(), list_setup.walls.len());
    let mut gs = GpuSim::new(gpu(), setup).unwrap();

    // The first build and forces, each from the input order.
    cpu.pair_prime(&mut list);
    gs.prime().unwrap();
    assert_eq!(
        gs.download().unwrap().pos,
        cpu.state.pos,
        "prime: sorted positions"
    );
    compare_lists("prime", &list, &gs.download_list().unwrap().unwrap());
    compare_forces("prime", &cpu, &gs);
    assert!(list.pairs() > 0, "the scene has listed pairs");

    for round in 0..4 {
        // Move on a few steps on the twin, then give both its state; every
        // other round forces a rebuild (with springs to carry).
        cpu.pair_advance(&mut list, 7);
        list.rebuild = round % 2 == 0;
        let kind = if rk2 && round == 1 {
            ForceKind::Trial
        } else {
            ForceKind::Commit
        };
        let second = rk2 && kind == ForceKind::Commit;
        if second {
            cpu.pos0.clone_from(&cpu.state.pos);
            cpu.vel0.clone_from(&cpu.state.vel);
            cpu.angvel0.clone_from(&cpu.state.angvel);
        }
        gs.upload(&cpu.state);
        gs.upload_list(&list).unwrap();
        gs.set_step(cpu.step);
        gs.clear_step_counters();
        cpu.clear_step_counters();
        let what = format!("round {round} ({kind:?}, rebuild {})", list.rebuild);
        cpu.pair_evaluate(&mut list, kind, second);
        gs.stage_evaluation(kind, second).unwrap();
        let g = gs.download().unwrap();
        assert_eq!(
            g.pos, cpu.state.pos,
            "{what}: positions (reordered at a rebuild)"
        );
        assert_eq!(g.meta, cpu.state.meta, "{what}: ids");
        compare_lists(&what, &list, &gs.download_list().unwrap().unwrap());
        compare_forces(&what, &cpu, &gs);

        // The force kernels alone, from the twin's list; the pair forces
        // without the count give the same springs and forces, and no count.
        for name in ["pair_forces", "pair_forces_uncounted", "particle_forces"] {
            gs.upload(&cpu.state);
            gs.upload_list(&list).unwrap();
            gs.clear_step_counters();
            cpu.clear_step_counters();
            if name == "particle_forces" {
                cpu.particle_forces(&mut list, kind);
            } else {
                cpu.pair_forces(&mut list, kind);
            }
            gs.stage_list_kernel(name, kind);
            if name != "particle_forces" {
                let counted = if name == "pair_forces" {
                    cpu.counter(Counter::Contacts)
                } else {
                    0
                };
                assert_eq!(
                    gs.counters().unwrap()[0],
                    counted,
                    "{what}: {name} contacts"
                );
            }
            compare_lists(
                &format!("{what}: {name}"),
                &list,
                &gs.download_list().unwrap().unwrap(),
            );
            if name == "particle_forces" {
                compare_forces(&format!("{what}: {name}"), &cpu, &gs);
            }
        }
    }
}

fn edge_and_random(n: usize) -> Vec<P> {
    let mut ps = random_particles(n, 0.01, 0.0, 0.3, 0.5, 7);
    ps.push(([0.3, 0.3, 0.3], [0.1, 0.0, 0.0], 0.01));
    ps.push(([0.0, 0.0, 0.0], [0.0, -0.1, 0.0], 0.01));
    ps.push(([0.02, 0.04, 0.06], [0.0; 3], 0.01));
    ps
}

#[test]
fn pair_list_stages_match_the_cpu_twin() {
    let dir = tempfile::tempdir().unwrap();
    // 1000 + 3 particles (not a multiple of the workgroup size), overlaps,
    // walls, friction: springs to carry across rebuilds.
    let s = setup(
        dir.path(),
        &box_scene(0.0, 0.3, -9.81, "friction = 0.5", "", true),
        &edge_and_random(1000),
        GridMode::Dense,
    );
    compare_stages(&s, false);
}

#[test]
fn pair_list_stages_match_the_cpu_twin_hashed_rk2() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(
            0.0,
            0.3,
            -9.81,
            "friction = 0.4",
            "integrator = \"rk2\"",
            true,
        ),
        &edge_and_random(600),
        GridMode::Hashed,
    );
    assert!(s.grid.hashed);
    compare_stages(&s, true);
}

/// Hertz-Mindlin materials, two radii (so the pairs' effective radii and
/// masses differ): the same stages against the twin.
#[test]
fn pair_list_stages_match_the_cpu_twin_hertz() {
    let dir = tempfile::tempdir().unwrap();
    let mut ps = edge_and_random(600);
    for (k, p) in ps.iter_mut().enumerate() {
        if k % 2 == 1 {
            p.2 = 0.007;
        }
    }
    let s = setup(
        dir.path(),
        &box_scene(0.0, 0.3, -9.81, HERTZ_MATERIAL, "", true),
        &ps,
        GridMode::Dense,
    );
    assert_eq!(s.contact_model, pellet_player::sim::stages::common::HERTZ);
    compare_stages(&s, false);
}

/// Rolling resistance (both laws, Hooke and Hertz): the same stages
/// against the twin, with the stored torques carried across rebuilds.
#[test]
fn pair_list_stages_match_the_cpu_twin_rolling() {
    for (model, material) in [
        (
            "epsd2",
            "friction = 0.5\nrolling_friction = 0.3".to_string(),
        ),
        (
            "cdt",
            "friction = 0.5\nrolling_friction = 0.3\nrolling_model = \"cdt\"".to_string(),
        ),
        (
            "epsd2 hertz",
            format!("{HERTZ_MATERIAL}\nrolling_friction = 0.2"),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let s = setup(
            dir.path(),
            &box_scene(0.0, 0.3, -9.81, &material, "", true),
            &edge_and_random(500),
            GridMode::Dense,
        );
        assert_ne!(
            s.rolling_model,
            pellet_player::sim::stages::common::ROLL_NONE,
            "{model}"
        );
        compare_stages(&s, false);
    }
}

/// A separating pair whose tangential spring is already clear still clears
/// its stored rolling torque (epsd2): a head-on contact with relative spin
/// leaves exactly that. The pair kernels skip rewriting a clear tangential
/// spring; that skip must not cover the rolling one (it once did).
#[test]
fn a_separating_pair_clears_its_rolling_spring_when_its_tangential_one_is_clear() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(
            0.0,
            0.3,
            -9.81,
            "friction = 0.5\nrolling_friction = 0.3",
            "",
            true,
        ),
        &edge_and_random(500),
        GridMode::Dense,
    );
    assert_eq!(
        s.rolling_model,
        pellet_player::sim::stages::common::ROLL_EPSD2
    );
    let list_setup = s.for_pair_list().unwrap();
    let mut cpu = CpuSim::new(&list_setup);
    let mut list = ListBuffers::new(list_setup.particles.len(), list_setup.walls.len());
    let mut gs = GpuSim::new(gpu(), &s).unwrap();
    cpu.pair_prime(&mut list);
    gs.prime().unwrap();
    cpu.pair_advance(&mut list, 5);
    list.rebuild = false;

    // Every listed pair apart: tangential spring clear, rolling one not.
    let pos = &cpu.state.pos;
    let mut apart = Vec::new();
    for p in 0..list.pairs() {
        let (i, j) = (list.pair_i[p] as usize, list.pair_j[p] as usize);
        let d: Vec<f32> = (0..3).map(|k| pos[i][k] - pos[j][k]).collect();
        let rsum = pos[i][3] + pos[j][3];
        if d.iter().map(|x| x * x).sum::<f32>() >= rsum * rsum {
            list.pair_hist[p][..3].fill(0.0);
            list.pair_roll[p] = [1e-7, -2e-7, 3e-7, 0.0];
            apart.push(p);
        }
    }
    assert!(apart.len() > 10, "{} separating pairs", apart.len());

    for name in ["pair_forces", "pair_forces_uncounted"] {
        let mut l = list.clone();
        gs.upload(&cpu.state);
        gs.upload_list(&l).unwrap();
        gs.stage_list_kernel(name, ForceKind::Commit);
        cpu.pair_forces(&mut l, ForceKind::Commit);
        let g = gs.download_list().unwrap().unwrap();
        for &p in &apart {
            assert_eq!(l.pair_roll[p], [0.0; 4], "twin, pair {p}");
            assert_eq!(g.pair_roll[p], [0.0; 4], "{name}, pair {p}");
            assert_eq!(g.pair_hist[p][..3], [0.0; 3], "{name}, pair {p}");
        }
        compare_lists(name, &l, &g);
    }
}

#[test]
fn whole_rolling_runs_track_the_twin() {
    whole_runs_track_the_twin("", "friction = 0.5\nrolling_friction = 0.3");
    whole_runs_track_the_twin(
        "",
        "friction = 0.5\nrolling_friction = 0.3\nrolling_model = \"cdt\"",
    );
}

/// A domain periodic along x and z: the same stages against the twin
/// (cells wrapped, pairs at the minimum image, free particles wrapped at a
/// build), dense and hashed.
#[test]
fn pair_list_stages_match_the_cpu_twin_periodic() {
    for grid in [GridMode::Dense, GridMode::Hashed] {
        let dir = tempfile::tempdir().unwrap();
        let text = box_scene(
            0.0,
            0.3,
            -9.81,
            "friction = 0.5\nrolling_friction = 0.2",
            "",
            true,
        )
        .replace(
            "walls = true",
            "walls = true\nperiodic = [true, false, true]",
        );
        let s = setup(dir.path(), &text, &edge_and_random(500), grid);
        assert!(s.grid.is_periodic());
        compare_stages(&s, false);
        whole_runs_track_the_twin_of(&s);
    }
}

/// A Hertz-Mindlin material for the tests.
const HERTZ_MATERIAL: &str = "model = \"hertz\"\nyoungs_modulus = 5e6\npoisson_ratio = 0.3\nrestitution = 0.6\nfriction = 0.5";

fn settling_pack(dir: &std::path::Path) -> SimSetup {
    setup(
        dir,
        &box_scene(0.0, 0.3, -9.81, "friction = 0.5", "", true),
        &lattice(10, 0.01, 0.021, 0.02, 0.0005, 0.3, 5),
        GridMode::Auto,
    )
}

fn state_bits(sim: &GpuSim) -> Vec<u32> {
    let s = sim.download().unwrap();
    s.pos
        .iter()
        .chain(&s.vel)
        .chain(&s.angvel)
        .flat_map(|v| v.map(f32::to_bits))
        .collect()
}

#[test]
fn reruns_are_bit_identical_and_outgrowing_the_buffers_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = settling_pack(dir.path());
    let g = gpu();
    let run = |capacity: Option<u32>| {
        let mut sim = GpuSim::new(g.clone(), &s).unwrap();
        if let Some(c) = capacity {
            sim.set_pair_capacity(c).unwrap();
        }
        sim.prime().unwrap();
        for _ in 0..6 {
            sim.advance(40).unwrap();
        }
        (
            state_bits(&sim),
            sim.rebuilds(),
            sim.pair_capacity().unwrap(),
        )
    };
    let (a, rebuilds, cap) = run(None);
    let (b, _, _) = run(None);
    assert_eq!(a, b, "GPU pair-list reruns differ");
    assert!(
        rebuilds > 1 && rebuilds < 240,
        "{rebuilds} rebuilds in 240 steps"
    );
    // Ten pairs of room: the first build halts, grows and resumes, and so
    // do later ones as the pack settles; the result is the same to the bit.
    let (c, rebuilds_small, cap_small) = run(Some(10));
    assert_eq!(rebuilds_small, rebuilds);
    assert!(cap_small > 10 && cap_small < cap, "{cap_small} vs {cap}");
    assert_eq!(a, c, "a run that outgrew its pair buffers differs");
}

#[test]
fn rebuilds_recorded_or_on_demand_give_the_same_bits() {
    let g = gpu();
    for integrator in ["verlet", "rk2"] {
        let dir = tempfile::tempdir().unwrap();
        // Fast and colliding: rebuilds every few steps, some mid-batch.
        let s = setup(
            dir.path(),
            &box_scene(
                0.0,
                0.2,
                -9.81,
                "friction = 0.3",
                &format!("skin = 0.004\nintegrator = \"{integrator}\""),
                true,
            ),
            &lattice(9, 0.01, 0.0205, 0.01, 0.0005, 1.5, 11),
            GridMode::Auto,
        );
        let run = |on_demand: bool, capacity: Option<u32>| {
            let mut sim = GpuSim::new(g.clone(), &s).unwrap();
            sim.set_rebuild_on_demand(on_demand);
            if let Some(c) = capacity {
                sim.set_pair_capacity(c).unwrap();
            }
            sim.prime().unwrap();
            for steps in [1, 40, 7, 40] {
                sim.advance(steps).unwrap();
            }
            (state_bits(&sim), sim.rebuilds(), sim.counters().unwrap())
        };
        let recorded = run(false, None);
        assert!(
            recorded.1 > 3,
            "{integrator}: {} rebuilds in 88 steps",
            recorded.1
        );
        assert!(recorded.2[0] > 0, "{integrator}: no contacts");
        let on_demand = run(true, None);
        assert!(
            recorded == on_demand,
            "{integrator}: rebuilds on demand differ from recorded ones"
        );
        // Halts for due rebuilds and for outgrown buffers, interleaved.
        assert!(
            recorded == run(true, Some(10)),
            "{integrator}: on demand with small pair buffers differs"
        );
    }
}

/// Touching pairs from the positions alone (brute force).
fn touching_pairs(sim: &GpuSim) -> u32 {
    let s = sim.download().unwrap();
    let n = s.pos.len();
    let mut count = 0;
    for i in 0..n {
        for j in i + 1..n {
            let (a, b) = (s.pos[i], s.pos[j]);
            let d = [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
            let rsum = a[3] + b[3];
            if d[0] * d[0] + d[1] * d[1] + d[2] * d[2] < rsum * rsum {
                count += 1;
            }
        }
    }
    count
}

#[test]
fn no_contact_is_missed_between_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    // Fast, dense and colliding: particles move far between rebuilds.
    let s = setup(
        dir.path(),
        &box_scene(0.0, 0.2, -9.81, "friction = 0.3", "skin = 0.004", true),
        &lattice(9, 0.01, 0.0205, 0.01, 0.0005, 1.5, 11),
        GridMode::Auto,
    );
    let mut sim = GpuSim::new(gpu(), &s).unwrap();
    sim.prime().unwrap();
    let mut checked = 0;
    for _ in 0..30 {
        sim.advance(1).unwrap();
        // The counters are of the forces just computed, at these positions
        // (before the closing half kick moved nothing).
        let listed = sim.counters().unwrap()[Counter::Contacts as usize] / 2;
        assert_eq!(listed, touching_pairs(&sim), "step {}", sim.steps());
        sim.advance(9).unwrap();
        checked += 1;
    }
    assert!(
        checked == 30 && sim.rebuilds() > 5,
        "{} rebuilds",
        sim.rebuilds()
    );
}

/// Whole runs of the pair-list path: the GPU (batches of several sizes, the
/// closing and opening kicks fused between steps) against its twin.
fn whole_runs_track_the_twin(extra: &str, material: &str) {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(0.0, 0.3, -9.81, material, extra, true),
        &lattice(10, 0.01, 0.021, 0.02, 0.0005, 0.3, 5),
        GridMode::Auto,
    );
    whole_runs_track_the_twin_of(&s);
}

/// [`whole_runs_track_the_twin`] for the scene `s`.
fn whole_runs_track_the_twin_of(s: &SimSetup) {
    let extra = "";
    let list_setup = s.for_pair_list().unwrap();
    let mut twin = CpuSim::new(&list_setup);
    let mut list = ListBuffers::new(list_setup.particles.len(), list_setup.walls.len());
    twin.pair_prime(&mut list);
    let mut gs = GpuSim::new(gpu(), s).unwrap();
    gs.prime().unwrap();
    for batch in [1, 7, 50, 1, 41] {
        twin.pair_advance(&mut list, batch);
        gs.advance(batch).unwrap();
    }
    let g = gs.download().unwrap();
    assert_eq!(gs.steps(), twin.step);
    assert_eq!(gs.rebuilds(), u64::from(list.rebuilds), "{extra}: rebuilds");
    assert_eq!(g.meta, twin.state.meta, "{extra}: the same order");
    close(
        &format!("{extra}: positions"),
        &twin.state.pos,
        &g.pos,
        1e-6,
        1e-5,
    );
    close(
        &format!("{extra}: velocities"),
        &twin.state.vel,
        &g.vel,
        1e-4,
        1e-3,
    );
}

#[test]
fn whole_verlet_runs_track_the_twin() {
    whole_runs_track_the_twin("", "friction = 0.5");
}

#[test]
fn whole_rk2_runs_track_the_twin() {
    whole_runs_track_the_twin("integrator = \"rk2\"", "friction = 0.5");
}

#[test]
fn whole_hertz_runs_track_the_twin() {
    whole_runs_track_the_twin("", HERTZ_MATERIAL);
}

/// The viewer's live controls hand the scene's own parameters (the grid of
/// the sort-every-step path) and new materials: the pair-list path keeps
/// its grid, takes the gravity and time step, and rebuilds so the pairs'
/// cached constants follow the materials at once.
#[test]
fn live_parameters_keep_the_grid_and_take_effect_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = settling_pack(dir.path());
    let list_setup = s.for_pair_list().unwrap();
    let mut twin = CpuSim::new(&list_setup);
    let mut list = ListBuffers::new(list_setup.particles.len(), list_setup.walls.len());
    twin.pair_prime(&mut list);
    twin.pair_advance(&mut list, 20);
    let mut gs = GpuSim::new(gpu(), &s).unwrap();
    gs.prime().unwrap();
    gs.advance(20).unwrap();

    let mut params = s.params();
    assert_ne!(
        params.cell_size, gs.params.cell_size,
        "the two paths' grids differ"
    );
    params.gravity = [0.0, -19.62, 0.0];
    let mut pairs = s.pairs.clone();
    for p in &mut pairs {
        p.kn *= 2.0;
        p.kt *= 2.0;
    }
    gs.update_parameters(&params, &pairs);
    twin.params.gravity = params.gravity;
    twin.pairs.clone_from(&pairs);
    list.rebuild = true;
    gs.advance(30).unwrap();
    twin.pair_advance(&mut list, 30);

    let g = gs.download().unwrap();
    assert_eq!(gs.params.cell_size, list_setup.grid.cell_size);
    assert_eq!(g.meta, twin.state.meta);
    close(
        "positions after the live change",
        &twin.state.pos,
        &g.pos,
        1e-6,
        1e-5,
    );
    close(
        "velocities after the live change",
        &twin.state.vel,
        &g.vel,
        1e-4,
        1e-3,
    );
}

/// The packed binding layout (arrays in arenas, for WebGPU's storage
/// binding limit) computes exactly what the separate one does: the same
/// kernels read through a table. Runs both on this device from the same
/// setups, one outgrowing its pair buffers (a repack mid-run), one with
/// rolling resistance (its extra arrays), and compares every bit.
#[test]
fn the_packed_binding_layout_is_bit_identical_to_the_separate_one() {
    use pellet_player::sim::gpu::{BindingLayout, Listing};
    use pellet_player::sim::stages::SimShaders;
    let g = gpu();
    let dir = tempfile::tempdir().unwrap();
    let pack = settling_pack(dir.path());
    let rolling_dir = tempfile::tempdir().unwrap();
    let rolling = setup(
        rolling_dir.path(),
        &box_scene(
            0.0,
            0.3,
            -9.81,
            &format!("{HERTZ_MATERIAL}\nrolling_friction = 0.2"),
            "",
            true,
        ),
        &edge_and_random(500),
        GridMode::Dense,
    );
    for (what, s, capacity) in [
        ("settling pack", &pack, Some(10)),
        ("rolling", &rolling, None),
    ] {
        let run = |layout: BindingLayout| {
            let mut sim = GpuSim::with_layout(
                g.clone(),
                s,
                &SimShaders::builtin(),
                Listing::PairList,
                layout,
            )
            .unwrap();
            assert_eq!(sim.binding_layout(), layout);
            if let Some(c) = capacity {
                sim.set_pair_capacity(c).unwrap();
            }
            let generation = sim.generation();
            sim.prime().unwrap();
            for _ in 0..4 {
                sim.advance(30).unwrap();
            }
            let moved = sim.generation() != generation;
            (
                state_bits(&sim),
                sim.rebuilds(),
                sim.counters().unwrap(),
                moved,
            )
        };
        let (separate, rebuilds, counters, _) = run(BindingLayout::Separate);
        let (packed, packed_rebuilds, packed_counters, moved) = run(BindingLayout::Packed);
        assert!(rebuilds > 1, "{what}: {rebuilds} rebuilds");
        assert_eq!(packed_rebuilds, rebuilds, "{what}: rebuilds");
        assert_eq!(packed_counters, counters, "{what}: counters");
        assert_eq!(packed, separate, "{what}: state differs between layouts");
        if capacity.is_some() {
            assert!(
                moved,
                "{what}: outgrowing the pair buffers repacks the arenas"
            );
        }
    }
    // Sorting every step copies between arrays, which an arena cannot do
    // within itself: refused with a reason, not a validation error.
    let refused = GpuSim::with_layout(
        g.clone(),
        &pack,
        &SimShaders::builtin(),
        Listing::SortEveryStep,
        BindingLayout::Packed,
    );
    assert!(matches!(
        refused,
        Err(pellet_player::sim::SimError::Unsupported(_))
    ));
}

/// The browser's way of stepping (submit, then poll without ever waiting)
/// gives the same bits as the blocking one, through rebuilds that outgrow
/// the pair buffers and resume.
#[test]
fn batches_polled_without_waiting_match_blocking_ones() {
    let dir = tempfile::tempdir().unwrap();
    let s = settling_pack(dir.path());
    let g = gpu();
    let mut blocking = GpuSim::new(g.clone(), &s).unwrap();
    blocking.set_pair_capacity(10).unwrap();
    blocking.prime().unwrap();
    for _ in 0..4 {
        blocking.advance(30).unwrap();
    }
    let mut polled = GpuSim::new(g.clone(), &s).unwrap();
    polled.set_pair_capacity(10).unwrap();
    let finish = |sim: &mut GpuSim| loop {
        if let Some(counters) = sim.poll_batch().unwrap() {
            return counters;
        }
        std::thread::yield_now();
    };
    polled.begin_batch(0).unwrap();
    finish(&mut polled);
    let mut counters = [0; pellet_player::sim::NUM_COUNTERS];
    for _ in 0..4 {
        polled.begin_batch(30).unwrap();
        assert!(polled.begin_batch(30).is_err(), "one batch at a time");
        counters = finish(&mut polled);
    }
    assert_eq!(polled.steps(), 120);
    assert_eq!(polled.rebuilds(), blocking.rebuilds());
    assert_eq!(counters, blocking.counters().unwrap());
    assert_eq!(state_bits(&polled), state_bits(&blocking));
}
