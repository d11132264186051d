//! Out-of-core neighbour search: every path (CPU threads, one GPU block,
//! many small GPU blocks with CPU boundaries, fixed blocks, blocks that
//! overflow and are split) finds exactly the pairs brute force finds, on
//! every test distribution and on the awkward cases: all points in one cell,
//! points exactly eps apart, points on cell faces.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use pellet_bake::table::{TableSettings, bake_table};
use pellet_formats::assets::{OverlapTable, SamplingMethod};
use pellet_formats::scene::Rng;
use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::nns::cpu::brute_force;
use pellet_player::nns::generate::generate;
use pellet_player::nns::grid::CellGrid;
use pellet_player::nns::model::estimate;
use pellet_player::nns::output::{read_neighbours, write_counts, write_neighbours};
use pellet_player::nns::{BlockMode, EstimateMode, Neighbours, NnsOptions, Schedule, search};

fn table() -> OverlapTable {
    bake_table(&TableSettings {
        ratios: 24,
        samples: 20_000,
        method: SamplingMethod::Sobol,
        ..Default::default()
    })
    .unwrap()
}

fn gpu() -> Arc<Gpu> {
    Arc::new(Gpu::new(BackendChoice::Auto).unwrap())
}

fn assert_exact(points: &[[f32; 3]], radius: f32, got: Neighbours, what: &str) {
    let expected = brute_force(points, radius);
    let got = got.sorted();
    assert_eq!(got.len(), points.len(), "{what}");
    for (i, want) in expected.iter().enumerate() {
        assert_eq!(got.of(i), &want[..], "{what}: point {i}");
    }
}

/// Runs every path on `points` and checks each against brute force.
fn check_all_paths(points: &[[f32; 3]], radius: f32, what: &str, splittable: bool) {
    let table = table();
    let gpu = gpu();
    let base = NnsOptions {
        radius,
        threads: 2,
        ..Default::default()
    };
    let (cpu, report) = search(points, &base, &table, None).unwrap();
    assert_eq!(report.cpu_points, points.len() as u64);
    assert_exact(points, radius, cpu, &format!("{what}, CPU"));

    // On lavapipe (the host's own cores) the default schedule gives
    // everything to CPU threads, and says so.
    let (auto, report) = search(points, &base, &table, Some(gpu.clone())).unwrap();
    assert!(
        report.gpu.points == 0 && report.decision.contains("CPU cores"),
        "{what}: {report:?}"
    );
    assert_exact(points, radius, auto, &format!("{what}, auto schedule"));

    let base = NnsOptions {
        schedule: Schedule::Gpu,
        ..base
    };
    let (one_block, report) = search(points, &base, &table, Some(gpu.clone())).unwrap();
    // One block, unless it had to be split (a lattice at exactly eps has
    // more borderline pairs than room).
    assert!(
        report.blocks == 1 || report.splits > 0,
        "{what}: {report:?}"
    );
    assert_exact(points, radius, one_block, &format!("{what}, GPU in core"));

    // A budget that forces many blocks with CPU boundaries.
    let small = NnsOptions {
        device_budget: 64 << 10,
        ..base.clone()
    };
    let (many, report) = search(points, &small, &table, Some(gpu.clone())).unwrap();
    if splittable {
        assert!(report.blocks > 1, "{what}: {report:?}");
        assert!(report.cpu_points > 0 && report.gpu_points > 0, "{what}");
    }
    assert_exact(points, radius, many, &format!("{what}, GPU blocks"));

    let fixed = NnsOptions {
        block: BlockMode::Fixed(3),
        ..base.clone()
    };
    let (tiles, _) = search(points, &fixed, &table, Some(gpu.clone())).unwrap();
    assert_exact(points, radius, tiles, &format!("{what}, fixed blocks"));

    // The paper's table model alone sizes blocks too.
    let table_model = NnsOptions {
        estimate: EstimateMode::Table,
        ..small.clone()
    };
    let (paper, report) = search(points, &table_model, &table, Some(gpu.clone())).unwrap();
    assert_eq!(report.estimate, "table");
    assert_exact(points, radius, paper, &format!("{what}, table estimate"));

    // Allocations far below the real output: every block overflows, is
    // split, and the results stay exact.
    let starved = NnsOptions {
        aux_neighbours: Some(-1e6),
        ..base
    };
    let (split, report) = search(points, &starved, &table, Some(gpu.clone())).unwrap();
    assert!(report.splits > 0 || !splittable, "{what}: {report:?}");
    assert_exact(
        points,
        radius,
        split,
        &format!("{what}, overflowing blocks"),
    );

    // Blocks shared by measured rates: both processors take blocks, also
    // when starved allocations make the GPU's overflow and split.
    for (options, name) in [(small, "small budget"), (starved, "starved")] {
        let rates = NnsOptions {
            schedule: Schedule::Rates,
            ..options
        };
        let (shared, report) = search(points, &rates, &table, Some(gpu.clone())).unwrap();
        assert_eq!(report.schedule, "rates");
        assert_eq!(
            report.gpu.points + report.cpu.points,
            points.len() as u64,
            "{what}, {name}: every point once"
        );
        assert_exact(points, radius, shared, &format!("{what}, rates, {name}"));
    }
}

