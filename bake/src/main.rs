//! The `bake` command line: parses the arguments and dispatches each
//! subcommand to its module in `cmd/`, a thin shell over `pellet_bake`.
//!
//! `args` holds the command line, `cmd` one module per subcommand; what they
//! print is formatted by `pellet_bake::report`. The start and the end of
//! `main` (Mesa's noisy layer off, logging, one error line, broken pipes as
//! success) are `pellet_cli`'s, shared with `player`.

mod args;
mod cmd;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

fn main() -> ExitCode {
    pellet_cli::start();
    let cli = Cli::parse();
    pellet_cli::init_logging(cli.verbose);
    pellet_cli::finish("bake", run(cli))
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Mesh(args) => cmd::mesh::run(args),
        Command::Scene(args) => cmd::scene::run(args),
        Command::Watch(args) => cmd::watch::run(args),
        Command::Table(args) => cmd::table::run(args),
        Command::ValidateTable(args) => cmd::validate_table::run(args),
        Command::Inspect(args) => cmd::inspect::run(args),
    }
}
