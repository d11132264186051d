//! Out-of-core neighbour search (`player nns`): queries per second on 1 M
//! and 10 M uniform points (about 9 neighbours each) under a 1 GiB device
//! budget, in-core GPU where it fits, out of core with the workload tree and
//! with fixed blocks, CPU threads only and one thread; against SciPy's
//! `cKDTree.query_ball_point` and the `kiddo` crate on the same points. The
//! paper's 65.6 M points run once (`--quick` skips it), checked against the
//! CPU path.

use std::process::Command;
use std::sync::Arc;

use kiddo::{ImmutableKdTree, SquaredEuclidean};
use pellet_bake::table::{TableSettings, bake_table};
use pellet_formats::assets::{OverlapTable, SamplingMethod};
use pellet_gpu::{BackendChoice, Gpu};
use pellet_nns::generate::generate;
use pellet_nns::{BlockMode, Neighbours, NnsOptions, NnsReport, Schedule, search};
use rayon::prelude::*;

use crate::harness::{Row, Timing, time};

const GROUP: &str = "neighbour search";
/// Search radius: about 9 neighbours per point at 10 points per unit cube.
const RADIUS: f32 = 0.6;
/// Search radius on the clustered points: about 9 neighbours per point on
/// average (their cores are much denser).
const CLUSTER_RADIUS: f32 = 0.35;

/// SciPy's timings on `points`, or why there are none.
fn scipy(points: &[[f32; 3]], radius: f32, repeats: usize) -> Result<(Timing, u64), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("points.f32");
    let bytes: Vec<u8> = points
        .iter()
        .flat_map(|p| p.iter().flat_map(|x| x.to_le_bytes()))
        .collect();
    std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/scipy_nns.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(&file)
        .arg(f64::from(radius).to_string()) // the same radius, f32 widened
        .arg(repeats.to_string())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr)
            .lines()
            .last()
            .unwrap_or("failed")
            .to_owned());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let s: Vec<f64> = v["seconds"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
        .unwrap_or_default();
    let neighbours = v["neighbours"].as_u64().unwrap_or(0);
    Ok((Timing::of(&s).ok_or("no timings")?, neighbours))
}

/// kiddo: an immutable k-d tree built and queried on all cores (rayon).
fn kiddo_search(points: &[[f32; 3]], radius: f32) -> u64 {
    let tree: ImmutableKdTree<f32, 3> = ImmutableKdTree::new_from_slice(points);
    let r2 = radius * radius;
    points
        .par_iter()
        .map(|p| tree.within_unsorted::<SquaredEuclidean>(p, r2).len() as u64 - 1)
        .sum()
}

/// Order-independent fingerprint of every list: counts and index sums.
fn fingerprint(n: &Neighbours) -> Vec<(u64, u64)> {
    (0..n.len())
        .map(|i| {
            let l = n.of(i);
            (l.len() as u64, l.iter().map(|&j| u64::from(j)).sum())
        })
        .collect()
}

struct Variant {
    name: &'static str,
    gpu: bool,
    threads: usize,
    schedule: Schedule,
    budget: u64,
}

/// Bytes the CPU path moves through memory per query with `k` neighbours
/// per point, from the sizes of the arrays it writes and reads once each:
/// the grid (points read twice 24 B, cells 8 B, records and their cells
/// written and read 40 B, coordinates 16 B: 88 B), the half-shell pass
/// (coordinates, per-point ends: 24 B, pairs 2k B), the lists (pairs read
/// by the lengths and the transpose 4k B, finder labels and transposed
/// finders written and read 8k B, counts, offsets and slots 48 B, the
/// output 4k B).
fn bytes_per_query(k: f64) -> f64 {
    160.0 + 18.0 * k
}

