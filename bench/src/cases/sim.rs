//! The particle core against LIGGGHTS 3.8 on the same touching simple-cubic
//! pack (`bench/peers/liggghts_pack.in`): spheres of radius 10 mm at spacing
//! 20 mm in a walled box, gravity, kn = 10^4 N/m, kt = 2/7 kn, restitution
//! 0.5, friction 0.5, dt = 10^-5 s. Both sides take the same warm-up steps
//! untimed, then the same timed steps; LIGGGHTS times itself ("Loop time").
//!
//! Also measures this machine's memory bandwidth (a parallel copy) and sets
//! it against the bytes the CPU backend must stream per particle-step.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use pellet_gpu::{BackendChoice, Gpu};
use pellet_player::sim::run::load_setup;
use pellet_sim::{GridMode, Simulation};

use crate::harness::{Row, Timing, time};

/// Bytes the CPU backend (the pair-list engine) streams per particle-step
/// in this pack, where each particle lists 3 pairs (its face neighbours),
/// counted array by array between rebuilds (neighbour reads hit cache:
/// particles are sorted by cell and a slab is processed while it is in
/// L2): gravity and walls read position, velocity, spin and write force
/// and torque (80); each listed pair reads its ids, stiffnesses, friction,
/// damping and sign (28) and reads and writes its spring (24), 3 x 52 =
/// 156; the fused Verlet update reads and writes position, velocity and
/// spin (96) and reads force, torque, ids and the build position (60).
/// The GPU kernels' twin streamed 928 B.
pub const CPU_BYTES_PER_PARTICLE_STEP: f64 = 392.0;

/// Where a pack row's Pellet run goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunOn {
    /// The CPU backend.
    Cpu,
    /// The GPU path on this process's adapter.
    Gpu,
    /// The GPU path in a child process under the second Vulkan driver of
    /// [`alt_driver`].
    SecondDriver,
}

/// A second Vulkan driver to run the GPU path under, from the bench's
/// environment: `PELLET_BENCH_ALT_ICD` (an ICD manifest) and
/// `PELLET_BENCH_ALT_LIB` (its library folder). `scripts/bench.sh` sets them
/// to Mesa 25's lavapipe (`scripts/lavapipe-backports.sh`) when it can.
fn alt_driver() -> Option<(String, String)> {
    let icd = std::env::var("PELLET_BENCH_ALT_ICD").ok()?;
    let lib = std::env::var("PELLET_BENCH_ALT_LIB").unwrap_or_default();
    Path::new(&icd).is_file().then_some((icd, lib))
}

/// One GPU-path sample of `scene` in a child process under the
/// [`alt_driver`]: its timed seconds and its driver's name.
fn pellet_alt(scene: &Path, warm: u32, steps: u32) -> anyhow::Result<(f64, String)> {
    let (icd, lib) = alt_driver().ok_or_else(|| anyhow::anyhow!("no second driver"))?;
    let library_path = match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{lib}:{old}"),
        _ => lib,
    };
    let out = Command::new(std::env::current_exe()?)
        .arg("--sim-child")
        .arg(format!("{}:{warm}:{steps}", scene.display()))
        .env("VK_ICD_FILENAMES", icd)
        .env("LD_LIBRARY_PATH", library_path)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        anyhow::bail!(
            "child failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
    }
    let (secs, driver) = text
        .trim()
        .split_once('\t')
        .ok_or_else(|| anyhow::anyhow!("child printed {text:?}"))?;
    Ok((secs.parse()?, driver.to_string()))
}

/// `pellet-bench --sim-child SCENE:WARM:STEPS`: one GPU-path sample on this
/// process's adapter; prints the seconds, a tab, and the driver.
pub fn child(spec: &str) -> anyhow::Result<()> {
    let mut parts = spec.rsplitn(3, ':');
    let (Some(steps), Some(warm), Some(scene)) = (parts.next(), parts.next(), parts.next()) else {
        anyhow::bail!("--sim-child wants SCENE:WARM:STEPS, not {spec:?}");
    };
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto)?);
    let (timing, _) = pellet(
        Path::new(scene),
        Some(&gpu),
        warm.parse()?,
        steps.parse()?,
        1,
    )?;
    println!("{}\t{}", timing.median_s, driver_name(&gpu));
    Ok(())
}

