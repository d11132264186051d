//! `pellet-bench`: runs Pellet's benchmarks and the installed peers side by
//! side, then writes `docs/BENCHMARKS.md` and `docs/benchmarks.json`.
//!
//! Run from the repository root: `cargo run --release -p pellet-bench`.

mod cases;
mod harness;
mod report;
mod validate;

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

use report::{Machine, Report};

/// Runs every benchmark against its peer and writes the results table.
#[derive(Debug, Parser)]
#[command(name = "pellet-bench", version, about, long_about)]
struct Cli {
    /// Smaller workloads and fewer samples (a smoke run, not for the docs).
    #[arg(long)]
    quick: bool,
    /// Samples per measurement (default 11, 3 with --quick).
    #[arg(long)]
    samples: Option<usize>,
    /// Markdown output.
    #[arg(long, default_value = "docs/BENCHMARKS.md")]
    out: PathBuf,
    /// JSON output.
    #[arg(long, default_value = "docs/benchmarks.json")]
    json: PathBuf,
    /// Only run groups whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Instead of the benchmarks: compare Pellet's physics with LIGGGHTS on
    /// matched decks and write `--validation-out`.
    #[arg(long)]
    validate: bool,
    /// Markdown output of `--validate`.
    #[arg(long, default_value = "docs/validation.md")]
    validation_out: PathBuf,
    /// Internal: time the GPU path on `SCENE:WARM:STEPS` in this process
    /// and print the seconds and the driver (the pack rows run it under a
    /// second Vulkan driver, `PELLET_BENCH_ALT_ICD`).
    #[arg(long, hide = true, value_name = "SCENE:WARM:STEPS")]
    sim_child: Option<String>,
}

/// Rows of an earlier run's JSON report (none if it is missing or unreadable).
fn previous_rows(path: &std::path::Path) -> Vec<harness::Row> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| serde_json::from_value::<Vec<harness::SavedRow>>(v["rows"].clone()).ok())
        .map(|rows| rows.into_iter().map(harness::Row::from).collect())
        .unwrap_or_default()
}

/// Groups in the order a full run writes them.
fn group_order(group: &str) -> usize {
    [
        "bake mesh",
        "neighbour model",
        "neighbour search",
        "particle simulation",
        "particle simulation across ranks",
        "rigid bodies",
        "rendering",
        "formats",
        "serving",
    ]
    .iter()
    .position(|g| *g == group)
    .unwrap_or(usize::MAX)
}

fn main() -> anyhow::Result<()> {
    // The same allocation policy as the binaries it measures (and the peers
    // run in this process, kiddo and rapier, with it too).
    pellet_cli::keep_freed_memory();
    let cli = Cli::parse();
    if let Some(spec) = &cli.sim_child {
        return cases::sim::child(spec);
    }
    if cli.validate {
        return validate::run(&cli.validation_out);
    }
    let samples = cli.samples.unwrap_or(if cli.quick { 3 } else { 11 });
    let particles = if cli.quick { 100_000 } else { 1_000_000 };
    let wanted = |group: &str| cli.filter.as_deref().is_none_or(|f| group.contains(f));

    let mut rows = Vec::new();
    if wanted("bake mesh") {
        let resolutions: &[u32] = if cli.quick {
            &[64, 128]
        } else {
            &[128, 256, 512]
        };
        rows.extend(cases::bake_mesh::run(resolutions, samples));
    }
    if wanted("neighbour model") {
        rows.extend(cases::neighbour_model::run(samples, cli.quick));
    }
    if wanted("neighbour search") {
        rows.extend(cases::nns::run(samples, cli.quick));
    }
    if wanted("particle simulation") {
        rows.extend(cases::sim::run(samples, cli.quick));
    }
    if wanted("particle simulation across ranks") {
        rows.extend(cases::ranks::run(samples, cli.quick));
    }
    if wanted("rigid bodies") {
        rows.extend(cases::bodies::run(samples, cli.quick));
    }
    if wanted("rendering") {
        rows.extend(cases::render::run(samples, cli.quick));
    }
    if wanted("formats") {
        eprintln!("bench: formats ({particles} particles, {samples} samples)");
        rows.extend(cases::formats::run(particles, samples));
    }
    if wanted("serving") {
        rows.extend(cases::serving::run(samples, cli.quick));
    }
    if wanted("browser player") {
        rows.extend(cases::web::run(samples, cli.quick));
    }
    if cli.filter.is_some() {
        // Keep the groups this run skipped from the previous results.
        let kept = previous_rows(&cli.json)
            .into_iter()
            .filter(|r| !wanted(r.group))
            .collect::<Vec<_>>();
        eprintln!(
            "bench: kept {} rows of other groups from {}",
            kept.len(),
            cli.json.display()
        );
        let mut all = kept;
        all.extend(rows);
        all.sort_by_key(|r| group_order(r.group));
        rows = all;
    }
    let report = Report {
        machine: machine(&cli),
        peers: cases::peers::detect(),
        rows,
    };
    if let Some(dir) = cli.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&cli.out, report.to_markdown())
        .with_context(|| format!("writing {}", cli.out.display()))?;
    std::fs::write(&cli.json, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", cli.json.display()))?;
    print!("{}", report.to_markdown());
    eprintln!(
        "bench: wrote {} and {}",
        cli.out.display(),
        cli.json.display()
    );
    Ok(())
}

fn machine(cli: &Cli) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split(':').nth(1))
        })
        .map_or_else(|| "unknown".to_owned(), |s| s.trim().to_owned());
    let memory_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / (1024.0 * 1024.0));
    let adapter = match pellet_gpu::Gpu::new(pellet_gpu::BackendChoice::Auto) {
        Ok(gpu) => gpu.report.one_line(),
        Err(e) => format!("none ({e})"),
    };
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        );
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map_or_else(
            || "unknown".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        );
    let mut command = "cargo run --release -p pellet-bench --".to_owned();
    if cli.quick {
        command.push_str(" --quick");
    }
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, usize::from),
        memory_gib,
        adapter,
        date,
        commit,
        command,
    }
}
