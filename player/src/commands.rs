//! What each `player` subcommand does with its arguments: build the
//! library's options, call it, print the result (text via
//! `pellet_player::print`, or JSON).

use std::io::Write;

use pellet_player::gpu::{Gpu, selftest};
use pellet_player::scene_info::scene_info;
use pellet_player::sim::GridMode;
use pellet_player::sim::run::{Backend, RunOptions, run_headless};

use crate::args::{BackendArg, Cli, GridArg, NnsArgs, RunArgs};

/// `player gpu`.
pub fn gpu(
    backend: pellet_player::gpu::BackendChoice,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let gpu = Gpu::new(backend)?;
    let test = selftest::run(&gpu, 100_003, 0x5eed)?;
    if json {
        let value = serde_json::json!({ "adapter": gpu.report, "selftest": test });
        serde_json::to_writer_pretty(&mut *out, &value)?;
        writeln!(out)?;
    } else {
        pellet_player::print::gpu_report(out, &gpu.report, &test)?;
    }
    anyhow::ensure!(
        test.passed(),
        "GPU self-test failed: {} of {} elements differ from the CPU",
        test.mismatches,
        test.elements
    );
    Ok(())
}

/// `player info`.
pub fn info(scene: &std::path::Path, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let info = scene_info(scene)?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &info)?;
        writeln!(out)?;
    } else {
        pellet_player::print::scene_info(out, &info)?;
    }
    Ok(())
}

/// `player run`.
pub fn run(args: RunArgs, out: &mut impl Write) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.headless,
        "player run simulates without a window: add --headless (or open the viewer: player {})",
        args.scene.display()
    );
    let options = RunOptions {
        steps: args.steps,
        backend: match args.backend {
            BackendArg::Gpu => Backend::Gpu(args.adapter),
            BackendArg::Cpu => Backend::Cpu,
        },
        stats: args.stats,
        stats_every: args.stats_every,
        save: args.save,
        save_every: args.save_every,
        save_dir: args.save_dir,
        grid: match args.grid {
            GridArg::Auto => GridMode::Auto,
            GridArg::Dense => GridMode::Dense,
            GridArg::Hashed => GridMode::Hashed,
        },
        cache_dir: args.cache_dir,
        frames: args.frames.options(),
        device_budget: args.device_budget,
    };
    headless(&args.scene, &options, args.json, out)
}

/// A headless run with a progress bar, then its summary.
fn headless(
    scene: &std::path::Path,
    options: &RunOptions,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} step {pos}/{len} {wide_bar} {per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let summary = run_headless(scene, options, |step, total| {
        bar.set_length(total);
        bar.set_position(step);
    });
    bar.finish_and_clear();
    let summary = summary?;
    if pellet_player::sim::run::launched_ranks().is_some_and(|(rank, _)| rank != 0) {
        return Ok(()); // rank 0 reports a ranked run
    }
    if json {
        serde_json::to_writer_pretty(&mut *out, &summary)?;
        writeln!(out)?;
    } else {
        pellet_player::print::run_summary(out, &summary)?;
    }
    Ok(())
}

/// `player SCENE [--headless --frames N --out DIR]`: the viewer, or frames.
pub fn play(cli: Cli, out: &mut impl Write) -> anyhow::Result<()> {
    let Some(scene) = cli.scene else {
        anyhow::bail!("no scene given; try: player assets/scenes/ballpit.toml");
    };
    if cli.headless || cli.frames.frames.is_some() {
        let Some(frames) = cli.frames.options() else {
            anyhow::bail!(
                "--headless renders frames: add --frames N --out DIR (or simulate without frames: player run {} --headless)",
                scene.display()
            );
        };
        let options = RunOptions {
            frames: Some(frames),
            cache_dir: cli.cache_dir,
            ..RunOptions::default()
        };
        return headless(&scene, &options, false, out);
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

/// `player nns`.
pub fn nns(args: NnsArgs, out: &mut impl Write) -> anyhow::Result<()> {
    use pellet_player::nns;
    for (flag, path) in [
        ("--out", &args.out),
        ("--counts", &args.counts),
        ("--report", &args.report),
    ] {
        if let Some(p) = path {
            pellet_formats::io::check_output_file(p).map_err(|e| anyhow::anyhow!("{flag} {e}"))?;
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
        schedule: args.schedule.into(),
    };
    let spinner = pellet_cli::spinner(format!(
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
        pellet_player::print::nns_report(out, &report)?;
    }
    Ok(())
}
