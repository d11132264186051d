//! The `bake` command line: a thin shell over `pellet_bake`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};

use pellet_bake::bake_mesh::{DEFAULT_DENSITY, MeshBakeSettings, Voxelizer, bake_mesh};
use pellet_bake::output::Outputs;
use pellet_bake::progress::Progress;
use pellet_bake::voxel::Resolution;
use pellet_bake::voxel::gpu::GpuVoxelizer;
use pellet_formats::DecodeLimits;
use pellet_formats::assets::{AnyAsset, FillMode};
use pellet_formats::error::{WriteError, WriteErrorKind};
use pellet_gpu::{BackendChoice, Gpu};

/// Pellet's asset processor: turns meshes into particle bodies and checks
/// baked `.pellet` files.
///
/// Every command exits 0 on success, 1 on a failure (with one line on
/// stderr naming the file and the problem) and 2 on a usage error.
#[derive(Debug, Parser)]
#[command(name = "bake", version, about, long_about)]
struct Cli {
    /// Log more (repeat for more detail); logs go to stderr.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Bake a glTF mesh into a rigid body made of particles.
    ///
    /// Voxelizes the mesh (every triangle primitive of its default scene,
    /// node transforms applied) on a grid fitted to its bounding box, puts one
    /// particle of the voxel's diameter in every voxel inside (solid) or on
    /// the surface (shell), and writes the particles with the body's mass,
    /// centre of mass, inertia tensor, principal axes, per-particle surface
    /// normals and depths, the source and settings hashes, and a bake report.
    ///
    /// Solid mode marks a voxel inside by the parity of surface crossings in
    /// front of its centre along x, y and z (GPU depth peeling, as many layers
    /// as the mesh has), combined by majority vote, so small holes in a mesh
    /// do not leak. The report counts open edges and voxels where the axes
    /// disagreed.
    ///
    /// Example: bake mesh assets/meshes/bunny.glb -o bunny.pellet --resolution 128 --preview bunny.png
    Mesh(MeshArgs),
    /// Bake every mesh a scene references into a servable baked folder.
    ///
    /// Each `[[bodies]]` mesh is voxelized at twice the body's particle
    /// radius (the exact CPU voxelizer) and stored as a content-addressed
    /// object `<blake3>.pellet`; particle files become objects too; then the
    /// baked scene, and last `manifest.pellet`, each written atomically.
    /// Bodies whose mesh and settings did not change since the last bake of
    /// the same folder are reused, not baked again. Serve the folder with any
    /// static HTTP server; `player run DIR` plays it.
    ///
    /// Example: bake scene assets/scenes/bunnies.toml -o baked/bunnies
    /// Re-bake a scene's folder whenever the scene or one of its meshes changes.
    ///
    /// Bakes once like `bake scene`, then watches the scene file and every
    /// mesh and particle file it names (their folders, since editors save by
    /// renaming) and re-bakes after each saved edit; unchanged bodies are
    /// reused. A broken edit prints its error and the last good folder stays.
    /// Stop with Ctrl-C.
    ///
    /// Example: bake watch assets/scenes/bunnies.toml -o baked/bunnies
    Watch {
        /// The scene (TOML).
        scene: PathBuf,
        /// The baked folder to keep up to date.
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
        /// Stop after this many bakes (scripted checks).
        #[arg(long, value_name = "N", hide = true)]
        max_bakes: Option<u64>,
    },
    Scene {
        /// The scene (TOML).
        scene: PathBuf,
        /// The baked folder to write (created if missing).
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// No progress output.
        #[arg(short, long)]
        quiet: bool,
    },
    /// Bake the neighbour-overlap table used to predict neighbour counts.
    ///
    /// For search radius eps and grid cells of length l, entry E(Cq, Cj) is
    /// the average, over positions uniform in cell Cq, of the volume of the
    /// search sphere that lies in cell Cj, in cell volumes, for every cell
    /// offset the sphere can reach ({-1,0,1}^3 up to eps/l = 1, {-2..2}^3 up
    /// to 2). Stored reduced by symmetry, with a standard error per entry,
    /// at evenly spaced ratios eps/l; lookups interpolate between them.
    ///
    /// Example: bake table -o table.pellet && bake inspect table.pellet --ratio 1.0
    Table(TableArgs),
    /// Check a neighbour-overlap table's predictions against exact counts.
    ///
    /// Generates particle distributions (uniform, a packed conical pile, a
    /// tall packed column, Gaussian clusters) on a grid of unit cells, or
    /// reads point files, and for each ratio compares the model's expected
    /// neighbours per occupied cell with the exact mean number of neighbours
    /// within eps of that cell's particles (Pearson correlation and RMSE), the
    /// same for each cell's total (what a block's memory sums), the RMSE
    /// after the packing correction, and the fitted estimate (raw and
    /// smoothed counts, occupancy and sub-cells, weights fitted on every
    /// 64th cell and judged on the others). Prints a Markdown table (or JSON);
    /// docs/neighbour-model.md holds a run.
    ///
    /// Examples: bake validate-table table.pellet --particles 1000000;
    /// bake validate-table table.pellet --points settled.pellet --cell-length 0.009
    ValidateTable {
        /// The table to check.
        table: PathBuf,
        /// Particles per generated distribution.
        #[arg(long, default_value_t = 1_000_000)]
        particles: usize,
        /// Generated distributions to check, comma-separated (default: all
        /// four, or none when `--points` is given).
        #[arg(long, value_delimiter = ',', value_enum)]
        distributions: Vec<ValidationDistribution>,
        /// Point files to check as well: CSV `x,y,z`, raw little-endian f32
        /// triples (`.f32`), or a simulation state (`.pellet`), in metres.
        #[arg(long, value_name = "FILE", requires = "cell_length")]
        points: Vec<PathBuf>,
        /// Grid cell length for `--points`, metres; eps = ratio x this.
        #[arg(long, value_name = "METRES")]
        cell_length: Option<f64>,
        /// Ratios eps / l to check, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = [0.5, 1.0, 1.5, 2.0])]
        ratios: Vec<f64>,
        /// Seed of the distributions.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// No progress spinner (it shows the distribution, ratio and step,
        /// on a terminal only).
        #[arg(short, long)]
        quiet: bool,
    },
    /// Print the header and a summary of `.pellet` files.
    ///
    /// Verifies each file completely (header, size limits, decompression,
    /// BLAKE3 hash, decoding and semantic checks) before printing. A corrupt,
    /// truncated or foreign file gives one line on stderr and exit status 1.
    ///
    /// Example: bake inspect assets/baked/bunny.pellet --json
    Inspect {
        /// Files to inspect.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Print JSON (one object per file; an array for several files).
        #[arg(long)]
        json: bool,
        /// For a neighbour-overlap table: print the table interpolated at
        /// this ratio eps/l as CSV `dx,dy,dz,value,stderr`, every offset.
        #[arg(long, value_name = "R", conflicts_with_all = ["json", "points"])]
        ratio: Option<f64>,
        /// Print a particle body's particle centres in the mesh's own frame,
        /// one `x,y,z` line each (metres), instead of the summary.
        #[arg(long, conflicts_with = "json")]
        points: bool,
        /// Print a saved simulation state's particles as CSV
        /// `id,x,y,z,vx,vy,vz,radius,body` (metres, m/s; body -1 for free particles).
        #[arg(long, conflicts_with_all = ["json", "points", "ratio"])]
        particles: bool,
        /// Print a saved simulation state's rigid bodies as CSV
        /// `id,x,y,z,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz` (centre of mass in metres,
        /// orientation quaternion, velocity m/s, angular velocity rad/s).
        #[arg(long, conflicts_with_all = ["json", "points", "ratio", "particles"])]
        bodies: bool,
        /// Refuse payloads declared larger than this many MiB.
        #[arg(long, value_name = "MIB", default_value_t = 1024)]
        max_payload_mib: u64,
    },
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("size").required(true).args(["voxel_size", "resolution"])))]
struct MeshArgs {
    /// The mesh: `.glb`, or `.gltf` with `.bin` files or data URIs in its folder.
    input: PathBuf,
    /// Where to write the particle body (`.pellet`).
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Edge of one voxel (the particle diameter), metres.
    #[arg(long, value_name = "METRES")]
    voxel_size: Option<f32>,
    /// Voxels along the longest axis of the mesh's bounding box.
    #[arg(long, value_name = "CELLS")]
    resolution: Option<u32>,
    /// `solid` fills the inside; `shell` keeps the voxels the surface passes
    /// through (hollow bodies, scenery).
    #[arg(long, value_enum, default_value_t = Mode::Solid)]
    mode: Mode,
    /// Density for the mass properties, kg/m^3.
    #[arg(long, value_name = "KG_M3", default_value_t = DEFAULT_DENSITY)]
    density: f32,
    /// Uniform scale applied to the mesh before voxelizing.
    #[arg(long, default_value_t = 1.0)]
    scale: f32,
    /// Also write a PNG of the occupancy as 2-D slices.
    #[arg(long, value_name = "PNG")]
    preview: Option<PathBuf>,
    /// Voxelize on the GPU (depth peeling) or with the exact CPU reference.
    #[arg(long, value_enum, default_value_t = Backend::Gpu)]
    backend: Backend,
    /// Which wgpu backend the GPU voxelizer uses.
    #[arg(long, default_value_t = BackendChoice::Auto, value_parser = gpu_backend_parser())]
    gpu_backend: BackendChoice,
    /// No progress spinner and no summary line.
    #[arg(short, long)]
    quiet: bool,
    /// Print the body's summary as JSON (as `bake inspect --json`).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct TableArgs {
    /// Where to write the table (`.pellet`).
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Smallest ratio eps / l.
    #[arg(long, default_value_t = 0.1)]
    ratio_min: f64,
    /// Largest ratio eps / l (at most 2).
    #[arg(long, default_value_t = 2.0)]
    ratio_max: f64,
    /// Ratios tabulated, evenly spaced.
    #[arg(long, default_value_t = 64)]
    ratios: u32,
    /// Samples per entry (at most 268435456: they are kept in memory, 16
    /// bytes each, within 4 GiB).
    #[arg(long, default_value_t = 1_000_000)]
    samples: u64,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Seeded Monte Carlo, or a randomly shifted Sobol sequence.
    #[arg(long, value_enum, default_value_t = Method::Montecarlo)]
    method: Method,
    /// No summary line.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Method {
    Montecarlo,
    Sobol,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Solid,
    Shell,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    Gpu,
    Cpu,
}

