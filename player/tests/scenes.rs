//! Every scene under `assets/scenes/` loads (meshes baked into a temporary
//! cache) and steps on the CPU backend.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use pellet_player::sim::run::load_setup_cached;
use pellet_player::sim::{GridMode, Simulation};

#[test]
fn every_shipped_scene_loads_and_steps() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/scenes");
    let cache = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let setup = load_setup_cached(&path, GridMode::Auto, Some(cache.path().to_path_buf()))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!setup.particles.is_empty(), "{}", path.display());
        let mut sim = Simulation::cpu(&setup);
        sim.advance(2)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        names.push(setup.name.clone());
    }
    names.sort();
    for expected in [
        "avalanche",
        "ballpit",
        "bunnies",
        "funnel",
        "mixed_sizes",
        "pile",
        "pour_1m",
        "push",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "missing {expected}: {names:?}"
        );
    }
}
