//! `bake validate-table`: a table's predictions against exact counts.

use std::io::Write;
use std::process::ExitCode;

use pellet_bake::progress::Progress;
use pellet_bake::report;
use pellet_bake::table_validation::{Distribution, validate_points_with_progress};
use pellet_formats::DecodeLimits;
use pellet_formats::assets::OverlapTable;

use crate::args::{ValidateTableArgs, ValidationDistribution};

pub fn run(args: ValidateTableArgs) -> anyhow::Result<ExitCode> {
    let generated: Vec<Distribution> = if args.distributions.is_empty() {
        if args.points.is_empty() {
            Distribution::ALL.to_vec()
        } else {
            Vec::new()
        }
    } else {
        args.distributions
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
        generated.is_empty() || args.particles >= 1000,
        "--particles must be at least 1000, not {}",
        args.particles
    );
    if let Some(l) = args.cell_length {
        anyhow::ensure!(
            l.is_finite() && l > 0.0,
            "--cell-length must be a positive number of metres, not {l}"
        );
    }
    let path = &args.table;
    let table: OverlapTable = pellet_formats::io::read_asset(path, &DecodeLimits::default())?;
    let table_error = |e| anyhow::anyhow!("{}: {e}", path.display());
    let ratios = &args.ratios;
    // A spinner with the distribution, the ratio and the step, on a terminal only.
    let progress = Progress::new(!args.quiet);
    let mut rows = Vec::new();
    let result = (|| -> anyhow::Result<()> {
        for d in generated {
            progress.stage(format!(
                "{}: generating {} particles",
                d.name(),
                args.particles
            ));
            let points = d.generate(args.particles, args.seed);
            rows.extend(
                validate_points_with_progress(&table, d.name(), &points, ratios, &progress)
                    .map_err(table_error)?,
            );
        }
        for file in &args.points {
            progress.stage(format!("{}: reading", file.display()));
            let points = pellet_formats::points::read_points(file)?;
            anyhow::ensure!(!points.is_empty(), "{}: holds no points", file.display());
            let l = args.cell_length.unwrap_or(1.0);
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
    if args.json {
        report::write_json(&mut stdout, &rows)?;
    } else {
        report::write_validation_markdown(&mut stdout, &rows)?;
    }
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}
