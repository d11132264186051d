//! The `player` command line: every subcommand's arguments, with the help
//! text users read. Parsed in `main.rs`, carried out in `commands.rs`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use pellet_player::gpu::BackendChoice;

/// Pellet's player: simulates and shows unified particle / rigid-body scenes.
///
/// `player SCENE` opens a window and plays the scene (a TOML file or a
/// folder written by `bake scene`) in real time: left-drag orbits, right-drag
/// pans, the wheel zooms; space pauses, `.` steps, R resets, F frames
/// everything, C colours by speed, 1-9 switch to the scenes beside it.
/// `player SCENE --headless --frames N --out DIR` renders PNG frames
/// instead, without a display.
///
/// Exit status: 0 on success, 1 on a failure (one line on stderr), 2 on a
/// usage error.
#[derive(Debug, Parser)]
#[command(
    name = "player",
    version,
    about,
    long_about,
    arg_required_else_help = true
)]
pub(crate) struct Cli {
    /// Log more (repeat for more detail); logs go to stderr.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Scene to play: a TOML file or a baked folder.
    pub scene: Option<PathBuf>,
    /// No window: render `--frames` PNGs into `--out`.
    #[arg(long)]
    pub headless: bool,
    #[command(flatten)]
    pub frames: FrameArgs,
    /// Where meshes of `[[bodies]]` are baked and kept.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// For a scene served over HTTP: seconds between conditional polls of its
    /// manifest (an unchanged one costs a 304); changes are swapped in live.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0, value_parser = positive_seconds)]
    pub poll: f64,
    /// Shader hot reload (development): use the simulation's stage shaders
    /// (`common.wgsl`, `sort.wgsl`, `forces.wgsl`, `integrate.wgsl`,
    /// `bodies.wgsl`, `stats.wgsl`, copied from sim/src/stages) and
    /// `spheres.wgsl` (from render/src) found in DIR, any subset, and
    /// rebuild the pipelines when they are saved; a shader that fails
    /// validation is shown and the old pipeline kept.
    #[arg(long, value_name = "DIR", hide_short_help = true)]
    pub shaders: Option<PathBuf>,
    /// Close the window after this many frames (scripted checks).
    #[arg(long, value_name = "N", hide_short_help = true)]
    pub exit_after: Option<u64>,
    /// Save the window's last frame as PNG (with --exit-after).
    #[arg(
        long,
        value_name = "FILE",
        requires = "exit_after",
        hide_short_help = true
    )]
    pub screenshot: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub(crate) enum Command {
    /// Show the GPU adapter Pellet will use, and prove it computes.
    ///
    /// Picks the best adapter (discrete over integrated over software;
    /// Vulkan over OpenGL), prints its name, driver (with Mesa and LLVM
    /// versions on lavapipe) and limits, then runs a compute kernel and
    /// compares every element with its CPU twin.
    ///
    /// Example: player gpu --backend vulkan
    Gpu {
        /// Which wgpu backend to use.
        #[arg(long, default_value_t = BackendChoice::Auto, value_parser = pellet_cli::gpu_backend_parser())]
        backend: BackendChoice,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Load a scene and print what it holds.
    ///
    /// Parses and validates the scene (a TOML file, a baked folder, or the
    /// URL of a served one), generates its particle blocks and reads its
    /// particle files, exactly as a run would.
    ///
    /// Examples:
    ///   player info assets/scenes/ballpit.toml
    ///   player info baked/funnel
    ///   player info http://127.0.0.1:8000/funnel/
    #[command(verbatim_doc_comment)]
    Info {
        /// Scene: a TOML file, a baked folder (`bake scene`), or its URL.
        scene: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Find every point's neighbours within a radius, out of core.
    ///
    /// Sorts the points into a grid of cells at least `--radius` wide,
    /// estimates each cell's neighbours from the neighbour-overlap table,
    /// splits the grid into blocks whose estimated device memory fits
    /// `--device-budget`, and searches each block on the GPU while CPU
    /// threads search the points near block faces. A block whose output
    /// overflows its estimate is split and redone; results are exact (the
    /// same pairs as brute force). Writes CSR neighbour lists (`--out`, format
    /// in docs/nns.md), per-point counts (`--counts`) and a report
    /// (`--report`, JSON).
    ///
    /// Examples:
    ///   player nns --generate uniform --particles 1000000 --radius 0.5 --counts counts.txt
    ///   player nns --points cloud.f32 --radius 0.01 --device-budget 256MiB --out nbrs.bin
    ///   player nns settled.pellet --radius 0.005 --backend cpu --threads 2 --report r.json
    #[command(verbatim_doc_comment)]
    Nns(NnsArgs),
    /// Simulate a scene.
    ///
    /// Steps the scene's particles with the discrete element method (linear
    /// spring-dashpot contacts, Coulomb friction with tangential history,
    /// walls) on the GPU, or on CPU threads with `--backend cpu`. Without
    /// `--steps` it runs the scene's `simulation.duration`.
    ///
    /// Examples:
    ///   player run assets/scenes/ballpit.toml --headless --steps 2000 --stats stats.jsonl
    ///   player run assets/scenes/ballpit.toml --headless --backend cpu --save end.pellet
    ///   player run scene.toml --headless --save-every 1000 --save-dir frames/
    ///   player run big.toml --headless --device-budget 256MiB   (block by block beyond it)
    ///
    /// Then `bake inspect end.pellet --particles` prints the particles as CSV.
    #[command(verbatim_doc_comment)]
    Run(RunArgs),
}

/// Headless frames, shared by `player SCENE --headless` and `player run`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct FrameArgs {
    /// Render this many frames (PNG) into `--out`, one every `--every` steps,
    /// through the GPU renderer.
    #[arg(long, value_name = "N", requires = "out")]
    pub frames: Option<u64>,
    /// Folder for the frames (`frame_00000.png`, ...).
    #[arg(long, value_name = "DIR", requires = "frames")]
    pub out: Option<PathBuf>,
    /// Frame size in pixels, `WIDTHxHEIGHT`.
    #[arg(long, value_name = "WxH", default_value = "1280x720", value_parser = parse_size)]
    pub size: (u32, u32),
    /// Steps between frames (default: 1/60 s of simulated time).
    #[arg(long, value_name = "K")]
    pub every: Option<u64>,
    /// Colour particles by body or by speed.
    #[arg(long, value_enum, default_value_t = ColourArg::Body)]
    pub colour: ColourArg,
}

impl FrameArgs {
    pub(crate) fn options(&self) -> Option<pellet_player::sim::run::FrameOptions> {
        let (Some(count), Some(out)) = (self.frames, self.out.clone()) else {
            return None;
        };
        Some(pellet_player::sim::run::FrameOptions {
            count,
            out,
            width: self.size.0,
            height: self.size.1,
            every: self.every,
            colour: match self.colour {
                ColourArg::Body => pellet_player::render::ColourMode::ByBody,
                ColourArg::Speed => pellet_player::render::ColourMode::BySpeed,
            },
        })
    }
}

/// Particle colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColourArg {
    /// Free particles sand-coloured, each body its own colour.
    Body,
    /// Blue at rest to red at 2 m/s.
    Speed,
}