/// All rows of the group.
pub fn run(samples: usize, quick: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    let table: OverlapTable = match bake_table(&TableSettings {
        ratios: 24,
        samples: 100_000,
        method: SamplingMethod::Sobol,
        ..Default::default()
    }) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("bench: neighbour search: no table: {e}");
            return rows;
        }
    };
    let gpu = Gpu::new(BackendChoice::Auto).ok().map(Arc::new);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let bandwidth = super::sim::memory_bandwidth();
    let sizes: &[usize] = if quick {
        &[100_000]
    } else {
        &[1_000_000, 10_000_000]
    };
    // Radii for about 9 neighbours per point on average.
    for (dist, radius) in [("uniform", RADIUS), ("clusters", CLUSTER_RADIUS)] {
        for &n in sizes {
            rows.extend(one_size(
                &table, &gpu, cores, bandwidth, dist, radius, n, samples,
            ));
        }
    }
    if !quick {
        rows.extend(paper_size(&table, gpu, cores));
    }
    rows
}

/// The rows of one distribution and size: every variant, SciPy and kiddo.
#[allow(clippy::too_many_arguments)]
fn one_size(
    table: &OverlapTable,
    gpu: &Option<Arc<Gpu>>,
    cores: usize,
    bandwidth: f64,
    dist: &str,
    radius: f32,
    n: usize,
    samples: usize,
) -> Vec<Row> {
    let mut rows = Vec::new();
    eprintln!("bench: neighbour search, {n} {dist} points");
    let points = generate(dist, n, 1).expect("known distribution");
    let reps = if n >= 10_000_000 {
        samples.min(3)
    } else {
        samples.min(5)
    };
    // SciPy takes minutes at 10 M: once there.
    let peer = scipy(&points, radius, if n >= 10_000_000 { 1 } else { 3 });
    let kiddo = time(reps, || kiddo_search(&points, radius));
    let kiddo_neighbours = kiddo_search(&points, radius);
    let gib = 1 << 30;
    let variants = [
        Variant {
            name: "hybrid, default schedule",
            gpu: true,
            threads: cores,
            schedule: Schedule::Auto,
            budget: gib,
        },
        Variant {
            name: "hybrid, blocks shared by measured rates",
            gpu: true,
            threads: cores,
            schedule: Schedule::Rates,
            budget: gib,
        },
        Variant {
            name: "GPU blocks, faces on CPU threads (the paper's split)",
            gpu: true,
            threads: cores,
            schedule: Schedule::Gpu,
            budget: gib,
        },
        Variant {
            name: "CPU threads only",
            gpu: false,
            threads: cores,
            schedule: Schedule::Auto,
            budget: gib,
        },
        Variant {
            name: "one CPU thread",
            gpu: false,
            threads: 1,
            schedule: Schedule::Auto,
            budget: gib,
        },
    ];
    let mut reference: Option<Vec<(u64, u64)>> = None;
    let workload = format!("{n} {dist} points, eps {radius}");
    for v in variants {
        if v.gpu && gpu.is_none() {
            continue;
        }
        let options = NnsOptions {
            radius,
            device_budget: v.budget,
            threads: v.threads,
            block: BlockMode::Auto,
            estimate: Default::default(),
            aux_neighbours: None,
            schedule: v.schedule,
        };
        let device = if v.gpu { gpu.clone() } else { None };
        let (lists, report): (Neighbours, NnsReport) =
            match search(&points, &options, table, device.clone()) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("bench: neighbour search {}: {e}", v.name);
                    continue;
                }
            };
        let print = fingerprint(&lists);
        let same = match &reference {
            None => {
                reference = Some(print);
                true
            }
            Some(r) => *r == print,
        };
        drop(lists);
        let timing = time(reps, || {
            search(&points, &options, table, device.clone()).expect("search")
        });
        let qps = n as f64 / timing.median_s;
        let k = report.neighbours as f64 / n as f64;
        let traffic = if v.gpu {
            String::new()
        } else {
            let b = bytes_per_query(k);
            format!(
                "; ~{b:.0} B/query through memory: {:.1} GB/s of {:.1} GB/s measured copy bandwidth",
                b * qps / 1e9,
                bandwidth / 1e9
            )
        };
        let share = if v.gpu {
            format!(
                "; {}; {}",
                report.split(),
                if report.decision.is_empty() {
                    "schedule as asked".into()
                } else {
                    report.decision.clone()
                }
            )
        } else {
            String::new()
        };
        let (peer_timing, peer_note) = match &peer {
            Ok((t, m)) => (Some(t.clone()), format!("SciPy found {m} neighbours")),
            Err(e) => (None, format!("SciPy unavailable: {e}")),
        };
        rows.push(Row {
            group: GROUP,
            name: format!("{} ({} threads)", v.name, v.threads),
            workload: format!(
                "{workload} ({k:.1} neighbours each), budget {} MiB",
                v.budget >> 20
            ),
            pellet: timing,
            peer: "SciPy cKDTree.query_ball_point, all cores".into(),
            peer_timing,
            notes: format!(
                "{:.2} M queries/s, lists included; {} neighbours, {}{traffic}{share}; {peer_note}",
                qps / 1e6,
                report.neighbours,
                if same {
                    "same lists as the first variant"
                } else {
                    "LISTS DIFFER from the first variant"
                },
            ),
        });
    }
    if let Some(best) = rows
        .iter()
        .min_by(|a, b| a.pellet.median_s.total_cmp(&b.pellet.median_s))
        .cloned()
    {
        rows.push(Row {
            group: GROUP,
            name: format!("fastest Pellet variant vs kiddo: {}", best.name),
            workload: best.workload.clone(),
            pellet: best.pellet.clone(),
            peer: format!("kiddo ImmutableKdTree within_unsorted, rayon on {cores} threads"),
            peer_timing: Some(kiddo),
            notes: format!("kiddo found {kiddo_neighbours} neighbours (f32 distances)"),
        });
    }
    rows
}

