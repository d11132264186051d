//! `bake table`: integrate the neighbour-overlap table and write it.

use std::process::ExitCode;
use std::time::Instant;

use pellet_bake::output::Outputs;
use pellet_bake::progress::Progress;
use pellet_bake::report;
use pellet_bake::table::{TableSettings, bake_table};
use pellet_formats::assets::SamplingMethod;
use pellet_formats::error::{WriteError, WriteErrorKind};

use crate::args::{Method, TableArgs};

pub fn run(args: TableArgs) -> anyhow::Result<ExitCode> {
    let settings = TableSettings {
        ratio_min: args.ratio_min,
        ratio_max: args.ratio_max,
        ratios: args.ratios,
        samples: args.samples,
        seed: args.seed,
        method: match args.method {
            Method::Montecarlo => SamplingMethod::MonteCarlo,
            Method::Sobol => SamplingMethod::Sobol,
        },
    };
    let mut outputs = Outputs::prepare(&[&args.output], &[])?;
    let started = Instant::now();
    let progress = Progress::new(!args.quiet);
    progress.stage(format!(
        "integrating {} ratios x {} samples ({})",
        settings.ratios,
        settings.samples,
        settings.method.name()
    ));
    let table = bake_table(&settings);
    progress.finish();
    let table = table?;
    let bytes = pellet_formats::container::encode(&table)
        .map_err(|e| WriteError::new(&args.output, WriteErrorKind::Encode(e)))?;
    outputs.write(0, &bytes)?;
    outputs.commit()?;
    if !args.quiet {
        println!(
            "{}",
            report::table_summary(
                &args.output,
                &table,
                args.ratio_min,
                args.ratio_max,
                started.elapsed()
            )
        );
    }
    Ok(ExitCode::SUCCESS)
}