pub(crate) fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s
        .split_once('x')
        .ok_or_else(|| format!("{s:?}: expected WIDTHxHEIGHT, e.g. 1280x720"))?;
    let parse = |v: &str| {
        v.trim()
            .parse::<u32>()
            .ok()
            .filter(|&n| n > 0 && n <= 16384)
            .ok_or_else(|| format!("{s:?}: sizes are whole numbers from 1 to 16384"))
    };
    Ok((parse(w)?, parse(h)?))
}

/// Where the simulation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BackendArg {
    /// wgpu compute shaders (lavapipe when there is no GPU).
    Gpu,
    /// The CPU twin on all cores.
    Cpu,
}

/// `player nns` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct NnsArgs {
    /// A scene (TOML: its particles and body particles) or a saved state
    /// (`.pellet`). Or give `--points` or `--generate`.
    #[arg(conflicts_with_all = ["points", "generate"])]
    pub input: Option<PathBuf>,
    /// Points to search: CSV `x,y,z` lines, or raw little-endian f32 triples
    /// when the name ends in `.f32`.
    #[arg(long, value_name = "FILE", conflicts_with = "generate")]
    pub points: Option<PathBuf>,
    /// Generate points instead: about 10 per unit cube where packed.
    #[arg(long, value_parser = ["uniform", "pile", "column", "clusters"])]
    pub generate: Option<String>,
    /// Points to generate.
    #[arg(long, default_value_t = 1_000_000, requires = "generate")]
    pub particles: usize,
    /// Seed of the generated points.
    #[arg(long, default_value_t = 1, requires = "generate")]
    pub seed: u64,
    /// Search radius eps, in the points' units.
    #[arg(long, value_name = "EPS")]
    pub radius: f32,
    /// Device memory the blocks may use, e.g. 1GiB, 256MiB, 500MB.
    #[arg(long, default_value = "1GiB", value_parser = pellet_cli::parse_bytes)]
    pub device_budget: u64,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Blocks: `auto` (the workload tree) or `fixed:N` (N^3 cells each).
    #[arg(long, default_value = "auto", value_parser = parse_block)]
    pub block: pellet_player::nns::BlockMode,
    /// How each cell's expected neighbours are estimated for block sizing:
    /// `fitted` counts every 64th cell exactly first and fits the table model
    /// with smoothed counts to it (tighter blocks, measured margin); `table`
    /// is the paper's model alone.
    #[arg(long, value_enum, default_value_t = EstimateArg::Fitted)]
    pub estimate: EstimateArg,
    /// Where the search runs: the GPU with CPU threads alongside, or CPU threads only.
    #[arg(long, value_enum, default_value_t = BackendArg::Gpu)]
    pub backend: BackendArg,
    /// How blocks are shared with `--backend gpu`: `rates` hands them out
    /// from one queue by measured rates (largest to the GPU while it would
    /// finish before CPU threads finish the rest, smallest to CPU threads);
    /// `gpu` gives every block's inner points to the GPU and its faces to
    /// CPU threads (the paper's split); `auto` is `rates`, except on an
    /// adapter that runs on this machine's own cores (llvmpipe, SwiftShader),
    /// where CPU threads search everything.
    #[arg(long, value_enum, default_value_t = ScheduleArg::Auto)]
    pub schedule: ScheduleArg,
    /// Which GPU API to use with `--backend gpu`.
    #[arg(long, default_value_t = BackendChoice::Auto, value_parser = pellet_cli::gpu_backend_parser())]
    pub adapter: BackendChoice,
    /// A neighbour-overlap table (`bake table`); default: a small one baked here.
    #[arg(long, value_name = "FILE")]
    pub table: Option<PathBuf>,
    /// Write the neighbour lists (CSR, docs/nns.md).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Write each point's neighbour count, one line per point, in input order.
    #[arg(long, value_name = "FILE")]
    pub counts: Option<PathBuf>,
    /// Write the report (blocks, estimated and real footprints, phases) as JSON.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `player nns --schedule`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ScheduleArg {
    /// `rates`, or CPU threads alone on a software adapter.
    Auto,
    /// Share blocks by measured rates.
    Rates,
    /// Every block to the GPU, faces to CPU threads.
    Gpu,
}

