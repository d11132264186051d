//! The `player` command line: a thin shell over `pellet_player`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use pellet_player::gpu::{BackendChoice, Gpu, selftest};
use pellet_player::scene_info::scene_info;

/// Pellet's player: simulates and shows unified particle / rigid-body scenes.
///
/// Exit status: 0 on success, 1 on a failure (one line on stderr), 2 on a
/// usage error.
#[derive(Debug, Parser)]
#[command(name = "player", version, about, long_about)]
struct Cli {
    /// Log more (repeat for more detail); logs go to stderr.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
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
        #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
        backend: BackendChoice,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Load a scene and print what it holds.
    ///
    /// Parses and validates the scene TOML, generates its particle blocks
    /// and reads its particle files, exactly as a run would.
    ///
    /// Example: player info assets/scenes/ballpit.toml
    Info {
        /// Scene file (TOML).
        scene: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    match run(cli.command) {
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

fn init_logging(verbose: u8) {
    let level = match verbose {
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
