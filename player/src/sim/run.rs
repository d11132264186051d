//! `player run --headless`: steps a scene without a window, writing
//! statistics lines and snapshots.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pellet_formats::assets::{BakedScene, ParticleBody, particle_object};
use pellet_formats::baked_folder::{BakedFolderError, read_manifest, read_object};
use pellet_formats::io::write_asset;
use pellet_formats::scene::MAX_STEPS;
use pellet_formats::scene::ParticleOrigin;
use pellet_formats::{DecodeLimits, Scene};
use pellet_gpu::{BackendChoice, Gpu};

use super::setup::{BodyRequest, BodySource};
use super::{GridMode, SimError, SimOptions, SimSetup, Simulation, StepStats};
use crate::PlayerError;

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
    /// Where baked bodies are cached; `None`: [`default_cache_dir`].
    pub cache_dir: Option<PathBuf>,
    /// Headless frames to render (PNG), if any.
    pub frames: Option<FrameOptions>,
    /// Device memory the GPU backend may use, bytes: a scene that needs more
    /// is stepped block by block (`super::blocks`). `None`: in core, or block
    /// by block when the scene exceeds the device's buffer limits.
    pub device_budget: Option<u64>,
}

/// `--frames N --out DIR [--size WxH] [--every K]`.
#[derive(Debug, Clone)]
pub struct FrameOptions {
    /// Frames to write; the run takes `count * every` steps.
    pub count: u64,
    /// Folder of `frame_<k>.png`.
    pub out: PathBuf,
    /// Pixels.
    pub width: u32,
    /// Pixels.
    pub height: u32,
    /// Steps between frames; `None`: one frame per 1/60 s of simulated time.
    pub every: Option<u64>,
    /// Colouring.
    pub colour: crate::render::ColourMode,
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
            cache_dir: None,
            frames: None,
            device_budget: None,
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
    /// Particles simulated (free and in bodies).
    pub particles: usize,
    /// Rigid bodies.
    pub bodies: usize,
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
    /// Headless frames written.
    pub frames: u64,
    /// Block-wise stepping, when the scene did not fit the device.
    pub blocks: Option<super::blocks::BlockStats>,
}

/// Speed coloured fully red by `--colour speed`, m/s.
const SPEED_SCALE: f32 = 2.0;

/// Most steps recorded into one GPU submission.
const MAX_BATCH: u64 = 50;

/// Loads `scene_path` and sets up its simulation, baking its bodies'
/// meshes through the default cache.
pub fn load_setup(scene_path: &Path, grid: GridMode) -> Result<SimSetup, PlayerError> {
    load_setup_cached(scene_path, grid, default_cache_dir())
}

/// [`load_setup`] with the body cache in `cache_dir` (`None`: no cache).
pub fn load_setup_cached(
    scene_path: &Path,
    grid: GridMode,
    cache_dir: Option<PathBuf>,
) -> Result<SimSetup, PlayerError> {
    if crate::remote::is_url(scene_path) {
        let root = crate::remote::http_cache_root(cache_dir.as_deref());
        let folder = crate::remote::fetch_baked_folder(&scene_path.to_string_lossy(), &root)?;
        return load_baked_folder(&folder, grid);
    }
    if scene_path.is_dir() {
        return load_baked_folder(scene_path, grid);
    }
    refuse_state_file(scene_path)?;
    let scene = Scene::load(scene_path)?;
    let dir = scene_path.parent().unwrap_or(Path::new("."));
    #[cfg(feature = "bake")]
    let mut bodies = super::bodies::MeshBaker::new(cache_dir);
    #[cfg(not(feature = "bake"))]
    let mut bodies = {
        let _ = cache_dir;
        NoMeshBaker
    };
    Ok(SimSetup::from_scene_with_bodies(
        &scene,
        dir,
        SimOptions { grid },
        &mut bodies,
    )?)
}

/// `$XDG_CACHE_HOME/pellet/bodies`, else `$HOME/.cache/pellet/bodies`: where
/// bodies baked on the fly are kept (the HTTP cache lives below it, in `http/`).
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("pellet").join("bodies"))
}

/// The body source of a player built without `bake`: a TOML scene's mesh
/// bodies cannot be baked here.
#[cfg(not(feature = "bake"))]
struct NoMeshBaker;

