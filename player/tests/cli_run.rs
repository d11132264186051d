//! `player run --headless` from the command line, as a user runs it.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

use pellet_formats::assets::SimState;
use pellet_formats::io::read_asset;

fn player(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_player"))
        .args(args)
        .env("NODEVICE_SELECT", "1")
        .output()
        .unwrap()
}

fn scene(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../assets/scenes")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn headless_run_writes_stats_and_snapshots_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    for backend in ["cpu", "gpu"] {
        let stats = dir.path().join(format!("{backend}.jsonl"));
        let save = dir.path().join(format!("{backend}.pellet"));
        let every = dir.path().join(format!("{backend}-frames"));
        let out = player(&[
            "run",
            &scene("ballpit.toml"),
            "--headless",
            "--steps",
            "60",
            "--backend",
            backend,
            "--stats",
            stats.to_str().unwrap(),
            "--stats-every",
            "20",
            "--save",
            save.to_str().unwrap(),
            "--save-every",
            "30",
            "--save-dir",
            every.to_str().unwrap(),
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["steps"], 60);
        assert_eq!(summary["particles"], 4096);
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&stats)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "stats every 20 of 60 steps");
        for key in [
            "step",
            "time",
            "kinetic_energy",
            "max_speed",
            "contacts",
            "max_cell_occupancy",
            "slot_overflows",
            "rebuilds",
            "ms_per_step",
        ] {
            assert!(lines[0].get(key).is_some(), "stats line lacks {key}");
        }
        assert_eq!(lines[2]["step"], 60);
        let state: SimState = read_asset(&save, &Default::default()).unwrap();
        assert_eq!(state.step, 60);
        assert_eq!(state.positions.len(), 4096);
        for step in [30, 60] {
            assert!(every.join(format!("state_{step:08}.pellet")).exists());
        }
    }
}

