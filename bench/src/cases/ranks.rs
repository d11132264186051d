//! The CPU engine over MPI ranks against LIGGGHTS on as many ranks: the
//! 1 M touching pack of [`super::sim`] on 1 and 2 ranks, each side
//! launched by `mpirun` as a user would launch it.
//!
//! Pellet's side is the player built with `--features mpi`
//! (`PELLET_BENCH_MPI_PLAYER`, which `scripts/bench.sh` builds): one rank
//! is a plain `player run --backend cpu`, two ranks are `mpirun -np 2 player
//! run`, each rank with `RAYON_NUM_THREADS` threads (2 where the machine
//! has 4 cores or more, else 1). The timed steps are read from the run's own
//! `--stats` lines (`ms_per_step` of the lines after the warm-up), so the
//! start-up (every rank builds the scene) is not timed, as LIGGGHTS' "Loop
//! time" leaves out its set-up. Both runs `--save` the end state, and the
//! row says whether the two ranks' file is byte for byte the one rank's.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::{Row, Timing};

/// What one Pellet run under `mpirun` measured.
#[derive(Debug, Clone, Default)]
struct RankRun {
    /// Seconds of the timed steps (from the `--stats` lines).
    seconds: f64,
    /// Bytes all ranks sent each other per timed step.
    bytes_per_step: f64,
    /// The fullest rank's particles over the mean at the last build.
    imbalance: f64,
    /// Halo particles each rank read at the last build.
    halo: Vec<u64>,
}

/// The player built with MPI: `PELLET_BENCH_MPI_PLAYER` when it names a file.
fn mpi_player() -> Option<PathBuf> {
    let p = PathBuf::from(std::env::var_os("PELLET_BENCH_MPI_PLAYER")?);
    p.is_file().then_some(p)
}

