//! The `player` command line: a thin shell over `pellet_player`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use pellet_player::gpu::{BackendChoice, Gpu, selftest};
use pellet_player::scene_info::scene_info;
use pellet_player::sim::GridMode;
use pellet_player::sim::run::{Backend, RunOptions, run_headless};

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
struct Cli {
    /// Log more (repeat for more detail); logs go to stderr.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Option<Command>,
    /// Scene to play: a TOML file or a baked folder.
    scene: Option<PathBuf>,
    /// No window: render `--frames` PNGs into `--out`.
    #[arg(long)]
    headless: bool,
    #[command(flatten)]
    frames: FrameArgs,
    /// Where meshes of `[[bodies]]` are baked and kept.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// For a scene served over HTTP: seconds between conditional polls of its
    /// manifest (an unchanged one costs a 304); changes are swapped in live.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0, value_parser = positive_seconds)]
    poll: f64,
    /// Shader hot reload (development): use `sim.wgsl` and `spheres.wgsl` from
    /// DIR (e.g. sim/src and player/src/render) and rebuild the pipelines
    /// when they are saved; a shader that fails validation is shown and the
    /// old pipeline kept.
    #[arg(long, value_name = "DIR", hide_short_help = true)]
    shaders: Option<PathBuf>,
    /// Close the window after this many frames (scripted checks).
    #[arg(long, value_name = "N", hide_short_help = true)]
    exit_after: Option<u64>,
    /// Save the window's last frame as PNG (with --exit-after).
    #[arg(
        long,
        value_name = "FILE",
        requires = "exit_after",
        hide_short_help = true
    )]
    screenshot: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process