#[cfg(not(feature = "bake"))]
impl BodySource for NoMeshBaker {
    fn body(&mut self, index: usize, request: &BodyRequest) -> Result<ParticleBody, SimError> {
        Err(SimError::BodyUnavailable {
            index,
            error: format!(
                "{}: this player was built without bake (--no-default-features), so it cannot bake meshes; bake the scene into a folder first (bake scene SCENE.toml -o DIR) and play that",
                request.mesh.display()
            )
            .into(),
        })
    }
}

/// A saved state (`.pellet`) given where a scene belongs gets a message that
/// says what the file is and how to use it.
pub fn refuse_state_file(path: &Path) -> Result<(), PlayerError> {
    let magic = pellet_formats::container::MAGIC;
    let mut head = vec![0u8; magic.len()];
    let is_container = path.is_file()
        && std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
            .is_ok()
        && head[..] == magic[..];
    if is_container {
        return Err(PlayerError::NotAScene {
            path: path.to_path_buf(),
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        });
    }
    Ok(())
}

/// Bodies read from a baked folder's objects, hashes checked.
struct FolderBodies<'a> {
    dir: &'a Path,
    refs: Vec<pellet_formats::assets::BakedBodyRef>,
}

impl BodySource for FolderBodies<'_> {
    fn body(&mut self, index: usize, _request: &BodyRequest) -> Result<ParticleBody, SimError> {
        let r = self
            .refs
            .get(index)
            .ok_or_else(|| SimError::BodyUnavailable {
                index,
                error: format!(
                    "{}: the baked folder has no body for it",
                    self.dir.display()
                )
                .into(),
            })?;
        Ok(read_object(self.dir, &r.object, &DecodeLimits::default())?)
    }
}

/// Sets up the scene of a baked folder (`bake scene -o DIR`). The folder
/// stands alone: the baked scene may name only objects of the manifest, by
/// hash (its particle files as `<hash>.pellet`, its bodies as object
/// hashes), and every object is hash-checked as it is read, so a tampered or
/// hostile folder can make the player read nothing outside it.
pub fn load_baked_folder(dir: &Path, grid: GridMode) -> Result<SimSetup, PlayerError> {
    let baked = read_baked_scene(dir)?;
    let mut bodies = FolderBodies {
        dir,
        refs: baked.bodies.clone(),
    };
    Ok(SimSetup::from_scene_with_bodies(
        &baked.scene,
        dir,
        SimOptions { grid },
        &mut bodies,
    )?)
}

/// The scene `path` names, and the folder its relative files resolve in: a
/// scene TOML, a baked folder, or the URL of one (fetched into the HTTP
/// cache below `cache_dir`).
pub fn read_scene(path: &Path, cache_dir: Option<&Path>) -> Result<(Scene, PathBuf), PlayerError> {
    if crate::remote::is_url(path) {
        let root = crate::remote::http_cache_root(cache_dir);
        let folder = crate::remote::fetch_baked_folder(&path.to_string_lossy(), &root)?;
        return Ok((read_baked_scene(&folder)?.scene, folder));
    }
    if path.is_dir() {
        return Ok((read_baked_scene(path)?.scene, path.to_path_buf()));
    }
    refuse_state_file(path)?;
    let scene = Scene::load(path)?;
    Ok((scene, path.parent().unwrap_or(Path::new(".")).to_path_buf()))
}