impl From<ScheduleArg> for pellet_player::nns::Schedule {
    fn from(s: ScheduleArg) -> Self {
        match s {
            ScheduleArg::Auto => Self::Auto,
            ScheduleArg::Rates => Self::Rates,
            ScheduleArg::Gpu => Self::Gpu,
        }
    }
}

/// `player nns --estimate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum EstimateArg {
    /// The paper's model: the overlap table on cell counts.
    Table,
    /// The table model fitted on every 64th cell, counted exactly.
    Fitted,
}

impl From<EstimateArg> for pellet_player::nns::EstimateMode {
    fn from(e: EstimateArg) -> Self {
        match e {
            EstimateArg::Table => pellet_player::nns::EstimateMode::Table,
            EstimateArg::Fitted => pellet_player::nns::EstimateMode::Fitted,
        }
    }
}

/// `auto` or `fixed:N`.
pub(crate) fn parse_block(s: &str) -> Result<pellet_player::nns::BlockMode, String> {
    use pellet_player::nns::BlockMode;
    if s == "auto" {
        return Ok(BlockMode::Auto);
    }
    match s.strip_prefix("fixed:").map(str::parse::<u32>) {
        Some(Ok(n)) if n >= 1 => Ok(BlockMode::Fixed(n)),
        _ => Err(format!(
            "{s:?}: expected auto or fixed:N with N cells per block side"
        )),
    }
}

