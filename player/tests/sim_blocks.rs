//! Block-wise stepping (`sim::blocks`): the host keeps the neighbour list
//! and integrates, the GPU evaluates the forces block by block. Runs are
//! bit-identical however the scene is cut into blocks, the forces match the
//! CPU engine's on the same list to rounding, whole runs track the in-core
//! engines, and the layer plan covers every particle once.
//!
//! Needs a GPU adapter (lavapipe in CI): fails, not skips, without one.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{box_scene, lattice, setup};
use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::sim::blocks::{
    BlockSim, budget_for_block, in_core_bytes, plan_layers, sorting_bytes,
};
use pellet_player::sim::gpu::GpuSim;
use pellet_player::sim::{ForceKind, GridMode, HostState, SimError, SimSetup, Simulation};

fn gpu() -> Arc<Gpu> {
    Arc::new(Gpu::new(BackendChoice::Auto).expect("a GPU adapter (install mesa-vulkan-drivers)"))
}

/// 1000 grains on a jittered lattice in a walled box, falling.
fn scene(dir: &std::path::Path, extra: &str) -> SimSetup {
    scene_of(dir, extra, "friction = 0.5")
}

/// [`scene`] with the default material's fields `material`.
fn scene_of(dir: &std::path::Path, extra: &str, material: &str) -> SimSetup {
    setup(
        dir,
        &box_scene(0.0, 0.3, -9.81, material, extra, true),
        &lattice(10, 0.01, 0.0199, 0.02, 0.0005, 0.3, 5),
        GridMode::Dense,
    )
}

fn bits(v: &[[f32; 4]]) -> Vec<u32> {
    v.iter().flat_map(|x| x.map(f32::to_bits)).collect()
}