/// The adapter and its driver, e.g. `llvmpipe (LLVM 15.0.6, 256 bits), llvmpipe Mesa 22.3.6 (LLVM 15.0.6)`.
fn driver_name(gpu: &Gpu) -> String {
    format!("{}, {}", gpu.report.name, gpu.report.driver_info)
}

/// The Mesa version in a driver name (`... Mesa 25.0.7-2~bpo12+1 ...` gives
/// `25.0.7`), or `?`.
fn mesa_version(driver: &str) -> &str {
    driver
        .split_once("Mesa ")
        .and_then(|(_, rest)| rest.split(['-', ' ']).next())
        .filter(|v| !v.is_empty())
        .unwrap_or("?")
}

/// What a timed run reports besides its time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RunInfo {
    /// Neighbour-list builds per 1000 steps (CPU backend), over the timed steps.
    pub(crate) rebuilds_per_1000: f64,
}

/// The touching simple-cubic pack of `n`^3 spheres as a scene file.
pub(crate) fn scene_toml(n: u32) -> String {
    let side = f64::from(n) * 0.02;
    format!(
        "name = \"pack{n}\"\n[simulation]\nparticle_radius = 0.01\ngravity = [0, -9.81, 0]\ntime_step = 1e-5\n\
         [domain]\nmin = [0, 0, 0]\nmax = [{side}, {side}, {side}]\n\
         [materials.default]\ndensity = 2500\nstiffness = 10000\nrestitution = 0.5\nfriction = 0.5\n\
         [[particles]]\nregion = {{ min = [0, 0, 0], max = [{side}, {side}, {side}] }}\nspacing = 0.02\n"
    )
}

/// Median wall time of `steps` steps after `warm` untimed ones, fresh each sample.
pub(crate) fn pellet(
    scene: &Path,
    gpu: Option<&Arc<Gpu>>,
    warm: u32,
    steps: u32,
    samples: usize,
) -> anyhow::Result<(Timing, RunInfo)> {
    pellet_within(scene, gpu, None, warm, steps, samples)
}

/// [`pellet`] with the GPU stepping block by block within `budget` bytes.
fn pellet_within(
    scene: &Path,
    gpu: Option<&Arc<Gpu>>,
    budget: Option<u64>,
    warm: u32,
    steps: u32,
    samples: usize,
) -> anyhow::Result<(Timing, RunInfo)> {
    let setup = load_setup(scene, GridMode::Auto)?;
    let mut info = RunInfo::default();
    let mut runs = Vec::new();
    for _ in 0..samples {
        let mut sim = match (gpu, budget) {
            (Some(g), Some(b)) => Simulation::blocks(g.clone(), &setup, b)?,
            (Some(g), None) => Simulation::gpu(g.clone(), &setup)?,
            (None, _) => Simulation::cpu(&setup),
        };
        sim.advance(warm)?;
        let built = sim.stats()?.rebuilds;
        let start = Instant::now();
        let mut left = steps;
        while left > 0 {
            let k = left.min(50);
            sim.advance(k)?;
            left -= k;
        }
        sim.stats()?; // waits for the GPU
        runs.push(start.elapsed().as_secs_f64());
        let stats = sim.stats()?;
        info = RunInfo {
            rebuilds_per_1000: (stats.rebuilds - built) as f64 * 1000.0 / f64::from(steps.max(1)),
        };
    }
    Ok((
        Timing::of(&runs).ok_or_else(|| anyhow::anyhow!("no samples"))?,
        info,
    ))
}

/// LIGGGHTS' own loop time for `steps` steps of the pack after `warm`, on `procs` ranks.
fn liggghts(n: u32, warm: u32, steps: u32, procs: u32, samples: usize) -> Option<Timing> {
    liggghts_deck("pack", &n.to_string(), warm, steps, procs, samples)
}