enum Command {
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
        #[arg(long, default_value_t = BackendChoice::Auto, value_parser = gpu_backend_parser())]
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
    Run {
        /// Scene file (TOML; its bodies' meshes are baked into the cache as
        /// needed), or a baked folder written by `bake scene`.
        scene: PathBuf,
        /// Run without a window (the only mode this build has).
        #[arg(long)]
        headless: bool,
        /// Steps to take (default: the scene's duration / time step).
        #[arg(long)]
        steps: Option<u64>,
        /// Where the kernels run.
        #[arg(long, value_enum, default_value_t = BackendArg::Gpu)]
        backend: BackendArg,
        /// Which GPU API to use with `--backend gpu`.
        #[arg(long, default_value_t = BackendChoice::Auto, value_parser = gpu_backend_parser())]
        adapter: BackendChoice,
        /// Write one JSON line of statistics every `--stats-every` steps.
        #[arg(long, value_name = "FILE")]
        stats: Option<PathBuf>,
        /// Steps between statistics lines.
        #[arg(long, default_value_t = 100, value_name = "K")]
        stats_every: u64,
        /// Save the final state (a `.pellet` sim-state asset).
        #[arg(long, value_name = "FILE")]
        save: Option<PathBuf>,
        /// Save the state every K steps into `--save-dir`.
        #[arg(long, value_name = "K", requires = "save_dir")]
        save_every: Option<u64>,
        /// Folder for `--save-every` snapshots (`state_<step>.pellet`).
        #[arg(long, value_name = "DIR", requires = "save_every")]
        save_dir: Option<PathBuf>,
        /// Dense cells, hashed cells, or chosen by size.
        #[arg(long, value_enum, default_value_t = GridArg::Auto)]
        grid: GridArg,
        /// Device memory the GPU may use, e.g. 1GiB or 64MiB. A scene whose
        /// state needs more is stepped block by block: the state stays on
        /// the host and each step's forces run on the GPU one block of cells
        /// at a time (docs/nns.md). Default: in core, or block by block
        /// when the scene exceeds the device's buffers.
        #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
        device_budget: Option<u64>,
        #[command(flatten)]
        frames: FrameArgs,
        /// Where meshes of `[[bodies]]` are baked and kept (default
        /// `$XDG_CACHE_HOME/pellet/bodies`).
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Headless frames, shared by `player SCENE --headless` and `player run`.
#[derive(Debug, Clone, clap::Args)]
struct FrameArgs {
    /// Render this many frames (PNG) into `--out`, one every `--every` steps,
    /// through the GPU renderer.
    #[arg(long, value_name = "N", requires = "out")]
    frames: Option<u64>,
    /// Folder for the frames (`frame_00000.png`, ...).
    #[arg(long, value_name = "DIR", requires = "frames")]
    out: Option<PathBuf>,
    /// Frame size in pixels, `WIDTHxHEIGHT`.
    #[arg(long, value_name = "WxH", default_value = "1280x720", value_parser = parse_size)]
    size: (u32, u32),
    /// Steps between frames (default: 1/60 s of simulated time).
    #[arg(long, value_name = "K")]
    every: Option<u64>,
    /// Colour particles by body or by speed.
    #[arg(long, value_enum, default_value_t = ColourArg::Body)]
    colour: ColourArg,
}

impl FrameArgs {
    fn options(&self) -> Option<pellet_player::sim::run::FrameOptions> {
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
enum ColourArg {
    /// Free particles sand-coloured, each body its own colour.
    Body,
    /// Blue at rest to red at 2 m/s.
    Speed,
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
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
enum BackendArg {
    /// wgpu compute shaders (lavapipe when there is no GPU).
    Gpu,
    /// The CPU twin on all cores.
    Cpu,
}

/// `player nns` arguments.
#[derive(Debug, clap::Args)]
struct NnsArgs {
    /// A scene (TOML: its particles and body particles) or a saved state
    /// (`.pellet`). Or give `--points` or `--generate`.
    #[arg(conflicts_with_all = ["points", "generate"])]
    input: Option<PathBuf>,
    /// Points to search: CSV `x,y,z` lines, or raw little-endian f32 triples
    /// when the name ends in `.f32`.
    #[arg(long, value_name = "FILE", conflicts_with = "generate")]
    points: Option<PathBuf>,
    /// Generate points instead: about 10 per unit cube where packed.
    #[arg(long, value_parser = ["uniform", "pile", "column", "clusters"])]
    generate: Option<String>,
    /// Points to generate.
    #[arg(long, default_value_t = 1_000_000, requires = "generate")]
    particles: usize,
    /// Seed of the generated points.
    #[arg(long, default_value_t = 1, requires = "generate")]
    seed: u64,
    /// Search radius eps, in the points' units.
    #[arg(long, value_name = "EPS")]
    radius: f32,
    /// Device memory the blocks may use, e.g. 1GiB, 256MiB, 500MB.
    #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
    device_budget: u64,
    /// CPU threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Blocks: `auto` (the workload tree) or `fixed:N` (N^3 cells each).
    #[arg(long, default_value = "auto", value_parser = parse_block)]
    block: pellet_player::nns::BlockMode,
    /// How each cell's expected neighbours are estimated for block sizing:
    /// `fitted` counts every 64th cell exactly first and fits the table model
    /// with smoothed counts to it (tighter blocks, measured margin); `table`
    /// is the paper's model alone.
    #[arg(long, value_enum, default_value_t = EstimateArg::Fitted)]
    estimate: EstimateArg,
    /// Where the search runs: the GPU with CPU threads alongside, or CPU threads only.
    #[arg(long, value_enum, default_value_t = BackendArg::Gpu)]
    backend: BackendArg,
    /// Which GPU API to use with `--backend gpu`.
    #[arg(long, default_value_t = BackendChoice::Auto, value_parser = gpu_backend_parser())]
    adapter: BackendChoice,
    /// A neighbour-overlap table (`bake table`); default: a small one baked here.
    #[arg(long, value_name = "FILE")]
    table: Option<PathBuf>,
    /// Write the neighbour lists (CSR, docs/nns.md).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Write each point's neighbour count, one line per point, in input order.
    #[arg(long, value_name = "FILE")]
    counts: Option<PathBuf>,
    /// Write the report (blocks, estimated and real footprints, phases) as JSON.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// `player nns --estimate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum EstimateArg {
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

/// `1GiB`, `256MiB`, `500MB`, `4096` (bytes).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let factor: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit (use B, KiB, MiB, GiB, KB, MB or GB)"
            ));
        }
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * (factor as f64) < 1.8e19 => {
            Ok((v * factor as f64) as u64)
        }
        _ => Err(format!("{s:?} is not a positive size such as 1GiB")),
    }
}

/// `auto` or `fixed:N`.
fn parse_block(s: &str) -> Result<pellet_player::nns::BlockMode, String> {
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
enum GridArg {
    /// Dense when the domain is compact, hashed otherwise.
    Auto,
    /// One cell per grid position over the domain.
    Dense,
    /// Hashed cells: memory proportional to the particle count.
    Hashed,
}

/// Mesa's device-select Vulkan layer prints `XDG_RUNTIME_DIR is invalid or
/// not set` on headless machines; Pellet picks its adapter itself, so the
/// layer is turned off unless the user set `NODEVICE_SELECT` already.
#[allow(unsafe_code)]
fn quiet_device_select() {
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        // SAFETY: called first thing in `main`, before any thread exists, so
        // nothing reads the environment concurrently.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}

/// `auto`, `vulkan` or `gl`, listed in `--help` (the GPU crate knows no clap).
fn gpu_backend_parser() -> impl clap::builder::TypedValueParser<Value = BackendChoice> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(BackendChoice::NAMES)
        .try_map(|s| s.parse::<BackendChoice>())
}

fn main() -> ExitCode {
    quiet_device_select();
    let cli = Cli::parse();
    init_logging(cli.verbose);
    if cli.command.is_some() && (cli.scene.is_some() || cli.headless || cli.frames.frames.is_some())
    {
        eprintln!(
            "player: a scene and --headless/--frames go after the subcommand (player run SCENE --headless) or without one (player SCENE --headless --frames N --out DIR)"
        );
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Some(command) => run(command),
        None => play(cli),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("player: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// `player SCENE [--headless --frames N --out DIR]`.
fn play(cli: Cli) -> anyhow::Result<()> {
    let Some(scene) = cli.scene else {
        anyhow::bail!("no scene given; try: player assets/scenes/ballpit.toml");
    };
    if cli.headless || cli.frames.frames.is_some() {
        if cli.frames.options().is_none() {
            anyhow::bail!(
                "--headless renders frames: add --frames N --out DIR (or simulate without frames: player run {} --headless)",
                scene.display()
            );
        }
        return run(Command::Run {
            scene,
            headless: true,
            steps: None,
            backend: BackendArg::Gpu,
            adapter: BackendChoice::Auto,
            stats: None,
            stats_every: 100,
            save: None,
            save_every: None,
            save_dir: None,
            grid: GridArg::Auto,
            device_budget: None,
            frames: cli.frames,
            cache_dir: cli.cache_dir,
            json: false,
        });
    }
    pellet_player::viewer::run_viewer(pellet_player::viewer::ViewerOptions {
        scene,
        cache_dir: cli.cache_dir,
        exit_after: cli.exit_after,
        screenshot: cli.screenshot,
        poll_seconds: cli.poll,
        shaders: cli.shaders,
    })?;
    Ok(())
}

fn run_nns(args: NnsArgs, out: &mut impl Write) -> anyhow::Result<()> {
    use pellet_player::nns;
    for (flag, path) in [
        ("--out", &args.out),
        ("--counts", &args.counts),
        ("--report", &args.report),
    ] {
        if let Some(p) = path {
            pellet_formats::io::check_output_file(p)
                .map_err(|e| anyhow::anyhow!("{flag} {}: {e}", p.display()))?;
        }
    }
    let points: Vec<[f32; 3]> = if let Some(name) = &args.generate {
        nns::generate::generate(name, args.particles, args.seed)?
    } else if let Some(file) = &args.points {
        pellet_formats::points::read_points(file)?
    } else if let Some(input) = &args.input {
        if input.extension().is_some_and(|e| e == "pellet") {
            pellet_formats::points::read_points(input)?
        } else {
            let setup = pellet_player::sim::run::load_setup_cached(input, GridMode::Auto, None)?;
            setup
                .particles
                .pos
                .iter()
                .map(|p| [p[0], p[1], p[2]])
                .collect()
        }
    } else {
        anyhow::bail!("give the points: a scene or state file, --points FILE, or --generate NAME");
    };
    anyhow::ensure!(!points.is_empty(), "there are no points to search");
    let table: pellet_formats::assets::OverlapTable = match &args.table {
        Some(path) => {
            pellet_formats::io::read_asset(path, &pellet_formats::DecodeLimits::default())?
        }
        #[cfg(feature = "bake")]
        None => pellet_bake::table::bake_table(&pellet_bake::table::TableSettings {
            ratios: 24,
            samples: 100_000,
            method: pellet_formats::assets::SamplingMethod::Sobol,
            ..Default::default()
        })?,
        #[cfg(not(feature = "bake"))]
        None => anyhow::bail!(
            "this player was built without bake: give a neighbour-overlap table with --table (bake table -o table.pellet)"
        ),
    };
    let gpu = match args.backend {
        BackendArg::Gpu => Some(std::sync::Arc::new(Gpu::new(args.adapter)?)),
        BackendArg::Cpu => None,
    };
    let options = nns::NnsOptions {
        radius: args.radius,
        device_budget: args.device_budget,
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
        block: args.block,
        estimate: args.estimate.into(),
        aux_neighbours: None,
    };
    let spinner = spinner(format!(
        "searching {} points for neighbours within {}",
        points.len(),
        args.radius
    ));
    let searched = nns::search(&points, &options, &table, gpu);
    spinner.finish_and_clear();
    let (lists, report) = searched?;
    if let Some(path) = &args.out {
        nns::output::write_neighbours(path, &lists)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &args.counts {
        nns::output::write_counts(path, &lists)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    if args.json {
        let mut summary = serde_json::to_value(&report)?;
        if let Some(map) = summary.as_object_mut() {
            map.remove("block_list");
        }
        serde_json::to_writer_pretty(&mut *out, &summary)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "points       {} ({} neighbours, {:.2} per point{})",
            report.points,
            report.neighbours,
            report.neighbours as f64 / report.points as f64,
            match report.expected_mean {
                Some(mean) => format!(
                    "; the {} model expected {mean:.2}{}",
                    report.estimate,
                    report
                        .measured_rmse
                        .map(|r| format!(", RMSE {r:.2} on the sample"))
                        .unwrap_or_default()
                ),
                None => String::new(),
            }
        )?;
        writeln!(
            out,
            "grid         {:?} cells of {:.4} (eps / cell {:.3})",
            report.grid_dims, report.cell, report.ratio
        )?;
        writeln!(
            out,
            "blocks       {} ({}; {} split after overflowing), budget {} MiB",
            report.blocks,
            report.block_mode,
            report.splits,
            report.device_budget >> 20
        )?;
        if report.backend == "gpu" {
            writeln!(
                out,
                "split        {} points on the GPU, {} on CPU threads",
                report.gpu_points, report.cpu_points
            )?;
        } else {
            writeln!(out, "split        every point on CPU threads")?;
        }
        writeln!(
            out,
            "time         {:.3} s ({:.2} M queries/s): grid {:.3} s, plan {:.3} s, search {:.3} s, assemble {:.3} s",
            report.total_s,
            report.queries_per_s / 1e6,
            report.phases.grid_s,
            report.phases.plan_s,
            report.phases.search_s,
            report.phases.assemble_s
        )?;
    }
    Ok(())
}

/// A spinner with the elapsed time on stderr, hidden when stderr is not a
/// terminal (scripts and tests see nothing).
fn spinner(message: String) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner().with_message(message);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.05 => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds of at least 0.05")),
    }
}

fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => tracing::Level::WARN,
        1 => tracing::Level::INFO,
        2 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

fn run(command: Command) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match command {
        Command::Gpu { backend, json } => {
            let gpu = Gpu::new(backend)?;
            let test = selftest::run(&gpu, 100_003, 0x5eed)?;
            if json {
                let value = serde_json::json!({ "adapter": gpu.report, "selftest": test });
                serde_json::to_writer_pretty(&mut out, &value)?;
                writeln!(out)?;
            } else {
                let r = &gpu.report;
                writeln!(out, "adapter      {}", r.name)?;
                writeln!(out, "backend      {} ({})", r.backend, r.device_type)?;
                writeln!(out, "driver       {} {}", r.driver, r.driver_info)?;
                writeln!(
                    out,
                    "limits       {} MiB storage binding, {} MiB buffer, {} KiB workgroup memory, {} invocations",
                    r.max_storage_buffer_binding_size >> 20,
                    r.max_buffer_size >> 20,
                    r.max_compute_workgroup_storage_size >> 10,
                    r.max_compute_invocations_per_workgroup
                )?;
                writeln!(
                    out,
                    "timestamps   {}",
                    if r.timestamps { "yes" } else { "no" }
                )?;
                writeln!(
                    out,
                    "self-test    {} of {} elements match the CPU twin",
                    test.elements - test.mismatches,
                    test.elements
                )?;
            }
            anyhow::ensure!(
                test.passed(),
                "GPU self-test failed: {} of {} elements differ from the CPU",
                test.mismatches,
                test.elements
            );
        }
        Command::Nns(args) => run_nns(args, &mut out)?,
        Command::Info { scene, json } => {
            let info = scene_info(&scene)?;
            if json {
                serde_json::to_writer_pretty(&mut out, &info)?;
                writeln!(out)?;
            } else {
                writeln!(out, "scene           {}", info.name)?;
                if !info.description.is_empty() {
                    writeln!(out, "description     {}", info.description)?;
                }
                writeln!(
                    out,
                    "free particles  {} (radius {} to {} m, {:.3} kg)",
                    info.free_particles,
                    info.radius_range_m[0],
                    info.radius_range_m[1],
                    info.free_mass_kg
                )?;
                let b = &info.bodies;
                writeln!(
                    out,
                    "bodies          {} entries: {} dynamic, {} static, {} kinematic",
                    b.entries, b.dynamic, b.r#static, b.kinematic
                )?;
                writeln!(out, "walls           {} extra", info.walls)?;
                writeln!(
                    out,
                    "domain          {:?} to {:?} m, periodic {:?}",
                    info.domain_m[0], info.domain_m[1], info.periodic
                )?;
                writeln!(out, "materials       {}", info.materials.join(", "))?;
            }
        }
        Command::Run {
            scene,
            headless,
            steps,
            backend,
            adapter,
            stats,
            stats_every,
            save,
            save_every,
            save_dir,
            grid,
            device_budget,
            frames,
            cache_dir,
            json,
        } => {
            anyhow::ensure!(
                headless,
                "player run simulates without a window: add --headless (or open the viewer: player {})",
                scene.display()
            );
            let options = RunOptions {
                steps,
                backend: match backend {
                    BackendArg::Gpu => Backend::Gpu(adapter),
                    BackendArg::Cpu => Backend::Cpu,
                },
                stats,
                stats_every,
                save,
                save_every,
                save_dir,
                grid: match grid {
                    GridArg::Auto => GridMode::Auto,
                    GridArg::Dense => GridMode::Dense,
                    GridArg::Hashed => GridMode::Hashed,
                },
                cache_dir,
                frames: frames.options(),
                device_budget,
            };
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} step {pos}/{len} {wide_bar} {per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let summary = run_headless(&scene, &options, |step, total| {
                bar.set_length(total);
                bar.set_position(step);
            });
            bar.finish_and_clear();
            let summary = summary?;
            if json {
                serde_json::to_writer_pretty(&mut out, &summary)?;
                writeln!(out)?;
            } else {
                let l = &summary.last;
                writeln!(out, "scene        {}", summary.scene)?;
                writeln!(out, "backend      {}", summary.backend)?;
                writeln!(
                    out,
                    "particles    {} in all, {} bodies, dt {:.3e} s, {} steps ({:.4} s simulated)",
                    summary.particles, summary.bodies, summary.dt, summary.steps, l.time
                )?;
                writeln!(
                    out,
                    "speed        {:.2} s, {:.3} ms/step, {:.3} M particle-steps/s",
                    summary.seconds,
                    summary.seconds * 1e3 / summary.steps.max(1) as f64,
                    summary.particle_steps_per_s / 1e6
                )?;
                writeln!(
                    out,
                    "last step    {:.4e} J kinetic, max speed {:.3} m/s, {} contacts + {} on walls, max {} per cell, {} slot overflows",
                    l.kinetic_energy,
                    l.max_speed,
                    l.contacts,
                    l.wall_contacts,
                    l.max_cell_occupancy,
                    l.slot_overflows
                )?;
                if let Some(b) = &summary.blocks {
                    let budget = if b.budget == u64::MAX {
                        "the device's buffer limits".to_string()
                    } else {
                        format!("budget {:.1} MiB", b.budget as f64 / 1048576.0)
                    };
                    let per_step = b.evaluations.max(1) as f64;
                    writeln!(
                        out,
                        "blocks       {} per force evaluation, {:.1} MiB on the device for {:.1} MiB in core ({budget}); {:.1} % halo, {:.1} MB up and {:.1} MB down per evaluation; {:.2} s on blocks, {:.2} s on the host",
                        b.blocks,
                        b.device_bytes as f64 / 1048576.0,
                        b.in_core_bytes as f64 / 1048576.0,
                        100.0 * b.halo_particles as f64
                            / (per_step * summary.particles.max(1) as f64),
                        b.bytes_up as f64 / 1e6 / per_step,
                        b.bytes_down as f64 / 1e6 / per_step,
                        b.device_s,
                        b.host_s
                    )?;
                }
                for p in &summary.saved {
                    writeln!(out, "saved        {}", p.display())?;
                }
                if summary.frames > 0 {
                    writeln!(out, "frames       {} PNG files", summary.frames)?;
                }
            }
        }
    }
    out.flush()?;
    Ok(())
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
