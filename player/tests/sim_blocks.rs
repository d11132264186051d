//! Block-wise stepping (`sim::blocks`): the forces of a scene evaluated
//! block by block are bit-identical to the in-core GPU's, whole runs track
//! the in-core runs, and the slab plan covers every particle once.
//!
//! Needs a GPU adapter (lavapipe in CI): fails, not skips, without one.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{box_scene, lattice, setup};
use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::sim::blocks::{
    BlockSim, bytes_per_particle, fixed_bytes, in_core_bytes, plan_slabs, sorting_bytes,
};
use pellet_player::sim::gpu::GpuSim;
use pellet_player::sim::{Counter, GridMode, HostState, SimError, SimSetup, Simulation};

fn gpu() -> Arc<Gpu> {
    Arc::new(Gpu::new(BackendChoice::Auto).expect("a GPU adapter (install mesa-vulkan-drivers)"))
}

/// 1000 grains on a jittered lattice in a walled box, falling.
fn scene(dir: &std::path::Path, extra: &str) -> SimSetup {
    setup(
        dir,
        &box_scene(0.0, 0.3, -9.81, "friction = 0.5", extra, true),
        &lattice(10, 0.01, 0.0199, 0.02, 0.0005, 0.3, 5),
        GridMode::Dense,
    )
}

/// A budget that holds `particles` at once.
fn budget_for(s: &SimSetup, particles: u64) -> u64 {
    fixed_bytes(s) + particles * bytes_per_particle(s.slots, s.integrator)
}

fn bits(v: &[[f32; 4]]) -> Vec<u32> {
    v.iter().flat_map(|x| x.map(f32::to_bits)).collect()
}

#[test]
fn block_forces_are_bit_identical_to_in_core() {
    let dir = tempfile::tempdir().unwrap();
    let s = scene(dir.path(), "");
    let g = gpu();
    // In core: sort and first forces.
    let mut in_core = GpuSim::sorting(g.clone(), &s).unwrap();
    in_core.prime().unwrap();
    let want = in_core.download().unwrap();
    // Block by block, at most 450 particles on the device at once.
    let mut blocks = BlockSim::new(g, &s, budget_for(&s, 450)).unwrap();
    blocks.prime().unwrap();
    assert!(blocks.stats.blocks >= 3, "{:?}", blocks.stats);
    assert!(blocks.stats.capacity <= 450);
    assert!(
        blocks.stats.device_bytes <= budget_for(&s, 450),
        "{:?}",
        blocks.stats
    );
    let got = &blocks.host.state;
    assert_eq!(got.meta, want.meta, "same sorted order");
    assert_eq!(bits(&got.force), bits(&want.force), "forces");
    assert_eq!(bits(&got.torque), bits(&want.torque), "torques");
    assert_eq!(got.hist_count, want.hist_count, "contacts");
    let slots = s.slots as usize;
    for i in 0..got.len() {
        let n = got.hist_count[i] as usize;
        assert_eq!(
            bits(&got.hist[i * slots..i * slots + n]),
            bits(&want.hist[i * slots..i * slots + n]),
            "history of {i}"
        );
    }
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
        let mut blocks = Simulation::blocks(g.clone(), &s, budget_for(&s, 450)).unwrap();
        blocks.advance(steps).unwrap();
        let mut gpu_sim = Simulation::gpu(g, &s).unwrap();
        gpu_sim.advance(steps).unwrap();
        // The GPU kernels' CPU twin (the pair-list engine of `--backend cpu`
        // sums in another order; tests/sim_pairlist.rs compares it).
        let mut twin = pellet_player::sim::cpu::CpuSim::new(&s);
        twin.prime();
        twin.advance(steps);
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
        // ... and block-wise agrees with the kernels' twin to rounding, and
        // with the in-core GPU path (a pair list: each pair once, summed in
        // another order) to rounding grown over 150 steps of collisions.
        close(extra, &b, &twin.state, 1e-5);
        close(extra, &b, &gpu_sim.host_state().unwrap(), 1e-4);
        let sb = blocks.stats().unwrap();
        let sc = (
            u64::from(twin.counter(Counter::Contacts)) / 2,
            u64::from(twin.counter(Counter::WallContacts)),
        );
        assert!(sb.contacts > 0, "{extra}: {sb:?}");
        assert!(
            sb.contacts.abs_diff(sc.0) <= sc.0 / 50 + 2,
            "{extra}: contacts {} vs {}",
            sb.contacts,
            sc.0
        );
        assert_eq!(sb.wall_contacts, sc.1, "{extra}");
        let stats = blocks.block_stats().unwrap();
        assert!(stats.blocks > 1 && stats.halo_particles > 0, "{stats:?}");
    }
}

#[test]
fn slabs_cover_every_particle_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = scene(dir.path(), "");
    let mut cpu = pellet_player::sim::cpu::CpuSim::new(&s);
    cpu.sort(false);
    let n = s.particles.len();
    for capacity in [400, 600, 1000, 5000] {
        let plan = plan_slabs(&cpu.cell_start, &cpu.grid, capacity).unwrap();
        let mut next = 0;
        for b in &plan {
            assert_eq!(b.inner.start, next, "contiguous");
            next = b.inner.end;
            assert!(b.halo.start <= b.inner.start && b.halo.end >= b.inner.end);
            assert!(b.halo.len() <= capacity);
        }
        assert_eq!(next, n, "all particles");
        assert_eq!(plan.last().unwrap().slabs.1, s.grid.dims[2] as u32);
    }
    // One slab and its neighbours hold more than 20 grains: a clear error.
    let err = plan_slabs(&cpu.cell_start, &cpu.grid, 20).unwrap_err();
    assert!(
        matches!(&err, SimError::SlabTooLarge { .. })
            && err.to_string().contains("raise --device-budget"),
        "{err}"
    );
    // A budget below the fixed tables: a clear error too.
    let err = BlockSim::new(gpu(), &s, 1024).unwrap_err();
    assert!(err.to_string().contains("holds no particles"), "{err}");
    // The in-core model is what a GPU simulation allocates, give or take the
    // small fixed buffers.
    let g = GpuSim::sorting(gpu(), &s).unwrap();
    let (model, real) = (sorting_bytes(&s), g.allocated_bytes());
    assert!(
        real <= model && model - real < 96 * 1024,
        "{model} vs {real}"
    );
    // And on the pair-list path.
    let g = GpuSim::new(gpu(), &s).unwrap();
    let (model, real) = (in_core_bytes(&s), g.allocated_bytes());
    assert!(
        real <= model && model - real < 128 * 1024,
        "{model} vs {real}"
    );
}

#[test]
fn hashed_grids_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(0.0, 0.3, -9.81, "friction = 0.5", "", true),
        &lattice(4, 0.01, 0.021, 0.02, 0.0, 0.0, 5),
        GridMode::Hashed,
    );
    let err = BlockSim::new(gpu(), &s, 1 << 20).unwrap_err();
    assert!(err.to_string().contains("dense grid"), "{err}");
}