/// LIGGGHTS' own loop time on `deck` (`bench/peers/liggghts_run.sh`'s
/// `DECK`: `pack` or `column`) with its first argument `arg`, on `procs`
/// ranks, median of `samples` runs.
pub(crate) fn liggghts_deck(
    deck: &str,
    arg: &str,
    warm: u32,
    steps: u32,
    procs: u32,
    samples: usize,
) -> Option<Timing> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/liggghts_run.sh");
    let mut runs = Vec::new();
    for _ in 0..samples {
        let out = Command::new("bash")
            .arg(&script)
            .arg(arg)
            .arg(steps.to_string())
            .env("DECK", deck)
            .env("WARM", warm.to_string())
            .env("LIGGGHTS_PROCS", procs.to_string())
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "bench: LIGGGHTS did not run: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        runs.push(v["seconds"].as_f64()?);
    }
    Timing::of(&runs)
}

/// Copy bandwidth (bytes read + written per second) over 256 MiB, all threads.
pub fn memory_bandwidth() -> f64 {
    let n = 32 << 20; // 32 Mi f64 = 256 MiB
    let src = vec![1.0f64; n];
    let mut dst = vec![0.0f64; n];
    let t = time(5, || {
        dst.par_chunks_mut(1 << 16)
            .zip(src.par_chunks(1 << 16))
            .for_each(|(d, s)| d.copy_from_slice(s));
    });
    2.0 * (n * 8) as f64 / t.median_s
}