#[test]
fn block_wise_runs_are_bit_identical_however_the_scene_is_cut() {
    for (extra, material) in [
        ("", "friction = 0.5"),
        ("integrator = \"rk2\"", "friction = 0.5"),
        // Rolling resistance: the stored rolling torques cross blocks too.
        ("", "friction = 0.5\nrolling_friction = 0.3"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let s = scene_of(dir.path(), extra, material);
        let g = gpu();
        let budget = budget_for_block(&s, 450);
        let mut cut = BlockSim::new(g.clone(), &s, budget).unwrap();
        let mut whole = BlockSim::new(g, &s, u64::MAX).unwrap();
        assert!(cut.stats().capacity <= 450, "{:?}", cut.stats());
        assert!(
            cut.stats().device_bytes <= budget,
            "{} > {budget}",
            cut.stats().device_bytes
        );
        assert_eq!(whole.stats().capacity, s.particles.len());
        for sim in [&mut cut, &mut whole] {
            sim.prime().unwrap();
            sim.advance(120).unwrap();
        }
        assert!(cut.stats().blocks >= 3, "{extra}: {:?}", cut.stats());
        assert!(cut.stats().halo_particles > 0);
        assert_eq!(whole.stats().blocks, 1, "{extra}");
        let (a, b) = (&cut.host.state, &whole.host.state);
        assert_eq!(a.meta, b.meta, "{extra}: same order");
        assert_eq!(bits(&a.pos), bits(&b.pos), "{extra}: positions");
        assert_eq!(bits(&a.vel), bits(&b.vel), "{extra}: velocities");
        assert_eq!(bits(&a.angvel), bits(&b.angvel), "{extra}: spins");
        let (la, lb) = (&cut.host.list, &whole.host.list);
        assert_eq!(la.partner, lb.partner, "{extra}: lists");
        for k in 0..3 {
            let (x, y): (Vec<u32>, Vec<u32>) = (
                la.spring[k].iter().map(|v| v.to_bits()).collect(),
                lb.spring[k].iter().map(|v| v.to_bits()).collect(),
            );
            assert_eq!(x, y, "{extra}: springs");
        }
        for k in 0..3 {
            let (x, y): (Vec<u32>, Vec<u32>) = (
                la.roll[k].iter().map(|v| v.to_bits()).collect(),
                lb.roll[k].iter().map(|v| v.to_bits()).collect(),
            );
            assert_eq!(x, y, "{material}: stored rolling torques");
        }
        // The grains collided: some springs are stretched.
        assert!(la.spring[0].iter().any(|&x| x != 0.0), "{extra}");
        if material.contains("rolling") {
            assert!(la.roll[0].iter().any(|&x| x != 0.0), "{material}");
        }
        assert!(cut.host.rebuilds > 1, "{extra}: {}", cut.host.rebuilds);
    }
}

/// The block-wise evaluation against the CPU engine on the same state and
/// list: the same forces to rounding (each pair once, summed in another order).
#[test]
fn block_forces_match_the_cpu_engine_on_the_same_list() {
    let dir = tempfile::tempdir().unwrap();
    let s = scene(dir.path(), "");
    let mut blocks = BlockSim::new(gpu(), &s, budget_for_block(&s, 450)).unwrap();
    blocks.prime().unwrap();
    blocks.advance(600).unwrap();
    // Trial evaluations leave the springs as they are.
    blocks.evaluate(ForceKind::Trial).unwrap();
    let (gf, gt) = (
        blocks.host.state.force.clone(),
        blocks.host.state.torque.clone(),
    );
    blocks.host.compute_forces(ForceKind::Trial);
    let (cf, ct) = (&blocks.host.state.force, &blocks.host.state.torque);
    let mut touched = 0;
    for i in 0..gf.len() {
        let m = 1.0 / blocks.host.state.vel[i][3];
        for a in 0..3 {
            let scale = m * 9.81;
            assert!(
                (gf[i][a] - cf[i][a]).abs() <= 1e-4 * scale.max(cf[i][a].abs()),
                "force of {i}: {:?} vs {:?}",
                gf[i],
                cf[i]
            );
            assert!(
                (gt[i][a] - ct[i][a]).abs() <= 1e-4 * (scale * 0.01).max(ct[i][a].abs()),
                "torque of {i}: {:?} vs {:?}",
                gt[i],
                ct[i]
            );
        }
        if (cf[i][1] + m * 9.81).abs() > 1e-3 * m * 9.81 {
            touched += 1;
        }
    }
    assert!(touched > 100, "{touched} particles feel contacts");
}

fn close(what: &str, a: &HostState, b: &HostState, abs: f32) {
    let (a, b) = (a.by_id(), b.by_id());
    assert_eq!(a.meta, b.meta, "{what}: particles");
    for (i, (x, y)) in a.pos.iter().zip(&b.pos).enumerate() {
        for k in 0..3 {
            assert!(
                (x[k] - y[k]).abs() <= abs,
                "{what}: particle {i} axis {k}: {} vs {}",
                x[k],
                y[k]
            );
        }
    }
}

#[test]
fn block_wise_runs_track_in_core_runs() {
    for extra in ["", "integrator = \"rk2\""] {
        let dir = tempfile::tempdir().unwrap();
        let s = scene(dir.path(), extra);
        let g = gpu();
        let steps = 150;
        let mut blocks = Simulation::blocks(g.clone(), &s, budget_for_block(&s, 450)).unwrap();
        blocks.advance(steps).unwrap();
        let mut gpu_sim = Simulation::gpu(g, &s).unwrap();
        gpu_sim.advance(steps).unwrap();
        let mut cpu = Simulation::cpu(&s);
        cpu.advance(steps).unwrap();
        let b = blocks.host_state().unwrap();
        // The grains moved (they fall and collide) ...
        let start = Simulation::cpu(&s).host_state().unwrap();
        let moved = b
            .pos
            .iter()
            .zip(&start.pos)
            .map(|(p, q)| (p[1] - q[1]).abs())
            .fold(0.0f32, f32::max);
        assert!(moved > 1e-3, "{extra}: moved {moved}");
        // ... and block-wise agrees with both in-core engines to rounding
        // grown over 150 steps of collisions.
        close(extra, &b, &cpu.host_state().unwrap(), 1e-4);
        close(extra, &b, &gpu_sim.host_state().unwrap(), 1e-4);
        let (sb, sc) = (blocks.stats().unwrap(), cpu.stats().unwrap());
        assert!(sb.contacts > 0, "{extra}: {sb:?}");
        assert!(
            sb.contacts.abs_diff(sc.contacts) <= sc.contacts / 50 + 2,
            "{extra}: contacts {} vs {}",
            sb.contacts,
            sc.contacts
        );
        assert!(
            sb.wall_contacts.abs_diff(sc.wall_contacts) <= sc.wall_contacts / 50 + 2,
            "{extra}: wall contacts {} vs {}",
            sb.wall_contacts,
            sc.wall_contacts
        );
        assert_eq!(sb.rebuilds, sc.rebuilds, "{extra}: the same list builds");
        let stats = blocks.block_stats().unwrap();
        assert!(stats.blocks > 1 && stats.halo_particles > 0, "{stats:?}");
    }
}

#[test]
fn layers_cover_every_particle_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = scene(dir.path(), "");
    let mut blocks = BlockSim::new(gpu(), &s, u64::MAX).unwrap();
    blocks.prime().unwrap();
    let list = &blocks.host.list;
    let n = s.particles.len();
    assert!(list.layer_start.len() > 5, "{:?}", list.layer_start);
    for capacity in [400, 600, 1000, 5000] {
        let plan = plan_layers(&list.layer_start, &list.row, capacity, 8 * capacity).unwrap();
        let mut next = 0;
        for b in &plan {
            assert_eq!(b.inner.start, next, "contiguous");
            next = b.inner.end;
            assert!(b.halo.start <= b.inner.start && b.halo.end >= b.inner.end);
            assert!(b.halo.len() <= capacity);
            assert!(b.pairs.len() <= 8 * capacity);
            // Every pair a particle of the block takes part in is uploaded,
            // and reaches no particle beyond the halo.
            for i in b.inner.clone() {
                for k in list.row[i] as usize..list.row[i + 1] as usize {
                    assert!(b.pairs.contains(&k));
                    assert!(b.halo.contains(&(list.partner[k] as usize)));
                }
            }
            for (k, &j) in list.partner.iter().enumerate() {
                if b.inner.contains(&(j as usize)) {
                    assert!(b.pairs.contains(&k), "pair {k} of partner {j}");
                }
            }
        }
        assert_eq!(next, n, "all particles");
    }
    // One layer and its neighbours hold more than 20 grains: a clear error.
    let err = plan_layers(&list.layer_start, &list.row, 20, 160).unwrap_err();
    assert!(
        matches!(&err, SimError::SlabTooLarge { .. })
            && err.to_string().contains("raise --device-budget"),
        "{err}"
    );
    // So do too few pairs.
    let err = plan_layers(&list.layer_start, &list.row, n, 10).unwrap_err();
    assert!(err.to_string().contains("listed pairs"), "{err}");
    // A budget below the fixed tables: a clear error too.
    let err = BlockSim::new(gpu(), &s, 1024).unwrap_err();
    assert!(err.to_string().contains("holds no particles"), "{err}");
    // The in-core models are what a GPU simulation allocates, give or take
    // the small fixed buffers.
    let g = GpuSim::sorting(gpu(), &s).unwrap();
    let (model, real) = (sorting_bytes(&s), g.allocated_bytes());
    assert!(
        real <= model && model - real < 96 * 1024,
        "{model} vs {real}"
    );
    let g = GpuSim::new(gpu(), &s).unwrap();
    let (model, real) = (in_core_bytes(&s), g.allocated_bytes());
    assert!(
        real <= model && model - real < 128 * 1024,
        "{model} vs {real}"
    );
}

/// A sparse scene in a large domain (a hashed grid in core) steps block by
/// block too, and tracks the CPU engine.
#[test]
fn sparse_scenes_step_block_wise() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(0.0, 30.0, -9.81, "friction = 0.5", "", true),
        &lattice(8, 0.01, 0.0199, 0.02, 0.0005, 0.3, 5),
        GridMode::Hashed,
    );
    assert!(s.grid.hashed);
    let mut blocks = Simulation::blocks(gpu(), &s, budget_for_block(&s, 200)).unwrap();
    let mut cpu = Simulation::cpu(&s);
    blocks.advance(100).unwrap();
    cpu.advance(100).unwrap();
    assert!(blocks.block_stats().unwrap().blocks > 1);
    close(
        "sparse",
        &blocks.host_state().unwrap(),
        &cpu.host_state().unwrap(),
        1e-4,
    );
}
