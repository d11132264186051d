//! `player run --headless`: steps a scene without a window, writing
//! statistics lines and snapshots.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pellet_formats::Scene;
use pellet_formats::io::write_asset;
use pellet_gpu::{BackendChoice, Gpu};

use super::{GridMode, SimError, SimOptions, SimSetup, Simulation, StepStats};

/// Where a headless run computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// wgpu compute on the chosen adapter.
    Gpu(BackendChoice),
    /// The CPU twin on all cores.
    Cpu,
}

/// What `run_headless` does.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Steps to take; default the scene's `duration / dt`.
    pub steps: Option<u64>,
    /// Backend.
    pub backend: Backend,
    /// JSON-lines statistics file.
    pub stats: Option<PathBuf>,
    /// Steps between statistics lines. Default 100.
    pub stats_every: u64,
    /// Final snapshot.
    pub save: Option<PathBuf>,
    /// Steps between periodic snapshots (needs `save_dir`).
    pub save_every: Option<u64>,
    /// Folder of periodic snapshots `state_<step>.pellet`.
    pub save_dir: Option<PathBuf>,
    /// Dense or hashed cells.
    pub grid: GridMode,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            steps: None,
            backend: Backend::Gpu(BackendChoice::Auto),
            stats: None,
            stats_every: 100,
            save: None,
            save_every: None,
            save_dir: None,
            grid: GridMode::Auto,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunSummary {
    /// Scene name.
    pub scene: String,
    /// Backend and adapter.
    pub backend: String,
    /// Particles simulated.
    pub particles: usize,
    /// Time step, seconds.
    pub dt: f64,
    /// Steps taken.
    pub steps: u64,
    /// Wall-clock seconds stepping (setup excluded).
    pub seconds: f64,
    /// Particle-steps per second.
    pub particle_steps_per_s: f64,
    /// Statistics after the last step.
    pub last: StepStats,
    /// Snapshots written.
    pub saved: Vec<PathBuf>,
}

/// Most steps recorded into one GPU submission.
const MAX_BATCH: u64 = 50;

/// Loads `scene_path` and sets up its simulation.
pub fn load_setup(scene_path: &Path, grid: GridMode) -> Result<SimSetup, SimError> {
    let scene = Scene::load(scene_path)?;
    let dir = scene_path.parent().unwrap_or(Path::new("."));
    SimSetup::from_scene(&scene, dir, SimOptions { grid })
}

/// Starts a simulation of `setup` on `backend`.
pub fn start(setup: &SimSetup, backend: Backend) -> Result<Simulation, SimError> {
    match backend {
        Backend::Gpu(choice) => Simulation::gpu(Arc::new(Gpu::new(choice)?), setup),
        Backend::Cpu => Ok(Simulation::cpu(setup)),
    }
}

fn write_err(path: &Path, e: impl std::fmt::Display) -> SimError {
    SimError::Invalid(format!("cannot write {}: {e}", path.display()))
}

/// Runs `scene_path` headless. `progress(step, total)` is called after each batch.
pub fn run_headless(
    scene_path: &Path,
    options: &RunOptions,
    mut progress: impl FnMut(u64, u64),
) -> Result<RunSummary, SimError> {
    let setup = load_setup(scene_path, options.grid)?;
    if setup.particles.is_empty() {
        return Err(SimError::Invalid(format!(
            "{} has no particles to simulate",
            scene_path.display()
        )));
    }
    let total = options
        .steps
        .unwrap_or_else(|| (setup.duration / setup.dt).ceil() as u64);
    if options.save_every.is_some() != options.save_dir.is_some() {
        return Err(SimError::Invalid(
            "--save-every and --save-dir go together".into(),
        ));
    }
    if options.stats_every == 0 || options.save_every == Some(0) {
        return Err(SimError::Invalid(
            "step intervals must be at least 1".into(),
        ));
    }
    if let Some(dir) = &options.save_dir {
        std::fs::create_dir_all(dir).map_err(|e| write_err(dir, e))?;
    }
    let mut stats_out = match &options.stats {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| write_err(p, e))?,
        )),
        None => None,
    };
    let mut sim = start(&setup, options.backend)?;
    tracing::info!(
        backend = %sim.backend_name(),
        particles = sim.particles(),
        dt = setup.dt,
        steps = total,
        "running {}",
        setup.name
    );
    let mut saved = Vec::new();
    let started = std::time::Instant::now();
    let mut last = sim.stats()?;
    while sim.steps() < total {
        let done = sim.steps();
        let mut next = (done + MAX_BATCH).min(total);
        next = next.min((done / options.stats_every + 1) * options.stats_every);
        if let Some(k) = options.save_every {
            next = next.min((done / k + 1) * k);
        }
        sim.advance((next - done) as u32)?;
        let step = sim.steps();
        if step % options.stats_every == 0 || step == total {
            last = sim.stats()?;
            if let Some(out) = &mut stats_out {
                serde_json::to_writer(&mut *out, &last)
                    .map_err(|e| SimError::Invalid(e.to_string()))?;
                writeln!(out).map_err(|e| SimError::Invalid(e.to_string()))?;
            }
        }
        if let (Some(k), Some(dir)) = (options.save_every, &options.save_dir)
            && step % k == 0
        {
            let path = dir.join(format!("state_{step:08}.pellet"));
            write_asset(&path, &sim.snapshot()?).map_err(|e| write_err(&path, e))?;
            saved.push(path);
        }
        progress(step, total);
    }
    if let Some(out) = &mut stats_out {
        out.flush().map_err(|e| SimError::Invalid(e.to_string()))?;
    }
    let seconds = started.elapsed().as_secs_f64();
    if let Some(path) = &options.save {
        write_asset(path, &sim.snapshot()?).map_err(|e| write_err(path, e))?;
        saved.push(path.clone());
    }
    let steps = sim.steps();
    Ok(RunSummary {
        scene: setup.name.clone(),
        backend: sim.backend_name(),
        particles: sim.particles(),
        dt: setup.dt,
        steps,
        seconds,
        particle_steps_per_s: if seconds > 0.0 {
            sim.particles() as f64 * steps as f64 / seconds
        } else {
            0.0
        },
        last,
        saved,
    })
}