/// Neighbour-search cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum GridArg {
    /// Dense when the domain is compact, hashed otherwise.
    Auto,
    /// One cell per grid position over the domain.
    Dense,
    /// Hashed cells: memory proportional to the particle count.
    Hashed,
}

/// `player run` arguments.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Scene file (TOML; its bodies' meshes are baked into the cache as
    /// needed), or a baked folder written by `bake scene`.
    pub scene: PathBuf,
    /// Run without a window (the only mode this build has).
    #[arg(long)]
    pub headless: bool,
    /// Steps to take (default: the scene's duration / time step).
    #[arg(long)]
    pub steps: Option<u64>,
    /// Where the kernels run.
    #[arg(long, value_enum, default_value_t = BackendArg::Gpu)]
    pub backend: BackendArg,
    /// How blocks are shared with `--backend gpu`: `rates` hands them out
    /// from one queue by measured rates (largest to the GPU while it would
    /// finish before CPU threads finish the rest, smallest to CPU threads);
    /// `gpu` gives every block's inner points to the GPU and its faces to
    /// CPU threads (the paper's split); `auto` is `rates`, except on an
    /// adapter that runs on this machine's own cores (llvmpipe, SwiftShader),
    /// where CPU threads search everything.
    #[arg(long, value_enum, default_value_t = ScheduleArg::Auto)]
    pub schedule: ScheduleArg,
    /// Which GPU API to use with `--backend gpu`.
    #[arg(long, default_value_t = BackendChoice::Auto, value_parser = pellet_cli::gpu_backend_parser())]
    pub adapter: BackendChoice,
    /// Write one JSON line of statistics every `--stats-every` steps.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// Steps between statistics lines.
    #[arg(long, default_value_t = 100, value_name = "K")]
    pub stats_every: u64,
    /// Save the final state (a `.pellet` sim-state asset).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Save the state every K steps into `--save-dir`.
    #[arg(long, value_name = "K", requires = "save_dir")]
    pub save_every: Option<u64>,
    /// Folder for `--save-every` snapshots (`state_<step>.pellet`).
    #[arg(long, value_name = "DIR", requires = "save_every")]
    pub save_dir: Option<PathBuf>,
    /// Dense cells, hashed cells, or chosen by size.
    #[arg(long, value_enum, default_value_t = GridArg::Auto)]
    pub grid: GridArg,
    /// Device memory the GPU may use, e.g. 1GiB or 64MiB. A scene whose
    /// state needs more is stepped block by block: the state stays on
    /// the host and each step's forces run on the GPU one block of cells
    /// at a time (docs/nns.md). Default: in core, or block by block
    /// when the scene exceeds the device's buffers.
    #[arg(long, value_name = "BYTES", value_parser = pellet_cli::parse_bytes)]
    pub device_budget: Option<u64>,
    #[command(flatten)]
    pub frames: FrameArgs,
    /// Where meshes of `[[bodies]]` are baked and kept (default
    /// `$XDG_CACHE_HOME/pellet/bodies`).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.05 => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds of at least 0.05")),
    }
}
