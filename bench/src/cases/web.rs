//! The browser player: the ball pit's step time in headless Chromium
//! (SwiftShader's WebGPU) beside the native GPU path on this machine's
//! adapter (lavapipe), on the same baked folder with the same batches of 10
//! steps; the cold page load; and the packed binding layout (the browser's)
//! against the separate one natively. The site is `scripts/bench.sh`'s
//! `bash scripts/web.sh assets/scenes/ballpit.toml target/web-site`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::sim::gpu::{BindingLayout, GpuSim, Listing};
use pellet_player::sim::stages::SimShaders;

use crate::harness::{Row, Timing, time};

const GROUP: &str = "browser player";

/// The site `scripts/bench.sh` builds.
fn site() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/web-site")
}

/// Seconds per step natively: a first evaluation, then `steps` in batches
/// of 10, on `layout`.
fn native_step_s(
    gpu: &Arc<Gpu>,
    folder: &Path,
    layout: BindingLayout,
    steps: u32,
    samples: usize,
) -> Option<Timing> {
    let setup = pellet_player::sim::run::load_baked_folder(folder, Default::default()).ok()?;
    let shaders = SimShaders::builtin();
    let mut sim =
        GpuSim::with_layout(gpu.clone(), &setup, &shaders, Listing::PairList, layout).ok()?;
    sim.prime().ok()?;
    let mut failed = false;
    let t = time(samples, || {
        for _ in 0..steps / 10 {
            failed |= sim.advance(10).is_err();
        }
    });
    (!failed).then(|| t.scaled(1.0 / f64::from(steps)))
}

pub fn run(samples: usize, quick: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    let site = site();
    let folder = site.join("scene");
    let steps = if quick { 50 } else { 200 };
    let gpu = Gpu::new(BackendChoice::Auto).ok().map(Arc::new);
    let native = gpu
        .as_ref()
        .and_then(|g| native_step_s(g, &folder, BindingLayout::Separate, steps, samples));
    let packed = gpu
        .as_ref()
        .and_then(|g| native_step_s(g, &folder, BindingLayout::Packed, steps, samples));
    let adapter = gpu
        .as_ref()
        .map_or("none".to_owned(), |g| g.report.name.clone());
    let browser = Command::new("node")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../web/tests/bench.mjs"))
        .arg(&site)
        .arg(samples.clamp(1, 3).to_string())
        .arg(steps.to_string())
        .output();
    let parsed: Option<serde_json::Value> = browser
        .as_ref()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| serde_json::from_slice(&o.stdout).ok());
    let why = match &browser {
        Err(e) => format!("node: {e}"),
        Ok(o) if !o.status.success() => format!(
            "the browser run failed: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ),
        Ok(_) => String::new(),
    };
    let list = |key: &str, scale: f64| -> Vec<f64> {
        parsed
            .as_ref()
            .and_then(|v| v[key].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(serde_json::Value::as_f64)
            .map(|x| x * scale)
            .collect()
    };
    let browser_step = Timing::of(&list("ms_per_step", 1e-3));
    let browser_adapter = parsed
        .as_ref()
        .and_then(|v| v["adapter"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let ms = |t: &Option<Timing>| {
        t.as_ref()
            .map_or("-".to_owned(), |t| format!("{:.2}", t.median_s * 1e3))
    };
    if let Some(b) = browser_step.clone() {
        rows.push(Row {
            group: GROUP,
            name: "ball pit step time in the browser".into(),
            workload: format!("4096 beads falling into a box, {steps} steps in batches of 10 after 20"),
            notes: format!(
                "browser {} ms/step on {browser_adapter} in headless Chromium (packed layout, wall time per step while playing, drawing included); native {} ms/step on {adapter} (separate layout), {} ms/step packed",
                ms(&Some(b.clone())),
                ms(&native),
                ms(&packed)
            ),
            pellet: b,
            peer: format!("Pellet's native GPU path ({adapter})"),
            peer_timing: native.clone(),
        });
    } else {
        eprintln!(
            "bench: browser player not measured: {why} (site: bash scripts/web.sh assets/scenes/ballpit.toml target/web-site)"
        );
    }
    if let Some(load) = Timing::of(&list("load_s", 1.0)) {
        rows.push(Row {
            group: GROUP,
            name: "cold page load to the first step".into(),
            workload: "the ball pit site from a local server: page, 2.9 MB of wasm and glue, the baked folder, WebGPU device, kernels, first evaluation".into(),
            notes: "a fresh browser per sample (no cache); SwiftShader compiles every kernel on the CPU".into(),
            pellet: load,
            peer: "none (no other system plays DEM scenes in a browser)".into(),
            peer_timing: None,
        });
    }
    if let (Some(p), Some(n)) = (packed, native) {
        rows.push(Row {
            group: GROUP,
            name: "packed binding layout (the browser's) vs separate, natively".into(),
            workload: format!("the ball pit on {adapter}, {steps} steps in batches of 10"),
            notes: format!(
                "{:.2} ms/step packed, {:.2} ms/step separate: the cost of reading every array through the offsets table",
                p.median_s * 1e3,
                n.median_s * 1e3
            ),
            pellet: p,
            peer: "the separate layout, same device".into(),
            peer_timing: Some(n),
        });
    }
    rows
}
