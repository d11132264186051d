//! `bake inspect`: summaries of `.pellet` files, or their contents as CSV.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use pellet_bake::report;
use pellet_formats::DecodeLimits;
use pellet_formats::assets::{AnyAsset, OverlapTable, ParticleBody, SimState};

use crate::args::InspectArgs;

pub fn run(args: InspectArgs) -> anyhow::Result<ExitCode> {
    let limits = DecodeLimits {
        max_payload: args.max_payload_mib.saturating_mul(1 << 20),
    };
    let files = &args.files;
    let mut stdout = std::io::stdout().lock();
    if let Some(r) = args.ratio {
        for path in files {
            let table = read_table(path, &limits)?;
            let at = table
                .at(r)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            report::write_overlap_csv(&mut stdout, &at)?;
        }
    } else if args.bodies {
        let mut id = 0;
        for (k, path) in files.iter().enumerate() {
            let state = read_state(path, &limits, "--bodies")?;
            if k == 0 {
                writeln!(stdout, "{}", report::BODIES_CSV_HEADER)?;
            }
            id = report::write_body_rows(&mut stdout, &state, id)?;
        }
    } else if args.particles {
        let mut id = 0;
        for (k, path) in files.iter().enumerate() {
            let state = read_state(path, &limits, "--particles")?;
            if k == 0 {
                writeln!(stdout, "{}", report::PARTICLES_CSV_HEADER)?;
            }
            id = report::write_particle_rows(&mut stdout, &state, id)?;
        }
    } else if args.points {
        for path in files {
            report::write_body_points(&mut stdout, &read_body(path, &limits)?)?;
        }
    } else {
        return summaries(&mut stdout, files, &limits, args.json);
    }
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The summary of every file, as text or JSON; a file that fails gets one
/// line on stderr, the others are still printed, and the exit status is 1.
fn summaries(
    stdout: &mut impl Write,
    files: &[PathBuf],
    limits: &DecodeLimits,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut reports = Vec::new();
    let mut failed = false;
    for (i, path) in files.iter().enumerate() {
        match pellet_bake::inspect::inspect(path, limits) {
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
            report::write_json(stdout, &reports[0])?;
        } else {
            report::write_json(stdout, &reports)?;
        }
    }
    stdout.flush()?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn read_table(path: &Path, limits: &DecodeLimits) -> anyhow::Result<OverlapTable> {
    match pellet_formats::io::read_any(path, limits)?.1 {
        AnyAsset::OverlapTable(table) => Ok(table),
        asset => anyhow::bail!(
            "{}: --ratio needs a neighbour-overlap table, this is a {}",
            path.display(),
            asset.kind()
        ),
    }
}

fn read_state(path: &Path, limits: &DecodeLimits, flag: &str) -> anyhow::Result<SimState> {
    match pellet_formats::io::read_any(path, limits)?.1 {
        AnyAsset::SimState(state) => Ok(state),
        asset => anyhow::bail!(
            "{}: {flag} needs a saved simulation state (player run --save), this is a {}",
            path.display(),
            asset.kind()
        ),
    }
}

fn read_body(path: &Path, limits: &DecodeLimits) -> anyhow::Result<ParticleBody> {
    match pellet_formats::io::read_any(path, limits)?.1 {
        AnyAsset::ParticleBody(body) => Ok(body),
        asset => anyhow::bail!(
            "{}: --points needs a particle body, this is a {}",
            path.display(),
            asset.kind()
        ),
    }
}