/// Reads the baked scene of folder `dir` and checks that it names only
/// objects of its manifest (see [`load_baked_folder`]).
pub fn read_baked_scene(dir: &Path) -> Result<BakedScene, PlayerError> {
    let limits = DecodeLimits::default();
    if !dir
        .join(pellet_formats::baked_folder::MANIFEST_FILE)
        .exists()
    {
        return Err(PlayerError::NotBakedFolder {
            dir: dir.to_path_buf(),
        });
    }
    let manifest = read_manifest(dir, &limits)?;
    let baked: BakedScene = read_object(dir, &manifest.scene, &limits)?;
    baked
        .objects_in(&manifest)
        .map_err(|what| PlayerError::Confinement {
            dir: dir.to_path_buf(),
            what,
        })?;
    // Check the particle objects' hashes before the scene reads (and
    // decodes) them; the bytes come from the page cache the second time.
    for source in &baked.scene.particles {
        if let ParticleOrigin::File(file) = &source.origin
            && let Some(hash) = particle_object(file)
        {
            let path = pellet_formats::baked_folder::object_path(dir, hash);
            let bytes = pellet_formats::io::read_regular_file(
                &path,
                pellet_formats::container::DEFAULT_MAX_PAYLOAD,
            )
            .map_err(|e| BakedFolderError::Io {
                path: path.clone(),
                error: std::io::Error::other(e),
            })?;
            let actual = pellet_formats::baked_folder::content_hash(&bytes);
            if actual != hash {
                return Err(BakedFolderError::HashMismatch {
                    path,
                    expected: hash.to_owned(),
                    actual,
                }
                .into());
            }
        }
    }
    Ok(baked)
}

/// Starts a simulation of `setup` on `backend`, in core.
pub fn start(setup: &SimSetup, backend: Backend) -> Result<Simulation, SimError> {
    start_within(setup, backend, None)
}

/// Starts a simulation of `setup` on `backend`. On the GPU, a scene whose
/// state needs more than `budget` bytes (or, without a budget, more than the
/// device's buffers hold) is stepped block by block.
pub fn start_within(
    setup: &SimSetup,
    backend: Backend,
    budget: Option<u64>,
) -> Result<Simulation, SimError> {
    if setup.slots_set {
        tracing::warn!(
            "simulation.contact_slots is obsolete and ignored: each contact's spring lives with its \
             pair in the neighbour list, with no cap"
        );
    }
    let choice = match backend {
        Backend::Gpu(choice) => choice,
        Backend::Cpu => return Ok(Simulation::cpu(setup)),
    };
    let gpu = Arc::new(Gpu::new(choice)?);
    let needed = super::blocks::in_core_bytes(setup);
    match budget {
        Some(budget) if needed > budget => {
            tracing::info!(
                "the state needs {:.1} MiB on the device, over the {:.1} MiB budget: stepping block by block",
                needed as f64 / 1048576.0,
                budget as f64 / 1048576.0
            );
            Simulation::blocks(gpu, setup, budget)
        }
        Some(_) => Simulation::gpu(gpu, setup),
        None => match Simulation::gpu(gpu.clone(), setup) {
            Err(why @ SimError::BufferTooLarge { .. }) => {
                tracing::info!("{why}: stepping block by block");
                Simulation::blocks(gpu, setup, u64::MAX)
            }
            other => other,
        },
    }
}

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> PlayerError + '_ {
    move |error| PlayerError::Write {
        path: path.to_path_buf(),
        error,
    }
}

/// Refuses, before any loading or stepping, output paths that could not be
/// written at the end: `--save`, `--stats`, `--save-dir`, `--out`.
pub fn check_outputs(options: &RunOptions) -> Result<(), PlayerError> {
    let output = |flag: &'static str| move |error| PlayerError::Output { flag, error };
    let file = |flag: &'static str, p: &Path| {
        pellet_formats::io::check_output_file(p).map_err(output(flag))
    };
    let folder = |flag: &'static str, p: &Path| {
        pellet_formats::io::check_output_folder(p).map_err(output(flag))
    };
    if let Some(p) = &options.save {
        file("--save", p)?;
    }
    if let Some(p) = &options.stats {
        file("--stats", p)?;
    }
    if let Some(p) = &options.save_dir {
        folder("--save-dir", p)?;
    }
    if let Some(f) = &options.frames {
        folder("--out", &f.out)?;
    }
    Ok(())
}

/// Largest statistic a sane run reaches: a kinetic energy or speed beyond
/// these (or not finite) means the run blew up.
fn check_stats(stats: &StepStats) -> Result<(), SimError> {
    let what = if !stats.kinetic_energy.is_finite() {
        format!("the kinetic energy is {} J", stats.kinetic_energy)
    } else if !stats.max_speed.is_finite()
        || stats.max_speed > f64::from(pellet_formats::assets::MAX_SPEED_M_S)
    {
        format!(
            "the fastest particle moves at {:.3e} m/s, beyond the speed of light",
            stats.max_speed
        )
    } else {
        return Ok(());
    };
    Err(SimError::BlewUp {
        step: stats.step,
        what: format!("{what} (time step too large, or forces beyond what the scene can hold?)"),
    })
}

