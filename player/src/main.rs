//! The `player` command line: parses the arguments (`args.rs`) and
//! dispatches to the subcommands (`commands.rs`), a thin shell over
//! `pellet_player`.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

mod args;
mod commands;

use args::{Cli, Command};

fn main() -> ExitCode {
    pellet_cli::start();
    let cli = Cli::parse();
    pellet_cli::init_logging(cli.verbose);
    if cli.command.is_some() && (cli.scene.is_some() || cli.headless || cli.frames.frames.is_some())
    {
        eprintln!(
            "player: a scene and --headless/--frames go after the subcommand (player run SCENE --headless) or without one (player SCENE --headless --frames N --out DIR)"
        );
        return ExitCode::from(2);
    }
    pellet_cli::finish("player", dispatch(cli))
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match cli.command {
        Some(Command::Gpu { backend, json }) => commands::gpu(backend, json, &mut out)?,
        Some(Command::Info { scene, json }) => commands::info(&scene, json, &mut out)?,
        Some(Command::Nns(args)) => commands::nns(args, &mut out)?,
        Some(Command::Run(args)) => commands::run(args, &mut out)?,
        None => commands::play(cli, &mut out)?,
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
