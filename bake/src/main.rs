//! The `bake` command line: a thin shell over `pellet_bake`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use pellet_formats::DecodeLimits;

/// Pellet's asset processor: turns meshes into particle bodies and checks
/// baked `.pellet` files.
///
/// Every command exits 0 on success, 1 on a failure (with one line on
/// stderr naming the file and the problem) and 2 on a usage error.
#[derive(Debug, Parser)]
#[command(name = "bake", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
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
        /// Refuse payloads declared larger than this many MiB.
        #[arg(long, value_name = "MIB", default_value_t = 1024)]
        max_payload_mib: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
        Command::Inspect {
            files,
            json,
            max_payload_mib,
        } => {
            let limits = DecodeLimits {
                max_payload: max_payload_mib.saturating_mul(1 << 20),
            };
            let mut stdout = std::io::stdout().lock();
            let mut reports = Vec::new();
            let mut failed = false;
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

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