/// Silences Mesa's device-select Vulkan layer, which prints
/// `error: XDG_RUNTIME_DIR is invalid or not set` twice on every GPU command
/// where that variable is unset; `NODEVICE_SELECT=1` skips the layer (wgpu
/// chooses the adapter itself). A value the user set is kept.
#[allow(unsafe_code)]
fn silence_device_select() {
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        // SAFETY: called first thing in `main`, before any thread is spawned
        // (no logger, progress or GPU thread exists yet), so nothing can read
        // or write the environment concurrently.
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
    silence_device_select();
    let cli = Cli::parse();
    let level = match cli.verbose {
        0 => tracing::Level::WARN,
        1 => tracing::Level::INFO,
        2 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("bake: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Mesh(args) => mesh(args),
        Command::Watch {
            scene,
            output,
            max_bakes,
        } => watch(&scene, &output, max_bakes),
        Command::Scene {
            scene,
            output,
            json,
            quiet,
        } => {
            let progress = Progress::new(!quiet);
            let report =
                pellet_bake::scene_bake::bake_scene(&scene, &output, Voxelizer::Cpu, &progress);
            progress.finish();
            let report = report?;
            let mut stdout = std::io::stdout().lock();
            if json {
                serde_json::to_writer_pretty(&mut stdout, &report)?;
                writeln!(stdout)?;
            } else {
                for b in &report.bodies {
                    writeln!(
                        stdout,
                        "{:<8} {} -> {}.pellet ({} particles)",
                        if b.baked { "baked" } else { "unchanged" },
                        b.mesh,
                        &b.object[..16],
                        b.particles
                    )?;
                }
                writeln!(
                    stdout,
                    "{} -> {}: {} objects, {} bytes, manifest.pellet",
                    report.scene,
                    report.folder.display(),
                    report.objects,
                    report.bytes
                )?;
            }
            stdout.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Table(args) => table(args),
        Command::ValidateTable {
            table,
            particles,
            distributions,
            points,
            cell_length,
            ratios,
            seed,
            json,
            quiet,
        } => validate_table(
            &table,
            ValidationInputs {
                particles,
                distributions,
                points,
                cell_length,
            },
            &ratios,
            seed,
            json,
            quiet,
        ),
        Command::Inspect {
            files,
            json,
            ratio,
            points,
            particles,
            bodies,
            max_payload_mib,
        } => {
            let limits = DecodeLimits {
                max_payload: max_payload_mib.saturating_mul(1 << 20),
            };
            let mut stdout = std::io::stdout().lock();
            let mut reports = Vec::new();
            let mut failed = false;
            if let Some(r) = ratio {
                for path in &files {
                    let (_, asset) = pellet_formats::io::read_any(path, &limits)?;
                    let AnyAsset::OverlapTable(table) = asset else {
                        anyhow::bail!(
                            "{}: --ratio needs a neighbour-overlap table, this is a {}",
                            path.display(),
                            asset.kind()
                        );
                    };
                    let at = table
                        .at(r)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                    writeln!(stdout, "dx,dy,dz,value,stderr")?;
                    let reach = at.reach;
                    for dz in -reach..=reach {
                        for dy in -reach..=reach {
                            for dx in -reach..=reach {
                                let i = at.index([dx, dy, dz]);
                                writeln!(
                                    stdout,
                                    "{dx},{dy},{dz},{},{}",
                                    at.values[i], at.stderr[i]
                                )?;
                            }
                        }
                    }
                }
                stdout.flush()?;
                return Ok(ExitCode::SUCCESS);
            }
            if bodies {
                let mut id = 0usize;
                for (k, path) in files.iter().enumerate() {
                    let (_, asset) = pellet_formats::io::read_any(path, &limits)?;
                    let AnyAsset::SimState(state) = asset else {
                        anyhow::bail!(
                            "{}: --bodies needs a saved simulation state (player run --save), this is a {}",
                            path.display(),
                            asset.kind()
                        );
                    };
                    if k == 0 {
                        writeln!(stdout, "id,x,y,z,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz")?;
                    }
                    for (b, body) in state.bodies.iter().enumerate() {
                        let (p, q) = (body.position, body.orientation);
                        let v = state
                            .body_velocities
                            .get(b)
                            .copied()
                            .unwrap_or([f32::NAN; 3]);
                        let w = state
                            .body_angular_velocities
                            .get(b)
                            .copied()
                            .unwrap_or([f32::NAN; 3]);
                        writeln!(
                            stdout,
                            "{id},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                            p[0],
                            p[1],
                            p[2],
                            q[3],
                            q[0],
                            q[1],
                            q[2],
                            v[0],
                            v[1],
                            v[2],
                            w[0],
                            w[1],
                            w[2]
                        )?;
                        id += 1;
                    }
                }
                stdout.flush()?;
                return Ok(ExitCode::SUCCESS);
            }
            if particles {
                let mut id = 0usize;
                for (k, path) in files.iter().enumerate() {
                    let (_, asset) = pellet_formats::io::read_any(path, &limits)?;
                    let AnyAsset::SimState(state) = asset else {
                        anyhow::bail!(
                            "{}: --particles needs a saved simulation state (player run --save), this is a {}",
                            path.display(),
                            asset.kind()
                        );
                    };
                    if k == 0 {
                        writeln!(stdout, "id,x,y,z,vx,vy,vz,radius,body")?;
                    }
                    for k in 0..state.positions.len() {
                        let (p, v) = (state.positions[k], state.velocities[k]);
                        let body = state.body_of_particle[k];
                        let body = if body == pellet_formats::assets::FREE_PARTICLE {
                            -1
                        } else {
                            i64::from(body)
                        };
                        writeln!(
                            stdout,
                            "{id},{},{},{},{},{},{},{},{body}",
                            p[0], p[1], p[2], v[0], v[1], v[2], state.radii[k]
                        )?;
                        id += 1;
                    }
                }
                stdout.flush()?;
                return Ok(ExitCode::SUCCESS);
            }
            if points {
                for path in &files {
                    let (_, asset) = pellet_formats::io::read_any(path, &limits)?;
                    let AnyAsset::ParticleBody(body) = asset else {
                        anyhow::bail!(
                            "{}: --points needs a particle body, this is a {}",
                            path.display(),
                            asset.kind()
                        );
                    };
                    for p in body.positions.iter() {
                        let c = body.centre_of_mass;
                        writeln!(stdout, "{},{},{}", p[0] + c[0], p[1] + c[1], p[2] + c[2])?;
                    }
                }
                stdout.flush()?;
                return Ok(ExitCode::SUCCESS);
            }
            for (i, path) in files.iter().enumerate() {
                match pellet_bake::inspect::inspect(path, &limits) {
                    Ok(report) if json => reports.push(report),
                    Ok(report) => {
                        if i > 0 {
                            writeln!(stdout)?;
                        }
                        write!(stdout, "{}", report.to_text())?;
                    }
                    Err(err) => {
                        eprintln!("bake: {err}");
                        failed = true;
                    }
                }
            }
            if json {
                if reports.len() == 1 && files.len() == 1 {
                    serde_json::to_writer_pretty(&mut stdout, &reports[0])?;
                } else {
                    serde_json::to_writer_pretty(&mut stdout, &reports)?;
                }
                writeln!(stdout)?;
            }
            stdout.flush()?;
            Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

fn mesh(args: MeshArgs) -> anyhow::Result<ExitCode> {
    let resolution = match (args.voxel_size, args.resolution) {
        (Some(v), _) => Resolution::VoxelSize(v),
        (None, Some(n)) => Resolution::Cells(n),
        (None, None) => anyhow::bail!("give --voxel-size or --resolution"),
    };
    anyhow::ensure!(
        args.density.is_finite() && args.density > 0.0,
        "--density must be a positive number of kg/m^3, not {}",
        args.density
    );
    anyhow::ensure!(
        args.scale.is_finite() && args.scale > 0.0,
        "--scale must be a positive number, not {}",
        args.scale
    );
    let settings = MeshBakeSettings {
        resolution,
        fill: match args.mode {
            Mode::Solid => FillMode::Solid,
            Mode::Shell => FillMode::Shell,
        },
        density: args.density,
        scale: args.scale,
    };
    // Every output is checked (not the input, a writable folder, not a
    // folder itself) before any work, and written only when all succeeded.
    let mut targets: Vec<&Path> = vec![&args.output];
    targets.extend(args.preview.as_deref());
    let mut outputs = Outputs::prepare(&targets, &[&args.input])?;
    let started = std::time::Instant::now();
    let progress = Progress::new(!args.quiet);
    let gpu_voxelizer = match args.backend {
        Backend::Gpu => {
            progress.stage("opening the GPU");
            Some(GpuVoxelizer::new(Gpu::new(args.gpu_backend)?))
        }
        Backend::Cpu => None,
    };
    let voxelizer = match &gpu_voxelizer {
        Some(v) => Voxelizer::Gpu(v),
        None => Voxelizer::Cpu,
    };
    let baked = bake_mesh(&args.input, &settings, voxelizer, &progress);
    let baked = match baked {
        Ok(b) => b,
        Err(e) => {
            progress.finish();
            return Err(e.into());
        }
    };
    let written = (|| -> anyhow::Result<()> {
        // A glTF's buffer files are known only now: they are inputs too.
        let inputs: Vec<&Path> = baked.inputs.iter().map(PathBuf::as_path).collect();
        outputs.refuse_inputs(&inputs)?;
        progress.stage(format!("writing {}", args.output.display()));
        let bytes = pellet_formats::container::encode(&baked.body)
            .map_err(|e| WriteError::new(&args.output, WriteErrorKind::Encode(e)))?;
        outputs.write(0, &bytes)?;
        tracing::debug!(bytes = bytes.len(), "written");
        if let Some(png) = &args.preview {
            let image = pellet_bake::preview::encode_png(&baked.body)
                .with_context(|| format!("{}: cannot render the preview", png.display()))?;
            outputs.write(1, &image)?;
        }
        outputs.commit()?;
        Ok(())
    })();
    progress.finish();
    written?;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let report = pellet_bake::inspect::inspect(&args.output, &DecodeLimits::default())?;
        serde_json::to_writer_pretty(&mut stdout, &report)?;
        writeln!(stdout)?;
    } else if !args.quiet {
        let b = &baked.body;
        let r = &b.report;
        let [nx, ny, nz] = b.grid_dims;
        let closed = if r.open_edges == 0 && r.non_manifold_edges == 0 {
            "watertight".to_owned()
        } else {
            format!(
                "NOT watertight: {} open and {} non-manifold edges, {} voxels where the axes disagreed",
                r.open_edges, r.non_manifold_edges, r.disagreements
            )
        };
        writeln!(
            stdout,
            "{} -> {}: {} particles of radius {} m on {nx}x{ny}x{nz} voxels, mass {:.4} kg, {} layers peeled (x, y, z: {:?}), {closed}, {:.2} s on the {}",
            args.input.display(),
            args.output.display(),
            b.positions.len(),
            b.particle_radius(),
            b.mass,
            r.layers.iter().max().copied().unwrap_or(0),
            r.layers,
            started.elapsed().as_secs_f64(),
            if r.backend.starts_with("gpu") {
                "GPU"
            } else {
                "CPU"
            },
        )?;
    }
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn table(args: TableArgs) -> anyhow::Result<ExitCode> {
    let settings = pellet_bake::table::TableSettings {
        ratio_min: args.ratio_min,
        ratio_max: args.ratio_max,
        ratios: args.ratios,
        samples: args.samples,
        seed: args.seed,
        method: match args.method {
            Method::Montecarlo => pellet_formats::assets::SamplingMethod::MonteCarlo,
            Method::Sobol => pellet_formats::assets::SamplingMethod::Sobol,
        },
    };
    let mut outputs = Outputs::prepare(&[&args.output], &[])?;
    let started = std::time::Instant::now();
    let progress = Progress::new(!args.quiet);
    progress.stage(format!(
        "integrating {} ratios x {} samples ({})",
        settings.ratios,
        settings.samples,
        settings.method.name()
    ));
    let table = pellet_bake::table::bake_table(&settings);
    progress.finish();
    let table = table?;
    let bytes = pellet_formats::container::encode(&table)
        .map_err(|e| WriteError::new(&args.output, WriteErrorKind::Encode(e)))?;
    outputs.write(0, &bytes)?;
    outputs.commit()?;
    if !args.quiet {
        let worst = table.stderr.iter().copied().fold(0.0f32, f32::max);
        println!(
            "{}: {} ratios {}..{}, {} canonical offsets, {} samples each ({}), largest standard error {worst:.2e} cell volumes, {:.2} s",
            args.output.display(),
            table.ratios.len(),
            args.ratio_min,
            args.ratio_max,
            table.offsets.len(),
            table.samples,
            table.method.name(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A generated distribution for `bake validate-table`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ValidationDistribution {
    Uniform,
    Pile,
    Column,
    Clusters,
}

/// What `bake validate-table` checks.
struct ValidationInputs {
    particles: usize,
    distributions: Vec<ValidationDistribution>,
    points: Vec<PathBuf>,
    cell_length: Option<f64>,
}

fn validate_table(
    path: &Path,
    inputs: ValidationInputs,
    ratios: &[f64],
    seed: u64,
    json: bool,
    quiet: bool,
) -> anyhow::Result<ExitCode> {
    use pellet_bake::table_validation::{Distribution, validate_points_with_progress};
    let generated: Vec<Distribution> = if inputs.distributions.is_empty() {
        if inputs.points.is_empty() {
            Distribution::ALL.to_vec()
        } else {
            Vec::new()
        }
    } else {
        inputs
            .distributions
            .iter()
            .map(|d| match d {
                ValidationDistribution::Uniform => Distribution::Uniform,
                ValidationDistribution::Pile => Distribution::Pile,
                ValidationDistribution::Column => Distribution::Column,
                ValidationDistribution::Clusters => Distribution::Clusters,
            })
            .collect()
    };
    anyhow::ensure!(
        generated.is_empty() || inputs.particles >= 1000,
        "--particles must be at least 1000, not {}",
        inputs.particles
    );
    if let Some(l) = inputs.cell_length {
        anyhow::ensure!(
            l.is_finite() && l > 0.0,
            "--cell-length must be a positive number of metres, not {l}"
        );
    }
    let table: pellet_formats::assets::OverlapTable =
        pellet_formats::io::read_asset(path, &DecodeLimits::default())?;
    let table_error = |e| anyhow::anyhow!("{}: {e}", path.display());
    // A spinner with the distribution, the ratio and the step, on a terminal only.
    let progress = Progress::new(!quiet);
    let mut rows = Vec::new();
    let result = (|| -> anyhow::Result<()> {
        for d in generated {
            progress.stage(format!(
                "{}: generating {} particles",
                d.name(),
                inputs.particles
            ));
            let points = d.generate(inputs.particles, seed);
            rows.extend(
                validate_points_with_progress(&table, d.name(), &points, ratios, &progress)
                    .map_err(table_error)?,
            );
        }
        for file in &inputs.points {
            progress.stage(format!("{}: reading", file.display()));
            let points = pellet_formats::points::read_points(file)?;
            anyhow::ensure!(!points.is_empty(), "{}: holds no points", file.display());
            let l = inputs.cell_length.unwrap_or(1.0);
            let cells: Vec<[f64; 3]> = points.iter().map(|p| p.map(|x| f64::from(x) / l)).collect();
            let name = file.file_stem().map_or_else(
                || file.display().to_string(),
                |s| s.to_string_lossy().into(),
            );
            rows.extend(
                validate_points_with_progress(&table, &name, &cells, ratios, &progress)
                    .map_err(table_error)?,
            );
        }
        Ok(())
    })();
    progress.finish();
    result?;
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, &rows)?;
        writeln!(stdout)?;
    } else {
        writeln!(
            stdout,
            "| distribution | particles | eps/l | occupied cells | max per cell | mean neighbours | correlation | RMSE | RMSE / mean | refined (sub-cells) | refined correlation | refined RMSE | total correlation | total RMSE | correction | corrected RMSE | fitted correlation | fitted RMSE |"
        )?;
        writeln!(
            stdout,
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        )?;
        for r in &rows {
            writeln!(
                stdout,
                "| {} | {} | {} | {} | {} | {:.2} | {:.4} | {:.3} | {:.2} % | {}³ | {:.4} | {:.3} | {:.4} | {:.2} | {:.4} | {:.3} | {:.4} | {:.3} |",
                r.distribution,
                r.particles,
                r.ratio,
                r.cells,
                r.max_cell_count,
                r.mean_neighbours,
                r.correlation,
                r.rmse,
                100.0 * r.relative_rmse,
                r.refine,
                r.refined_correlation,
                r.refined_rmse,
                r.total_correlation,
                r.total_rmse,
                r.calibration,
                r.calibrated_rmse,
                r.fitted_correlation,
                r.fitted_rmse
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The files `scene` is made of: itself, its meshes and particle files.
fn scene_inputs(scene: &Path) -> Vec<PathBuf> {
    pellet_formats::Scene::load(scene)
        .map(|s| s.input_files(scene))
        .unwrap_or_else(|_| vec![scene.to_path_buf()])
}

fn watch(scene: &Path, output: &Path, max_bakes: Option<u64>) -> anyhow::Result<ExitCode> {
    let mut bakes = 0u64;
    loop {
        let started = std::time::Instant::now();
        match pellet_bake::scene_bake::bake_scene(
            scene,
            output,
            Voxelizer::Cpu,
            &Progress::hidden(),
        ) {
            Ok(r) => {
                let baked = r.bodies.iter().filter(|b| b.baked).count();
                println!(
                    "baked {} -> {}: {} bodies ({baked} re-baked), {} objects, {:.2} s",
                    scene.display(),
                    output.display(),
                    r.bodies.len(),
                    r.objects,
                    started.elapsed().as_secs_f64()
                );
            }
            // Keep watching: the last good folder stays as it was.
            Err(e) => eprintln!("bake: {e} (keeping the last good folder)"),
        }
        std::io::stdout().flush()?;
        bakes += 1;
        if max_bakes.is_some_and(|m| bakes >= m) {
            return Ok(ExitCode::SUCCESS);
        }
        let mut watcher = pellet_formats::watch::FileWatcher::new(&scene_inputs(scene))
            .map_err(|e| anyhow::anyhow!("cannot watch {}: {e}", scene.display()))?;
        while !watcher.wait(std::time::Duration::from_secs(3600)) {}
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
