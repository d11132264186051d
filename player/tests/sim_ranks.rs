//! The CPU engine over several ranks (threads standing in for MPI
//! processes, `pellet_sim::ranks::ThreadComm`) gives the same bits as one
//! rank: a dense pack, a column with walls, a periodic lateral axis. A rank
//! that stops midway gives the others an error, not a hang.
#![allow(clippy::unwrap_used)]

mod common;

use common::{box_scene, lattice, random_particles, setup};
use pellet_player::sim::ranks::{Comm, RankedSim, ThreadComm};
use pellet_player::sim::{GridMode, HostState, SimError, SimSetup, Simulation};

fn bits(s: &HostState) -> Vec<u32> {
    let s = s.by_id();
    [&s.pos, &s.vel, &s.angvel]
        .iter()
        .flat_map(|v| v.iter().flat_map(|x| x.map(f32::to_bits)))
        .collect()
}

/// One rank's run: bits of every particle, contacts, rebuilds.
fn one_rank(s: &SimSetup, steps: u32) -> (Vec<u32>, u64, u64) {
    let mut sim = Simulation::cpu(s);
    sim.advance(steps).unwrap();
    let stats = sim.stats().unwrap();
    (
        bits(&sim.host_state().unwrap()),
        stats.contacts,
        stats.rebuilds,
    )
}

/// The same on `ranks` threads as ranks (rank 0's gathered view).
fn ranked(s: &SimSetup, steps: u32, ranks: usize) -> (Vec<u32>, u64, u64) {
    let comms = ThreadComm::group(ranks);
    let mut out: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|c| {
                scope.spawn(move || {
                    let mut sim = RankedSim::new(s, Box::new(c)).unwrap();
                    // Two calls, as a run with statistics lines makes them.
                    sim.advance(steps / 2).unwrap();
                    sim.advance(steps - steps / 2).unwrap();
                    let state = sim.gather_state().unwrap();
                    let contacts =
                        u64::from(sim.sim.counter(pellet_player::sim::Counter::Contacts)) / 2;
                    let imbalance = sim.stats().imbalance;
                    assert!(imbalance < 2.0, "imbalance {imbalance}");
                    (bits(&state), contacts, sim.sim.rebuilds)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let first = out.remove(0);
    for other in out {
        assert_eq!(first, other, "every rank gathers the same state");
    }
    first
}

fn check(s: &SimSetup, steps: u32, what: &str) {
    let one = one_rank(s, steps);
    assert!(
        one.1 > 0 && one.2 > 1,
        "{what}: contacts {} rebuilds {}",
        one.1,
        one.2
    );
    for ranks in [1, 2, 3, 4] {
        let got = ranked(s, steps, ranks);
        assert_eq!(got.1, one.1, "{what}: contacts on {ranks} ranks");
        assert_eq!(got.2, one.2, "{what}: rebuilds on {ranks} ranks");
        assert!(got.0 == one.0, "{what}: {ranks} ranks differ from one");
    }
}

#[test]
fn a_dense_pack_is_bit_identical_on_one_to_four_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(0.0, 0.4, -9.81, "friction = 0.5", "", true),
        &lattice(18, 0.005, 0.0105, 0.01, 0.001, 0.5, 7),
        GridMode::Auto,
    );
    check(&s, 300, "pack");
}

#[test]
fn a_column_with_walls_and_rolling_friction_is_bit_identical() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(
            0.0,
            0.6,
            -9.81,
            "friction = 0.5\nrolling_friction = 0.2",
            "",
            true,
        ),
        &random_particles(3000, 0.004, 0.0, 0.15, 0.3, 11),
        GridMode::Auto,
    );
    check(&s, 300, "column");
}

#[test]
fn a_periodic_lateral_axis_is_bit_identical() {
    let dir = tempfile::tempdir().unwrap();
    let toml = "[simulation]\ngravity = [0, -9.81, 0]\n[domain]\nmin = [0, 0, 0]\nmax = [0.2, 0.5, 0.12]\nwalls = true\nperiodic = [false, false, true]\n[materials.default]\nfriction = 0.4\n";
    let mut p = random_particles(3000, 0.004, 0.0, 0.12, 0.5, 5);
    for q in &mut p {
        q.0[1] += 0.05;
    }
    let s = setup(dir.path(), toml, &p, GridMode::Auto);
    check(&s, 300, "periodic");
}

#[test]
fn a_rank_that_stops_midway_gives_the_others_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(
        dir.path(),
        &box_scene(0.0, 0.4, -9.81, "friction = 0.5", "", true),
        &lattice(10, 0.005, 0.0105, 0.01, 0.001, 0.5, 7),
        GridMode::Auto,
    );
    let comms = ThreadComm::group(3);
    let results: Vec<Result<(), SimError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|c| {
                let s = &s;
                scope.spawn(move || {
                    let rank = c.rank();
                    let mut sim = RankedSim::new(s, Box::new(c))?;
                    sim.advance(20)?;
                    if rank == 1 {
                        return Ok(()); // stops taking part (dropped)
                    }
                    sim.advance(20)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (rank, r) in results.iter().enumerate() {
        if rank == 1 {
            assert!(r.is_ok());
        } else {
            let msg = r
                .as_ref()
                .err()
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(
                msg.contains("rank 1 stopped answering"),
                "rank {rank}: {msg}"
            );
        }
    }
}