#[test]
fn bad_input_is_one_line_and_no_panic() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "[domain]\nmin = [0, 0, 0]\nmax = [1, 1]\n").unwrap();
    for args in [
        vec![
            "run",
            broken.to_str().unwrap(),
            "--headless",
            "--steps",
            "1",
        ],
        vec!["run", "/nonexistent/scene.toml", "--headless"],
        vec!["run", &scene("ballpit.toml")],
        vec![
            "run",
            &scene("ballpit.toml"),
            "--headless",
            "--stats-every",
            "0",
        ],
    ] {
        let out = player(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("player: "), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn plays_a_baked_folder_and_refuses_a_tampered_one() {
    use pellet_bake::bake_mesh::Voxelizer;
    use pellet_bake::progress::Progress;
    use pellet_bake::scene_bake::bake_scene;

    let dir = tempfile::tempdir().unwrap();
    let baked = dir.path().join("baked");
    let report = bake_scene(
        Path::new(&scene("push.toml")),
        &baked,
        Voxelizer::Cpu,
        &Progress::hidden(),
    )
    .unwrap();
    assert_eq!(report.bodies.len(), 1);
    let out = player(&[
        "run",
        baked.to_str().unwrap(),
        "--headless",
        "--steps",
        "20",
        "--backend",
        "cpu",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["bodies"], 1);
    assert_eq!(summary["scene"], "push");
    // Same particles as the TOML scene.
    let toml = player(&[
        "run",
        &scene("push.toml"),
        "--headless",
        "--steps",
        "20",
        "--backend",
        "cpu",
        "--json",
    ]);
    let direct: serde_json::Value = serde_json::from_slice(&toml.stdout).unwrap();
    assert_eq!(direct["particles"], summary["particles"]);
    assert_eq!(
        direct["last"]["kinetic_energy"],
        summary["last"]["kinetic_energy"]
    );
    // Tamper with the body object: a clear one-line error, no panic.
    let body = baked.join(format!("{}.pellet", report.bodies[0].object));
    let mut bytes = std::fs::read(&body).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&body, &bytes).unwrap();
    let out = player(&["run", baked.to_str().unwrap(), "--headless", "--steps", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("content hash"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// `--device-budget` below what the scene needs: the run steps block by
/// block, reports it, and ends where the in-core run ends (to rounding).
#[test]
fn a_scene_over_the_device_budget_runs_block_by_block() {
    let dir = tempfile::tempdir().unwrap();
    let run = |budget: Option<&str>, save: &Path| {
        let mut args = vec![
            "run",
            &scene("ballpit.toml"),
            "--headless",
            "--steps",
            "60",
            "--save",
            save.to_str().unwrap(),
            "--json",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
        if let Some(b) = budget {
            args.extend(["--device-budget".to_string(), b.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = player(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let (a, b) = (
        dir.path().join("blocks.pellet"),
        dir.path().join("core.pellet"),
    );
    let blocks = run(Some("2MiB"), &a);
    let core = run(None, &b);
    assert!(core["blocks"].is_null(), "{core}");
    let stats = &blocks["blocks"];
    assert!(stats["blocks"].as_u64().unwrap() > 1, "{blocks}");
    assert!(
        stats["device_bytes"].as_u64().unwrap() <= 2 << 20,
        "{blocks}"
    );
    assert!(
        stats["in_core_bytes"].as_u64().unwrap() > 2 << 20,
        "{blocks}"
    );
    assert!(blocks["backend"].as_str().unwrap().contains("blocks"));
    let limits = pellet_formats::DecodeLimits::default();
    let (sa, sb): (SimState, SimState) = (
        read_asset(&a, &limits).unwrap(),
        read_asset(&b, &limits).unwrap(),
    );
    for (p, q) in sa.positions.iter().zip(sb.positions.iter()) {
        for k in 0..3 {
            assert!((p[k] - q[k]).abs() < 1e-5, "{p:?} vs {q:?}");
        }
    }
    // A budget that cannot hold one layer of cells: one line, no panic.
    let out = player(&[
        "run",
        &scene("ballpit.toml"),
        "--headless",
        "--steps",
        "5",
        "--device-budget",
        "200KiB",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--device-budget"), "{err}");
}

#[test]
fn an_old_scene_setting_contact_slots_still_runs_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.toml");
    std::fs::write(
        &path,
        "name = \"old\"\n[simulation]\ncontact_slots = 12\n[domain]\nmin = [0, 0, 0]\nmax = [0.2, 0.2, 0.2]\n\
         [materials.default]\n[[particles]]\nregion = { min = [0.02, 0.02, 0.02], max = [0.18, 0.1, 0.18] }\nspacing = 0.03\n",
    )
    .unwrap();
    for backend in ["cpu", "gpu"] {
        let out = player(&[
            "run",
            path.to_str().unwrap(),
            "--headless",
            "--steps",
            "5",
            "--backend",
            backend,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{backend}: {err}");
        assert!(
            err.contains("contact_slots is obsolete and ignored"),
            "{backend}: {err}"
        );
    }
}

/// The CPU engine gives the same bits with its AVX-512, AVX2 and portable
/// builds (`PELLET_SIMD` lowers the level; on a CPU without a level the
/// run falls back to the one below, and the comparison still holds).
#[test]
fn cpu_runs_are_bit_identical_on_every_instruction_set() {
    let dir = tempfile::tempdir().unwrap();
    // A touching pack under slanted gravity: walls, sliding contacts and
    // their springs from the first step, and enough particles for the
    // parallel passes; above it two particles with the same centre, which
    // the contact pushes apart along y by their ids. Then the same pack
    // periodic along x and z (pairs across the boundaries at the minimum
    // image) with rolling friction (the rolling lanes).
    std::fs::write(
        dir.path().join("twins.csv"),
        "0.17,0.45,0.17\n0.17,0.45,0.17\n",
    )
    .unwrap();
    let scene = |periodic: &str, material: &str| {
        format!(
            "name = \"pack17\"\n[simulation]\nparticle_radius = 0.01\ngravity = [3, -9.81, 1.5]\n\
             time_step = 1e-5\n[domain]\nmin = [0, 0, 0]\nmax = [0.34, 0.5, 0.34]\n{periodic}\n\
             [materials.default]\ndensity = 2500\nstiffness = 10000\nrestitution = 0.5\nfriction = 0.5\n{material}\n\
             [[particles]]\nregion = {{ min = [0, 0, 0], max = [0.34, 0.34, 0.34] }}\nspacing = 0.02\n\
             [[particles]]\nfile = \"twins.csv\"\n"
        )
    };
    for (name, text) in [
        ("walled", scene("", "")),
        (
            "periodic",
            scene("periodic = [true, false, true]", "rolling_friction = 0.1"),
        ),
    ] {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        let mut saved = Vec::new();
        for level in ["auto", "avx2", "portable"] {
            let save = dir.path().join(format!("{name}-{level}.pellet"));
            let out = Command::new(env!("CARGO_BIN_EXE_player"))
                .args([
                    "run",
                    path.to_str().unwrap(),
                    "--headless",
                    "--backend",
                    "cpu",
                ])
                .args(["--steps", "300", "--save", save.to_str().unwrap()])
                .env("PELLET_SIMD", level)
                .env("RAYON_NUM_THREADS", "2")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{name} {level}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let state: SimState = read_asset(&save, &Default::default()).unwrap();
            let n = 17 * 17 * 17;
            assert_eq!(state.positions.len(), n + 2);
            // The twins moved apart along y only (gravity moves both alike).
            let (a, b) = (state.positions[n], state.positions[n + 1]);
            let gap = (a[1] - b[1]).abs();
            assert!(
                a[0] == b[0] && a[2] == b[2] && gap > 1e-3 && a[1].min(b[1]) > 0.36,
                "{name} {level}: twins {a:?} {b:?}"
            );
            saved.push((level, std::fs::read(&save).unwrap()));
        }
        for (level, bytes) in &saved[1..] {
            assert!(bytes == &saved[0].1, "{name}: {level} differs from auto");
        }
    }
}