/// Resets this process's peak resident memory (Linux `clear_refs`), so the
/// next reading is one run's own.
fn reset_peak_memory() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The paper's largest run, once: 65.6 M points under a 1 GiB budget with
/// the default schedule, against CPU threads alone on the same points,
/// lists compared, with each run's peak memory.
fn paper_size(table: &OverlapTable, gpu: Option<Arc<Gpu>>, cores: usize) -> Vec<Row> {
    let n = 65_600_000;
    eprintln!("bench: neighbour search, {n} points (once each)");
    let points = generate("uniform", n, 1).expect("known distribution");
    let options = NnsOptions {
        radius: RADIUS,
        device_budget: 1 << 30,
        threads: cores,
        block: BlockMode::Auto,
        estimate: Default::default(),
        aux_neighbours: None,
        schedule: Schedule::Auto,
    };
    let gib = |b: Option<u64>| {
        b.map_or_else(
            || "unknown".into(),
            |b| format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30)),
        )
    };
    reset_peak_memory();
    let start = std::time::Instant::now();
    let Ok((cpu_lists, cpu_report)) = search(&points, &options, table, None) else {
        return Vec::new();
    };
    let cpu_s = start.elapsed().as_secs_f64();
    let cpu_print = fingerprint(&cpu_lists);
    drop(cpu_lists);
    reset_peak_memory();
    let start = std::time::Instant::now();
    let Ok((lists, report)) = search(&points, &options, table, gpu.clone()) else {
        return Vec::new();
    };
    let seconds = start.elapsed().as_secs_f64();
    let same = fingerprint(&lists) == cpu_print;
    drop(lists);
    let once = |s: f64| Timing {
        median_s: s,
        min_s: s,
        max_s: s,
        samples: 1,
    };
    vec![Row {
        group: GROUP,
        name: format!(
            "65.6 M points, out of core ({} backend, default schedule) vs CPU threads alone",
            report.backend
        ),
        workload: format!("{n} uniform points, eps 0.6, budget 1024 MiB"),
        pellet: once(seconds),
        peer: format!("Pellet's CPU threads alone ({cores} threads)"),
        peer_timing: Some(once(cpu_s)),
        notes: format!(
            "{:.2} M queries/s against {:.2} M; {} neighbours; {} blocks, {} splits; {} GPU / {} CPU points; {:.1} GB up, {:.1} GB down; lists {} the CPU path's; peak resident memory {} (CPU threads alone: {}); {}",
            n as f64 / seconds / 1e6,
            n as f64 / cpu_s / 1e6,
            report.neighbours,
            report.blocks,
            report.splits,
            report.gpu_points,
            report.cpu_points,
            report.bytes_up as f64 / 1e9,
            report.bytes_down as f64 / 1e9,
            if same { "equal to" } else { "DIFFER from" },
            gib(report.peak_memory_bytes),
            gib(cpu_report.peak_memory_bytes),
            report.decision
        ),
    }]
}