/// Runs `scene_path` headless. `progress(step, total)` is called after each batch.
pub fn run_headless(
    scene_path: &Path,
    options: &RunOptions,
    mut progress: impl FnMut(u64, u64),
) -> Result<RunSummary, PlayerError> {
    check_outputs(options)?;
    if let Some(steps) = options.steps
        && steps > MAX_STEPS
    {
        return Err(PlayerError::TooManySteps {
            what: format!("--steps {steps}"),
            steps: steps as f64,
            hint: "",
        });
    }
    let cache = options.cache_dir.clone().or_else(default_cache_dir);
    let setup = load_setup_cached(scene_path, options.grid, cache)?;
    if setup.particles.is_empty() {
        return Err(PlayerError::NoParticles {
            scene: scene_path.to_path_buf(),
        });
    }
    let frame_every = options.frames.as_ref().map(|f| {
        f.every
            .unwrap_or_else(|| ((1.0 / 60.0) / setup.dt).round().max(1.0) as u64)
    });
    let total = match (&options.frames, frame_every) {
        (Some(f), Some(k)) => f.count.saturating_sub(1).saturating_mul(k),
        _ => match options.steps {
            Some(steps) => steps,
            None => {
                let steps = (setup.duration / setup.dt).ceil();
                if steps.is_nan() || steps > MAX_STEPS as f64 {
                    return Err(PlayerError::TooManySteps {
                        what: format!(
                            "{}: simulation.duration {} s at a time step of {:.3e} s",
                            scene_path.display(),
                            setup.duration,
                            setup.dt
                        ),
                        steps,
                        hint: "; lengthen the time step or give --steps",
                    });
                }
                steps as u64
            }
        },
    };
    if total > MAX_STEPS {
        return Err(PlayerError::TooManySteps {
            what: "the run of --frames x --every".into(),
            steps: total as f64,
            hint: "",
        });
    }
    if options.save_every.is_some() != options.save_dir.is_some() {
        return Err(PlayerError::Options(
            "--save-every and --save-dir go together",
        ));
    }
    if options.stats_every == 0 || options.save_every == Some(0) {
        return Err(PlayerError::Options("step intervals must be at least 1"));
    }
    // Under mpirun each process is one rank of the CPU engine; rank 0
    // alone writes the outputs (every rank takes part in every gather).
    let ranks = RankLaunch::detect()?;
    let mut stats_out = match &options.stats {
        Some(p) if ranks.writes() => Some(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(write_err(p))?,
        )),
        _ => None,
    };
    let mut sim = match ranks.start(&setup)? {
        Some(sim) => sim,
        None => start_within(&setup, options.backend, options.device_budget)?,
    };
    let mut renderer = match &options.frames {
        Some(f) => {
            let Some(gs) = sim.gpu_sim() else {
                return Err(PlayerError::Options(if sim.block_stats().is_some() {
                    "--frames renders from the GPU's buffers, which hold one block at a time here: save states (--save-every) and render those"
                } else {
                    "--frames renders from the GPU's buffers: use --backend gpu"
                }));
            };
            std::fs::create_dir_all(&f.out).map_err(write_err(&f.out))?;
            let r = crate::render::FrameRenderer::new(gs, &setup, f.width, f.height)?;
            let min = setup.grid.origin;
            let max: [f32; 3] =
                std::array::from_fn(|k| min[k] + setup.grid.dims[k] as f32 * setup.grid.cell_size);
            let camera = crate::render::Camera::frame_particles(&setup.particles.pos, min, max);
            Some((r, camera, f))
        }
        None => None,
    };
    let mut frames_written = 0u64;
    let mut write_frame = |sim: &Simulation| -> Result<(), PlayerError> {
        if let Some((r, camera, f)) = &mut renderer {
            if let Some(gs) = sim.gpu_sim() {
                r.follow(gs);
            }
            let img = r.render(camera, f.colour, SPEED_SCALE)?;
            let path = f.out.join(format!("frame_{frames_written:05}.png"));
            img.save(&path)
                .map_err(|e| write_err(&path)(std::io::Error::other(e)))?;
            frames_written += 1;
        }
        Ok(())
    };
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
    write_frame(&sim)?;
    while sim.steps() < total {
        let done = sim.steps();
        let mut next = (done + MAX_BATCH).min(total);
        next = next.min((done / options.stats_every + 1) * options.stats_every);
        if let Some(k) = options.save_every {
            next = next.min((done / k + 1) * k);
        }
        if let Some(k) = frame_every {
            next = next.min((done / k + 1) * k);
        }
        sim.advance((next - done) as u32)?;
        let step = sim.steps();
        if let Some(k) = frame_every
            && step % k == 0
        {
            write_frame(&sim)?;
        }
        if step % options.stats_every == 0 || step == total {
            last = sim.stats()?;
            check_stats(&last)?;
            if let (Some(out), Some(path)) = (&mut stats_out, &options.stats) {
                serde_json::to_writer(&mut *out, &last).map_err(|e| write_err(path)(e.into()))?;
                writeln!(out).map_err(write_err(path))?;
                // One line at a time, so `tail -f` follows a long run.
                out.flush().map_err(write_err(path))?;
            }
        }
        if let (Some(k), Some(dir)) = (options.save_every, &options.save_dir)
            && step % k == 0
        {
            let path = dir.join(format!("state_{step:08}.pellet"));
            let state = sim.snapshot()?;
            if ranks.writes() {
                write_asset(&path, &state)?;
            }
            saved.push(path);
        }
        progress(step, total);
    }
    if let (Some(out), Some(path)) = (&mut stats_out, &options.stats) {
        out.flush().map_err(write_err(path))?;
    }
    let seconds = started.elapsed().as_secs_f64();
    if let Some(path) = &options.save {
        let state = sim.snapshot()?;
        if ranks.writes() {
            write_asset(path, &state)?;
        }
        saved.push(path.clone());
    }
    let steps = sim.steps();
    Ok(RunSummary {
        frames: frames_written,
        scene: setup.name.clone(),
        backend: sim.backend_name(),
        particles: sim.particles(),
        bodies: setup.bodies.len(),
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
        blocks: sim.block_stats().cloned(),
    })
}