#[test]
fn every_path_matches_brute_force_on_the_test_distributions() {
    for name in ["uniform", "pile", "column", "clusters"] {
        let points = generate(name, 3000, 7).unwrap();
        check_all_paths(&points, 0.6, name, true);
    }
}

#[test]
fn all_points_in_one_cell() {
    let mut rng = Rng::new(3);
    let points: Vec<[f32; 3]> = (0..600)
        .map(|_| {
            [
                rng.range(0.0, 0.1),
                rng.range(0.0, 0.1),
                rng.range(0.0, 0.1),
            ]
        })
        .collect();
    check_all_paths(&points, 0.05, "one cell", false);
}

#[test]
fn points_exactly_eps_apart_and_on_cell_faces() {
    // An integer lattice searched at radius 1: the 6 axis neighbours are
    // exactly eps away (included), the diagonals are not; every point sits
    // on cell faces. Plus points at exactly eps along a diagonal (3-4-5).
    let mut points = Vec::new();
    for z in 0..9 {
        for y in 0..9 {
            for x in 0..9 {
                points.push([x as f32, y as f32, z as f32]);
            }
        }
    }
    points.push([20.0, 20.0, 20.0]);
    points.push([20.6, 20.8, 20.0]); // 0.6^2 + 0.8^2 = 1 in f64 sums? (checked by brute force)
    points.push([20.0, 20.0, 21.0]);
    check_all_paths(&points, 1.0, "lattice", true);
    let lists = search(
        &points,
        &NnsOptions {
            radius: 1.0,
            ..Default::default()
        },
        &table(),
        None,
    )
    .unwrap()
    .0;
    // An interior lattice point has exactly its 6 axis neighbours.
    let centre = 4 + 9 * (4 + 9 * 4);
    assert_eq!(lists.of(centre).len(), 6);
}

