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
use pellet_nns::{BlockMode, Neighbours, NnsOptions, NnsReport, search};
use rayon::prelude::*;

use crate::harness::{Row, Timing, time};

const GROUP: &str = "neighbour search";
/// Search radius: about 9 neighbours per point at 10 points per unit cube.
const RADIUS: f32 = 0.6;

/// SciPy's timings on `points`, or why there are none.
fn scipy(points: &[[f32; 3]], repeats: usize) -> Result<(Timing, u64), String> {
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
        .arg(f64::from(RADIUS).to_string()) // the same radius: f32 0.6 widened
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
    let mut s: Vec<f64> = v["seconds"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
        .unwrap_or_default();
    if s.is_empty() {
        return Err("no timings".into());
    }
    s.sort_by(f64::total_cmp);
    let neighbours = v["neighbours"].as_u64().unwrap_or(0);
    Ok((
        Timing {
            median_s: s[s.len() / 2],
            min_s: s[0],
            max_s: s[s.len() - 1],
            samples: s.len(),
        },
        neighbours,
    ))
}

/// kiddo: an immutable k-d tree built and queried on all cores (rayon).
fn kiddo_search(points: &[[f32; 3]]) -> u64 {
    let tree: ImmutableKdTree<f32, 3> = ImmutableKdTree::new_from_slice(points);
    let r2 = RADIUS * RADIUS;
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
    block: BlockMode,
    budget: u64,
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
    let sizes: &[usize] = if quick {
        &[100_000]
    } else {
        &[1_000_000, 10_000_000]
    };
    for &n in sizes {
        eprintln!("bench: neighbour search, {n} points");
        let points = generate("uniform", n, 1).expect("known distribution");
        let reps = if n >= 10_000_000 {
            samples.min(3)
        } else {
            samples.min(5)
        };
        let peer = scipy(&points, reps);
        let kiddo = time(reps, || kiddo_search(&points));
        let kiddo_neighbours = kiddo_search(&points);
        let variants = [
            Variant {
                name: "in-core GPU",
                gpu: true,
                threads: cores,
                block: BlockMode::Auto,
                budget: 16 << 30,
            },
            Variant {
                name: "out of core, workload tree",
                gpu: true,
                threads: cores,
                block: BlockMode::Auto,
                budget: 1 << 30,
            },
            Variant {
                name: "out of core, fixed blocks of 16^3 cells",
                gpu: true,
                threads: cores,
                block: BlockMode::Fixed(16),
                budget: 1 << 30,
            },
            Variant {
                name: "CPU threads only",
                gpu: false,
                threads: cores,
                block: BlockMode::Auto,
                budget: 1 << 30,
            },
            Variant {
                name: "one CPU thread",
                gpu: false,
                threads: 1,
                block: BlockMode::Auto,
                budget: 1 << 30,
            },
        ];
        let mut reference: Option<Vec<(u64, u64)>> = None;
        for v in variants {
            if v.gpu && gpu.is_none() {
                continue;
            }
            let options = NnsOptions {
                radius: RADIUS,
                device_budget: v.budget,
                threads: v.threads,
                block: v.block,
                estimate: Default::default(),
                aux_neighbours: None,
            };
            let device = if v.gpu { gpu.clone() } else { None };
            let (lists, report): (Neighbours, NnsReport) =
                match search(&points, &options, &table, device.clone()) {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("bench: neighbour search {}: {e}", v.name);
                        continue;
                    }
                };
            if v.name == "in-core GPU" && report.blocks != 1 {
                // Does not fit the device in one block (lavapipe binds at most
                // 128 MiB per buffer): not an in-core run.
                continue;
            }
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
                search(&points, &options, &table, device.clone()).expect("search")
            });
            let qps = n as f64 / timing.median_s / 1e6;
            let (peer_timing, peer_note) = match &peer {
                Ok((t, m)) => (Some(t.clone()), format!("SciPy found {m} neighbours")),
                Err(e) => (None, format!("SciPy unavailable: {e}")),
            };
            rows.push(Row {
                group: GROUP,
                name: format!("{} ({} threads)", v.name, v.threads),
                workload: format!("{n} uniform points, eps 0.6 (~9 neighbours each), budget {} MiB", v.budget >> 20),
                pellet: timing,
                peer: "SciPy cKDTree.query_ball_point, all cores".into(),
                peer_timing,
                notes: format!(
                    "{qps:.2} M queries/s; {} neighbours, {}; {} blocks, {} splits, {} points on the GPU and {} on CPU threads; {peer_note}",
                    report.neighbours,
                    if same { "same lists as the first variant" } else { "LISTS DIFFER from the first variant" },
                    report.blocks,
                    report.splits,
                    report.gpu_points,
                    report.cpu_points
                ),
            });
        }
        if let Some(best) = rows
            .iter()
            .filter(|r| r.workload.starts_with(&format!("{n} ")))
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
    }
    if !quick {
        rows.extend(paper_size(&table, gpu, cores));
    }
    rows
}

/// The paper's largest run, once: 65.6 M points under a 1 GiB budget, checked
/// against the CPU path, with the peak memory of this process.
fn paper_size(table: &OverlapTable, gpu: Option<Arc<Gpu>>, cores: usize) -> Vec<Row> {
    let n = 65_600_000;
    eprintln!("bench: neighbour search, {n} points (once)");
    let points = generate("uniform", n, 1).expect("known distribution");
    let options = NnsOptions {
        radius: RADIUS,
        device_budget: 1 << 30,
        threads: cores,
        block: BlockMode::Auto,
        estimate: Default::default(),
        aux_neighbours: None,
    };
    let start = std::time::Instant::now();
    let Ok((lists, report)) = search(&points, &options, table, gpu.clone()) else {
        return Vec::new();
    };
    let seconds = start.elapsed().as_secs_f64();
    let print = fingerprint(&lists);
    drop(lists);
    let cpu = search(&points, &NnsOptions { ..options.clone() }, table, None)
        .map(|(l, _)| fingerprint(&l) == print)
        .unwrap_or(false);
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or_else(
            || "unknown".into(),
            |kb| format!("{:.1} GiB", kb as f64 / (1 << 20) as f64),
        );
    vec![Row {
        group: GROUP,
        name: format!("65.6 M points, out of core ({} backend)", report.backend),
        workload: format!("{n} uniform points, eps 0.6, budget 1024 MiB"),
        pellet: Timing {
            median_s: seconds,
            min_s: seconds,
            max_s: seconds,
            samples: 1,
        },
        peer: "none run at this size".into(),
        peer_timing: None,
        notes: format!(
            "{:.2} M queries/s; {} neighbours; {} blocks, {} splits; {} GPU / {} CPU points; {:.1} GB up, {:.1} GB down; lists {} the CPU path's; peak memory of the benchmark process {peak}",
            n as f64 / seconds / 1e6,
            report.neighbours,
            report.blocks,
            report.splits,
            report.gpu_points,
            report.cpu_points,
            report.bytes_up as f64 / 1e9,
            report.bytes_down as f64 / 1e9,
            if cpu { "equal" } else { "DIFFER from" }
        ),
    }]
}