/// Rows for the 80 k and 1 M packs, CPU and GPU paths, against LIGGGHTS on 1 and 2 ranks.
pub fn run(samples: usize, quick: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    let dir = std::env::temp_dir().join(format!("pellet-bench-sim-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("bench: cannot create {}: {e}", dir.display());
        return rows;
    }
    let gpu = Gpu::new(BackendChoice::Auto).ok().map(Arc::new);
    let bandwidth = memory_bandwidth();
    let threads = rayon::current_num_threads();
    // Five rounds at most: a round of the 1 M pack takes about a minute.
    let samples = samples.clamp(3, 5);
    // (pack side, warm-up steps, timed steps CPU, timed steps GPU)
    let cases: &[(u32, u32, u32, u32)] = if quick {
        &[(20, 20, 50, 20)]
    } else {
        &[(43, 100, 200, 50), (100, 10, 20, 5)]
    };
    for &(n, warm, cpu_steps, gpu_steps) in cases {
        let particles = u64::from(n).pow(3);
        let scene = dir.join(format!("pack{n}.toml"));
        if let Err(e) = std::fs::write(&scene, scene_toml(n)) {
            eprintln!("bench: {e}");
            continue;
        }
        let workload = |steps: u32| {
            format!(
                "{particles} spheres, simple-cubic touching pack, {warm} warm-up + {steps} steps"
            )
        };
        // (row name, timed steps, GPU?, CPU threads, LIGGGHTS ranks to compare with)
        let backends: [(&str, u32, RunOn, usize, &[u32]); 4] = [
            ("CPU backend, 1 thread", cpu_steps, RunOn::Cpu, 1, &[1]),
            ("CPU backend", cpu_steps, RunOn::Cpu, threads, &[1, 2]),
            ("GPU path", gpu_steps, RunOn::Gpu, threads, &[1, 2]),
            (
                "GPU path, second driver",
                gpu_steps,
                RunOn::SecondDriver,
                threads,
                &[2],
            ),
        ];
        // The backends this machine runs: the GPU path needs an adapter, the
        // second driver its manifest, and on one core the 1-thread row is the
        // next row's run.
        let runs_here = |&(backend, _, path, backend_threads, _): &(
            &str,
            u32,
            RunOn,
            usize,
            &[u32],
        )| match path {
            RunOn::Gpu => gpu.is_some(),
            RunOn::SecondDriver => alt_driver().is_some(),
            RunOn::Cpu => !(backend_threads == threads && backend.contains("1 thread")),
        };
        let mut alt_name = String::new();
        // Every Pellet run and every LIGGGHTS run (one per timed steps and
        // ranks, shared by the rows) takes one sample per round, round after
        // round, so a slow spell of this shared machine falls on both sides
        // of a ratio instead of on one.
        let mut pellet_runs: Vec<Option<Vec<f64>>> = backends
            .iter()
            .map(|b| runs_here(b).then(Vec::new))
            .collect();
        let mut infos = vec![RunInfo::default(); backends.len()];
        let mut peer_runs: std::collections::BTreeMap<(u32, u32), Option<Vec<f64>>> =
            Default::default();
        for b in backends.iter().filter(|b| runs_here(b)) {
            for &procs in b.4 {
                peer_runs.insert((b.1, procs), Some(Vec::new()));
            }
        }
        for round in 0..samples {
            for (k, &(backend, steps, path, backend_threads, _)) in backends.iter().enumerate() {
                let Some(runs) = &mut pellet_runs[k] else {
                    continue;
                };
                let gpu_ref = if path == RunOn::Gpu {
                    gpu.as_ref()
                } else {
                    None
                };
                eprintln!(
                    "bench: sim {backend}, {particles} particles (round {} of {samples})",
                    round + 1
                );
                if path == RunOn::SecondDriver {
                    match pellet_alt(&scene, warm, steps) {
                        Ok((secs, name)) => {
                            runs.push(secs);
                            alt_name = name;
                        }
                        Err(e) => {
                            eprintln!("bench: sim {backend} failed: {e}");
                            pellet_runs[k] = None;
                        }
                    }
                    continue;
                }
                let run = || pellet(&scene, gpu_ref, warm, steps, 1);
                let result = match rayon::ThreadPoolBuilder::new()
                    .num_threads(backend_threads)
                    .build()
                {
                    Ok(pool) => pool.install(run),
                    Err(e) => Err(e.into()),
                };
                match result {
                    Ok((timing, info)) => {
                        runs.push(timing.median_s);
                        infos[k] = info;
                    }
                    Err(e) => {
                        eprintln!("bench: sim {backend} failed: {e}");
                        pellet_runs[k] = None;
                    }
                }
            }
            for (&(steps, procs), runs) in &mut peer_runs {
                let Some(v) = runs else { continue };
                eprintln!(
                    "bench: LIGGGHTS on {procs} rank(s), {particles} particles, {steps} steps (round {} of {samples})",
                    round + 1
                );
                match liggghts(n, warm, steps, procs, 1) {
                    Some(t) => v.push(t.median_s),
                    None => *runs = None,
                }
            }
        }
        for (k, &(backend, steps, path, backend_threads, ranks)) in backends.iter().enumerate() {
            let on_gpu = path != RunOn::Cpu;
            let Some(timing) = pellet_runs[k].as_deref().and_then(Timing::of) else {
                continue;
            };
            let info = infos[k];
            let rate = particles as f64 * f64::from(steps) / timing.median_s;
            for &procs in ranks {
                let peer = peer_runs
                    .get(&(steps, procs))
                    .and_then(|r| r.as_deref())
                    .and_then(Timing::of);
                let peer_rate = peer
                    .as_ref()
                    .map(|p| particles as f64 * f64::from(steps) / p.median_s);
                let mut notes = format!(
                    "Pellet {:.2} M particle-steps/s on {}",
                    rate / 1e6,
                    if path == RunOn::SecondDriver {
                        alt_name.clone()
                    } else if on_gpu {
                        gpu.as_ref().map_or("GPU".into(), |g| driver_name(g))
                    } else {
                        format!(
                            "{backend_threads} thread{} ({} pair lanes)",
                            if backend_threads > 1 { "s" } else { "" },
                            pellet_sim::pairlist::dispatch::simd_level()
                        )
                    }
                );
                if let Some(r) = peer_rate {
                    notes += &format!("; LIGGGHTS {:.2} M/s on {procs} rank(s)", r / 1e6);
                }
                if !on_gpu {
                    notes += &format!(
                        "; {:.1} neighbour-list builds per 1000 steps; streams ~{CPU_BYTES_PER_PARTICLE_STEP:.0} B/particle-step: {:.1} GB/s of {:.1} GB/s measured copy bandwidth",
                        info.rebuilds_per_1000,
                        rate * CPU_BYTES_PER_PARTICLE_STEP / 1e9,
                        bandwidth / 1e9
                    );
                }
                notes += &format!(
                    "; {} rounds, Pellet and LIGGGHTS samples interleaved",
                    timing.samples
                );
                rows.push(Row {
                    group: "particle simulation",
                    name: format!(
                        "{} vs LIGGGHTS ({procs} rank{})",
                        if path == RunOn::SecondDriver {
                            format!("GPU path, Mesa {} lavapipe", mesa_version(&alt_name))
                        } else {
                            backend.to_string()
                        },
                        if procs > 1 { "s" } else { "" }
                    ),
                    workload: workload(steps),
                    pellet: timing.clone(),
                    peer: format!(
                        "LIGGGHTS 3.8 hooke/history, {procs} MPI rank{}",
                        if procs > 1 { "s" } else { "" }
                    ),
                    peer_timing: peer,
                    notes,
                });
            }
        }
    }
    // The small column against LIGGGHTS, and the ball pit: small scenes,
    // where the fixed cost of a step shows.
    super::column::run(&mut rows, &dir, gpu.as_ref(), samples, quick);
    ball_pit(&mut rows, gpu.as_ref(), samples, quick);
    // Block-wise stepping (the state on the host, forces on the GPU one
    // block at a time) against the same GPU in core, on the smaller pack,
    // with a quarter of the in-core footprint as the budget.
    if let (Some(g), Some(&(n, warm, _, steps))) = (&gpu, cases.first()) {
        let scene = dir.join(format!("pack{n}.toml"));
        let particles = u64::from(n).pow(3);
        if let Ok(setup) = load_setup(&scene, GridMode::Auto) {
            let in_core = pellet_sim::blocks::in_core_bytes(&setup);
            let budget = in_core / 4;
            eprintln!("bench: sim GPU blocks, {particles} particles");
            let core = pellet(&scene, Some(g), warm, steps, samples);
            let blocks = pellet_within(&scene, Some(g), Some(budget), warm, steps, samples);
            match (blocks, core) {
                (Ok((timing, _)), Ok((peer, _))) => rows.push(Row {
                    group: "particle simulation",
                    name: "GPU blocks (1/4 of the in-core memory) vs GPU in core".into(),
                    workload: format!(
                        "{particles} spheres, simple-cubic touching pack, {warm} warm-up + {steps} steps, budget {:.1} of {:.1} MiB",
                        budget as f64 / 1048576.0,
                        in_core as f64 / 1048576.0
                    ),
                    notes: format!(
                        "block-wise {:.2} M particle-steps/s, in core {:.2} M/s; the host keeps the neighbour list and integrates; each step every block uploads its particles, pairs and springs and reads forces and springs back",
                        particles as f64 * f64::from(steps) / timing.median_s / 1e6,
                        particles as f64 * f64::from(steps) / peer.median_s / 1e6
                    ),
                    pellet: timing,
                    peer: format!("Pellet GPU in core ({})", g.report.name),
                    peer_timing: Some(peer),
                }),
                (Err(e), _) | (_, Err(e)) => eprintln!("bench: sim blocks failed: {e}"),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    rows
}

/// The shipped ball pit (4 096 beads falling into a box): milliseconds per
/// step on the CPU backend against the GPU path, where per-step overheads
/// (thread hand-offs, serial stages, rebuilds) dominate.
fn ball_pit(rows: &mut Vec<Row>, gpu: Option<&Arc<Gpu>>, samples: usize, quick: bool) {
    let scene = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/scenes/ballpit.toml");
    let steps = if quick { 200 } else { 2000 };
    let cpu = pellet(&scene, None, 0, steps, samples);
    let on_gpu = gpu.map(|g| pellet(&scene, Some(g), 0, steps / 10, samples));
    let Ok((timing, info)) = cpu else {
        eprintln!("bench: ball pit failed");
        return;
    };
    let ms = |t: &Timing, k: u32| t.median_s * 1e3 / f64::from(k);
    // Scaled to the same number of steps as the CPU run.
    let gpu_timing = on_gpu.and_then(Result::ok).map(|(t, _)| t.scaled(10.0));
    rows.push(Row {
        group: "particle simulation",
        name: "ball pit, CPU backend vs GPU path".into(),
        workload: format!("4096 beads falling into a box, {steps} steps from rest"),
        notes: format!(
            "CPU {:.3} ms/step (target < 0.3), {:.0} neighbour-list builds per 1000 steps{}",
            ms(&timing, steps),
            info.rebuilds_per_1000,
            gpu_timing.as_ref().map_or(String::new(), |g| format!(
                "; GPU path {:.3} ms/step ({} steps, scaled)",
                ms(g, steps),
                steps / 10
            ))
        ),
        pellet: timing,
        peer: gpu.map_or("GPU path (none here)".into(), |g| {
            format!("Pellet GPU path ({})", g.report.name)
        }),
        peer_timing: gpu_timing,
    });
}