#[test]
fn lists_files_round_trip_and_corrupt_files_are_refused() {
    let points = generate("uniform", 2000, 1).unwrap();
    let (lists, _) = search(
        &points,
        &NnsOptions {
            radius: 0.7,
            ..Default::default()
        },
        &table(),
        None,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("n.bin");
    write_neighbours(&path, &lists).unwrap();
    assert_eq!(read_neighbours(&path).unwrap(), lists);
    let counts = dir.path().join("counts.txt");
    write_counts(&counts, &lists).unwrap();
    let text = std::fs::read_to_string(&counts).unwrap();
    assert_eq!(text.lines().count(), 2000);
    assert_eq!(
        text.lines().next().unwrap().parse::<usize>().unwrap(),
        lists.of(0).len()
    );
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(bytes.len() - 3);
    std::fs::write(&path, &bytes).unwrap();
    assert!(
        read_neighbours(&path)
            .unwrap_err()
            .contains("header promises")
    );
}

fn player(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_player"))
        .args(args)
        .env("NODEVICE_SELECT", "1")
        .output()
        .unwrap()
}

#[test]
fn the_command_line_writes_lists_counts_and_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let out = player(&[
        "nns",
        "--generate",
        "pile",
        "--particles",
        "5000",
        "--radius",
        "0.5",
        "--device-budget",
        "64KiB",
        "--schedule",
        "gpu",
        "--out",
        &path("n.bin"),
        "--counts",
        &path("counts.txt"),
        "--report",
        &path("report.json"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("points       5000"), "{text}");
    let lists = read_neighbours(std::path::Path::new(&path("n.bin"))).unwrap();
    let points = generate("pile", 5000, 1).unwrap();
    assert_exact(&points, 0.5, lists.clone(), "command line");
    let counts = std::fs::read_to_string(path("counts.txt")).unwrap();
    let counts: Vec<usize> = counts.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(counts.len(), 5000);
    assert!(
        counts
            .iter()
            .enumerate()
            .all(|(i, &c)| c == lists.of(i).len())
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path("report.json")).unwrap()).unwrap();
    assert!(report["blocks"].as_u64().unwrap() > 1, "{report}");
    let blocks = report["block_list"].as_array().unwrap();
    assert!(
        blocks
            .iter()
            .all(|b| b["estimated_bytes"].as_u64().unwrap() <= 64 << 10)
    );
    assert!(blocks[0]["real_bytes"].as_u64().is_some());
    assert!(report["gpu"]["points"].as_u64().unwrap() > 0, "{report}");
    assert!(
        report["peak_memory_bytes"].as_u64().unwrap() > 0,
        "{report}"
    );

    // The default schedule measures both and says what it decided.
    let out = player(&[
        "nns",
        "--generate",
        "pile",
        "--particles",
        "5000",
        "--radius",
        "0.5",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("decision") && text.contains("schedule auto"),
        "{text}"
    );

    // --points CSV, on CPU threads, with JSON on stdout.
    std::fs::write(path("p.csv"), "x,y,z\n0,0,0\n0.5,0,0\n2,2,2\n").unwrap();
    let out = player(&[
        "nns",
        "--points",
        &path("p.csv"),
        "--radius",
        "0.5",
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
    assert_eq!(summary["neighbours"], 2);
    assert!(summary.get("block_list").is_none());

    // A scene: its particles.
    let scene = concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/scenes/ballpit.toml");
    let out = player(&[
        "nns",
        scene,
        "--radius",
        "0.03",
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
    assert_eq!(summary["points"], 4096);
    assert!(summary["neighbours"].as_u64().unwrap() > 0);

    // Clear errors.
    let one_line = |out: &std::process::Output, needle: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("player:")).collect();
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(lines.len(), 1, "{err}");
        assert!(lines[0].contains(needle), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    one_line(&player(&["nns", "--radius", "1"]), "give the points");
    one_line(
        &player(&["nns", "--points", &path("missing.csv"), "--radius", "1"]),
        "cannot open",
    );
    one_line(
        &player(&[
            "nns",
            "--generate",
            "clusters",
            "--particles",
            "20000",
            "--radius",
            "0.5",
            "--device-budget",
            "1KiB",
            "--schedule",
            "gpu",
        ]),
        "half the device budget",
    );
    let bad = player(&[
        "nns",
        "--generate",
        "uniform",
        "--radius",
        "1",
        "--block",
        "fixed:x",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    let bad = player(&[
        "nns",
        "--generate",
        "uniform",
        "--radius",
        "1",
        "--device-budget",
        "1XB",
    ]);
    assert_eq!(bad.status.code(), Some(2));
}

/// The fitted estimate (the table model fitted on every 64th cell counted
/// exactly) predicts each cell's mean neighbours far better than the table
/// model on packed grains, and the error it measures on its sample is the
/// error it makes on the cells it did not see.
#[test]
fn the_fitted_estimate_beats_the_table_model_on_packed_grains() {
    let table = table();
    let points = generate("pile", 200_000, 3).unwrap();
    let radius = 0.6;
    let grid = CellGrid::new(&points, radius, 1 << 24, 2).unwrap();
    let (lists, _) = search(
        &points,
        &NnsOptions {
            radius,
            threads: 2,
            ..Default::default()
        },
        &table,
        None,
    )
    .unwrap();
    // Exact mean neighbours per cell.
    let mut exact = vec![0.0; grid.cell_count()];
    for c in 0..grid.cell_count() {
        let run = &grid.ids[grid.starts[c] as usize..grid.starts[c + 1] as usize];
        if !run.is_empty() {
            let total: usize = run.iter().map(|&id| lists.of(id as usize).len()).sum();
            exact[c] = total as f64 / run.len() as f64;
        }
    }
    let occupied: Vec<usize> = (0..grid.cell_count())
        .filter(|&c| grid.starts[c + 1] > grid.starts[c])
        .collect();
    let rmse = |e: &[f64]| {
        (occupied
            .iter()
            .map(|&c| (e[c] - exact[c]).powi(2))
            .sum::<f64>()
            / occupied.len() as f64)
            .sqrt()
    };
    let paper = estimate(&grid, &table, radius, EstimateMode::Table, 2);
    let fitted = estimate(&grid, &table, radius, EstimateMode::Fitted, 2);
    let (paper_rmse, fitted_rmse) = (rmse(&paper.expected), rmse(&fitted.expected));
    assert!(paper.fit.is_none() && paper.measured_rmse.is_none());
    let fit = fitted.fit.as_ref().unwrap();
    assert!(fit.sample_cells >= 256, "{fit:?}");
    assert!(
        fitted_rmse < 0.5 * paper_rmse,
        "fitted {fitted_rmse} vs table {paper_rmse}"
    );
    let measured = fitted.measured_rmse.unwrap();
    assert!(
        measured > 0.5 * fitted_rmse && measured < 2.0 * fitted_rmse,
        "measured {measured} vs real {fitted_rmse}"
    );
}

/// The CPU search finds the same lists, in the same order, with every
/// instruction set this CPU has (`PELLET_SIMD` lowers the level), on 1 and
/// 2 threads; and they are exact (against brute force).
#[test]
fn every_instruction_set_and_thread_count_writes_the_same_lists() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (level, threads) in [("", "2"), ("", "1"), ("avx2", "2"), ("portable", "2")] {
        let path = dir.path().join(format!("n-{level}-{threads}.bin"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_player"))
            .args([
                "nns",
                "--generate",
                "clusters",
                "--particles",
                "20000",
                "--radius",
                "0.6",
                "--backend",
                "cpu",
                "--threads",
                threads,
                "--out",
            ])
            .arg(&path)
            .env("PELLET_SIMD", level)
            .env("NODEVICE_SELECT", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        files.push(std::fs::read(&path).unwrap());
    }
    for f in &files[1..] {
        assert!(f == &files[0], "the lists differ between builds or threads");
    }
    let lists = read_neighbours(&dir.path().join("n--2.bin")).unwrap();
    let points = generate("clusters", 20000, 1).unwrap();
    assert_exact(&points, 0.6, lists, "every instruction set");
}