/// Runs `scene` for `warm` + `steps` steps on `ranks` ranks of `threads`
/// threads, saving the end state to `save`.
fn pellet_run(
    player: &Path,
    scene: &Path,
    ranks: u32,
    threads: usize,
    (warm, steps): (u32, u32),
    save: &Path,
) -> anyhow::Result<RankRun> {
    let every = gcd(warm, steps).max(1);
    let stats = save.with_extension("jsonl");
    let mut cmd = if ranks > 1 {
        let mut c = Command::new("mpirun");
        c.arg("-np").arg(ranks.to_string());
        if threads > 1 {
            // Each rank bound to its own `threads` cores.
            c.arg("--map-by").arg(format!("slot:PE={threads}"));
        }
        c.arg("--oversubscribe").arg(player);
        c
    } else {
        Command::new(player)
    };
    cmd.arg("run")
        .arg(scene)
        .args(["--headless", "--backend", "cpu"])
        .arg("--steps")
        .arg((warm + steps).to_string())
        .arg("--stats-every")
        .arg(every.to_string())
        .arg("--stats")
        .arg(&stats)
        .arg("--save")
        .arg(save)
        .env("RAYON_NUM_THREADS", threads.to_string())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = cmd.output()?;
    anyhow::ensure!(
        out.status.success(),
        "{} ranks: {}",
        ranks,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let text = std::fs::read_to_string(&stats)?;
    let mut run = RankRun::default();
    let (mut prev_step, mut first_bytes, mut last_bytes) = (0u64, None, 0u64);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let step = v["step"].as_u64().unwrap_or(0);
        let bytes = v["ranks"]["bytes_sent"].as_u64().unwrap_or(0);
        if step > u64::from(warm) {
            let ms = v["ms_per_step"].as_f64().unwrap_or(f64::NAN);
            run.seconds += ms * (step - prev_step) as f64 / 1e3;
            first_bytes.get_or_insert(last_bytes);
        }
        if let Some(r) = v.get("ranks") {
            run.imbalance = r["imbalance"].as_f64().unwrap_or(1.0);
            run.halo = r["halo"]
                .as_array()
                .map(|a| a.iter().filter_map(|h| h.as_u64()).collect())
                .unwrap_or_default();
        } else {
            run.imbalance = 1.0;
        }
        prev_step = step;
        last_bytes = bytes;
    }
    anyhow::ensure!(
        prev_step == u64::from(warm + steps) && run.seconds.is_finite() && run.seconds > 0.0,
        "{ranks} ranks: the --stats lines stop at step {prev_step}"
    );
    run.bytes_per_step = (last_bytes - first_bytes.unwrap_or(0)) as f64 / f64::from(steps);
    Ok(run)
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Rows for the pack on 1 and 2 ranks against LIGGGHTS on 1 and 2 ranks,
/// and 2 ranks against 1 (the strong scaling).
pub fn run(samples: usize, quick: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    let Some(player) = mpi_player() else {
        eprintln!(
            "bench: no MPI player (PELLET_BENCH_MPI_PLAYER; scripts/bench.sh builds it): the rank rows are skipped"
        );
        return rows;
    };
    if Command::new("mpirun").arg("--version").output().is_err() {
        eprintln!("bench: mpirun is not installed: the rank rows are skipped");
        return rows;
    }
    let dir = std::env::temp_dir().join(format!("pellet-bench-ranks-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("bench: cannot create {}: {e}", dir.display());
        return rows;
    }
    // Warm-up and timed steps equal, so `--stats-every` splits the run
    // into one untimed and one timed batch (each batch starts with one
    // unfused Verlet pass, as any `advance` does).
    let (n, warm, steps) = if quick { (20, 40, 40) } else { (100, 20, 20) };
    let particles = u64::from(n).pow(3);
    let scene = dir.join(format!("pack{n}.toml"));
    if let Err(e) = std::fs::write(&scene, super::sim::scene_toml(n)) {
        eprintln!("bench: {e}");
        return rows;
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let threads = if cores >= 4 { 2 } else { 1 };
    let samples = samples.clamp(3, 5);
    let rank_counts = [1u32, 2];
    let mut pellet: Vec<Option<Vec<RankRun>>> = vec![Some(Vec::new()); rank_counts.len()];
    let mut peer: Vec<Option<Vec<f64>>> = vec![Some(Vec::new()); rank_counts.len()];
    let mut identical = true;
    // One sample of every side per round, round after round, so a slow
    // spell of the machine falls on both sides of a ratio.
    for round in 0..samples {
        for (k, &ranks) in rank_counts.iter().enumerate() {
            let Some(runs) = &mut pellet[k] else { continue };
            eprintln!(
                "bench: ranks: Pellet on {ranks} rank(s) x {threads} thread(s), {particles} particles (round {} of {samples})",
                round + 1
            );
            let save = dir.join(format!("end-{ranks}.pellet"));
            match pellet_run(&player, &scene, ranks, threads, (warm, steps), &save) {
                Ok(r) => runs.push(r),
                Err(e) => {
                    eprintln!("bench: ranks: Pellet failed: {e}");
                    pellet[k] = None;
                }
            }
        }
        let one = std::fs::read(dir.join("end-1.pellet")).ok();
        let two = std::fs::read(dir.join("end-2.pellet")).ok();
        identical &= one.is_some() && one == two;
        for (k, &ranks) in rank_counts.iter().enumerate() {
            let Some(v) = &mut peer[k] else { continue };
            eprintln!(
                "bench: ranks: LIGGGHTS on {ranks} rank(s), {particles} particles (round {} of {samples})",
                round + 1
            );
            match super::sim::liggghts_deck("pack", &n.to_string(), warm, steps, ranks, 1) {
                Some(t) => v.push(t.median_s),
                None => peer[k] = None,
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let timing = |runs: &[RankRun]| Timing::of(&runs.iter().map(|r| r.seconds).collect::<Vec<_>>());
    let median_run = |runs: &[RankRun]| -> Option<RankRun> {
        let t = timing(runs)?;
        runs.iter().find(|r| r.seconds == t.median_s).cloned()
    };
    let workload =
        format!("{particles} spheres, simple-cubic touching pack, {warm} warm-up + {steps} steps");
    let rate = |t: &Timing| particles as f64 * f64::from(steps) / t.median_s / 1e6;
    let timings: Vec<Option<Timing>> = pellet
        .iter()
        .map(|r| r.as_deref().and_then(timing))
        .collect();
    let peer_timings: Vec<Option<Timing>> = peer
        .iter()
        .map(|r| r.as_deref().and_then(Timing::of))
        .collect();
    let oversubscribed = if 2 * threads > cores {
        format!("; this machine has {cores} cores, so 2 ranks of {threads} thread(s) share them")
    } else {
        String::new()
    };
    for (k, &ranks) in rank_counts.iter().enumerate() {
        let Some(t) = timings[k].clone() else {
            continue;
        };
        let run = pellet[k]
            .as_deref()
            .and_then(median_run)
            .unwrap_or_default();
        let s = if ranks > 1 { "s" } else { "" };
        let mut notes = format!(
            "Pellet {:.2} M particle-steps/s on {ranks} rank{s} x {threads} thread(s) ({} pair lanes)",
            rate(&t),
            pellet_sim::pairlist::dispatch::simd_level()
        );
        if let Some(p) = &peer_timings[k] {
            notes += &format!("; LIGGGHTS {:.2} M/s on {ranks} rank{s}", rate(p));
        }
        if ranks > 1 {
            notes += &format!(
                "; {:.0} kB exchanged per step ({:.0} B per particle), halos of {} particles, imbalance {:.3}; end state byte for byte the 1-rank state: {}{oversubscribed}",
                run.bytes_per_step / 1e3,
                run.bytes_per_step / particles as f64,
                run.halo
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" + "),
                run.imbalance,
                if identical { "yes" } else { "NO" }
            );
        }
        notes += &format!(
            "; {} rounds, Pellet and LIGGGHTS interleaved; Pellet timed from its --stats lines",
            t.samples
        );
        rows.push(Row {
            group: "particle simulation across ranks",
            name: format!(
                "CPU engine, {ranks} MPI rank{s} x {threads} thread(s) vs LIGGGHTS ({ranks} rank{s})"
            ),
            workload: workload.clone(),
            pellet: t,
            peer: format!("LIGGGHTS 3.8 hooke/history, {ranks} MPI rank{s}"),
            peer_timing: peer_timings[k].clone(),
            notes,
        });
    }
    if let (Some(one), Some(two)) = (&timings[0], &timings[1]) {
        let speedup = one.median_s / two.median_s;
        let mut notes = format!(
            "strong scaling: 2 ranks {speedup:.2}x of 1 rank, efficiency {:.0} %",
            50.0 * speedup
        );
        if let (Some(l1), Some(l2)) = (&peer_timings[0], &peer_timings[1]) {
            let s = l1.median_s / l2.median_s;
            notes += &format!(
                "; LIGGGHTS 2 ranks {s:.2}x of 1 rank, efficiency {:.0} %",
                50.0 * s
            );
        }
        notes += &format!(
            "; target 1.8x on a machine with 4 cores or more (reported, not gated){oversubscribed}"
        );
        rows.push(Row {
            group: "particle simulation across ranks",
            name: format!("CPU engine, 2 MPI ranks vs 1 rank ({threads} thread(s) each)"),
            workload,
            pellet: two.clone(),
            peer: "Pellet on 1 rank".into(),
            peer_timing: Some(one.clone()),
            notes,
        });
    }
    rows
}