/// Whether this process was started by `mpirun` as one of several ranks
/// (Open MPI's or a PMI launcher's environment).
pub fn launched_ranks() -> Option<(usize, usize)> {
    let var = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| std::env::var(n).ok()?.parse::<usize>().ok())
    };
    let size = var(&["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"])?;
    let rank = var(&["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"]).unwrap_or(0);
    Some((rank, size))
}

/// How this run was launched: alone, or as one MPI rank (the universe
/// lives as long as the run).
struct RankLaunch {
    rank: usize,
    #[cfg(feature = "mpi")]
    universe: Option<mpi::environment::Universe>,
}

impl RankLaunch {
    fn detect() -> Result<Self, PlayerError> {
        let launched = launched_ranks();
        #[cfg(feature = "mpi")]
        {
            let universe = match launched {
                Some(_) => Some(mpi::initialize().ok_or(PlayerError::Options(
                    "MPI was already initialised in this process",
                ))?),
                None => None,
            };
            let rank = universe.as_ref().map_or(0, |u| {
                use mpi::traits::Communicator;
                u.world().rank() as usize
            });
            Ok(Self { rank, universe })
        }
        #[cfg(not(feature = "mpi"))]
        match launched {
            Some((_, size)) if size > 1 => Err(PlayerError::Options(
                "started by mpirun with several ranks, but this player was built without MPI: build it with `cargo build --release -p pellet-player --features mpi`",
            )),
            _ => Ok(Self { rank: 0 }),
        }
    }

    /// Whether this process writes the outputs (rank 0, or alone).
    fn writes(&self) -> bool {
        self.rank == 0
    }

    /// The ranked CPU engine, when launched by mpirun.
    fn start(&self, setup: &SimSetup) -> Result<Option<Simulation>, PlayerError> {
        #[cfg(feature = "mpi")]
        if let Some(u) = &self.universe {
            let comm = crate::sim::mpi::MpiComm::new(u.world());
            return Ok(Some(Simulation::ranked(setup, Box::new(comm))?));
        }
        let _ = setup;
        Ok(None)
    }
}
