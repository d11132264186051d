//! Serving and hot reload: a cold load of the `avalanche` scene from a local
//! baked folder and over loopback HTTP (Python's `http.server`), the download
//! alone against curl fetching the same files, decode throughput against
//! zstd's own decompression speed, and the time from a saved edit to the new
//! state on screen.

use std::cell::RefCell;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pellet_bake::bake_mesh::Voxelizer;
use pellet_bake::progress::Progress;
use pellet_bake::scene_bake::bake_scene;
use pellet_formats::DecodeLimits;
use pellet_formats::assets::SimState;
use pellet_formats::baked_folder::{MANIFEST_FILE, read_manifest};
use pellet_formats::container::{decode, encode, open};
use pellet_formats::watch::FileWatcher;
use pellet_gpu::{BackendChoice, Gpu};
use pellet_player::remote::fetch_baked_folder;
use pellet_player::render::{Camera, ColourMode, FrameRenderer};
use pellet_player::sim::run::{load_baked_folder, load_setup_cached};
use pellet_sim::{GridMode, Simulation};

use crate::harness::{Row, time};

const GROUP: &str = "serving";

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python_server(dir: &Path) -> Option<(Server, u16)> {
    let port = TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .arg("--directory")
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let server = Server(child);
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if start.elapsed() > Duration::from_secs(20) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some((server, port))
}

fn scene(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../assets/scenes")
        .join(name)
}

/// All rows of the group; `quick` loads `pile` instead of `avalanche`, and a
/// 100 k-particle state instead of 1 M.
pub fn run(samples: usize, quick: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    let Ok(dir) = tempfile::tempdir() else {
        return rows;
    };
    let site = dir.path().join("site");
    let name = if quick { "pile" } else { "avalanche" };
    let mut folders = Vec::new();
    eprintln!("bench: serving ({name})");
    match bake_scene(
        &scene(&format!("{name}.toml")),
        &site.join(name),
        Voxelizer::Cpu,
        &Progress::hidden(),
    ) {
        Ok(_) => folders.push(name.to_string()),
        Err(e) => eprintln!("bench: serving: cannot bake {name}: {e}"),
    }
    let n = if quick { 100_000 } else { 1_000_000 };
    if let Some(scene) = large_scene(dir.path(), n)
        && bake_scene(
            &scene,
            &site.join("state_scene"),
            Voxelizer::Cpu,
            &Progress::hidden(),
        )
        .is_ok()
    {
        folders.push("state_scene".into());
    }
    let server = python_server(&site);
    if server.is_none() {
        eprintln!("bench: serving: python3 http.server did not start; HTTP rows skipped");
    }
    let fresh = RefCell::new(0u32);
    let cache = |k: u32| dir.path().join(format!("cache{k}"));
    for name in &folders {
        let folder = site.join(name);
        rows.extend(load_rows(
            name,
            &folder,
            server.as_ref().map(|(_, port)| *port),
            samples,
            &|| {
                *fresh.borrow_mut() += 1;
                cache(*fresh.borrow())
            },
            &dir.path().join("curl"),
        ));
    }
    drop(server);
    rows.push(decode_throughput(samples, n));
    if let Some(row) = edit_to_screen(samples) {
        rows.push(row);
    }
    rows
}

/// Cold loads of one baked folder from disk and over HTTP, and its download
/// against curl.
fn load_rows(
    name: &str,
    folder: &Path,
    port: Option<u16>,
    samples: usize,
    fresh_cache: &dyn Fn() -> PathBuf,
    curl_dir: &Path,
) -> Vec<Row> {
    let mut rows = Vec::new();
    let folder_bytes: u64 = std::fs::read_dir(folder)
        .map(|it| {
            it.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    let load_samples = samples.min(5);
    let local = time(load_samples, || {
        load_baked_folder(folder, GridMode::Auto).expect("load")
    });
    let particles = load_baked_folder(folder, GridMode::Auto)
        .map(|s| s.particles.len())
        .unwrap_or(0);
    let workload = format!(
        "`{name}` baked folder ({:.2} MB), {particles} particles",
        folder_bytes as f64 / 1e6
    );
    let Some(port) = port else {
        return rows;
    };
    let url = format!("http://127.0.0.1:{port}/{name}/");
    let http = time(load_samples, || {
        load_setup_cached(Path::new(&url), GridMode::Auto, Some(fresh_cache()))
            .expect("load over HTTP")
    });
    rows.push(Row {
        group: GROUP,
        name: format!("cold load of `{name}` over loopback HTTP"),
        workload: workload.clone(),
        pellet: http.clone(),
        peer: "the same folder loaded from local disk".into(),
        peer_timing: Some(local.clone()),
        notes: format!(
            "empty cache each time: manifest, objects (hash-checked), decode, particle set-up; local {:.1} ms, HTTP {:.1} ms",
            1e3 * local.median_s,
            1e3 * http.median_s
        ),
    });
    let files: Vec<String> = read_manifest(folder, &DecodeLimits::default())
        .map(|m| {
            std::iter::once(MANIFEST_FILE.to_string())
                .chain(m.objects.iter().map(|o| format!("{}.pellet", o.hash)))
                .collect()
        })
        .unwrap_or_default();
    let fetch = time(samples, || {
        fetch_baked_folder(&url, &fresh_cache()).expect("fetch")
    });
    let curl = Command::new("curl")
        .arg("--version")
        .output()
        .is_ok()
        .then(|| {
            time(samples, || {
                let _ = std::fs::remove_dir_all(curl_dir);
                let mut cmd = Command::new("curl");
                cmd.args(["-sf", "--create-dirs"]);
                for f in &files {
                    cmd.arg(format!("{url}{f}")).arg("-o").arg(curl_dir.join(f));
                }
                assert!(cmd.status().expect("curl").success());
            })
        });
    rows.push(Row {
        group: GROUP,
        name: format!("download `{name}`"),
        workload: format!("{} files, {:.2} MB", files.len(), folder_bytes as f64 / 1e6),
        pellet: fetch.clone(),
        peer: "curl, one process, same URLs".into(),
        peer_timing: curl,
        notes: format!(
            "Pellet checks every BLAKE3 hash and header and writes each file atomically with fsync (curl does neither); {:.0} MB/s",
            folder_bytes as f64 / fetch.median_s / 1e6
        ),
    });
    rows
}

/// `n` particles at random in a cube of side `side` (radius 5 mm), moving at
/// random: compresses like a real state.
fn random_state(n: usize, side: f32) -> SimState {
    let mut rng = pellet_formats::scene::Rng::new(11);
    let mut v3 = |lo: f32, hi: f32| -> Vec<[f32; 3]> {
        (0..n)
            .map(|_| [rng.range(lo, hi), rng.range(lo, hi), rng.range(lo, hi)])
            .collect()
    };
    let positions = v3(0.01, side - 0.01);
    let velocities = v3(-0.5, 0.5);
    SimState {
        positions: pellet_formats::PodVec(positions),
        velocities: pellet_formats::PodVec(velocities),
        angular_velocities: pellet_formats::PodVec(vec![[0.0; 3]; n]),
        radii: pellet_formats::PodVec(vec![0.005; n]),
        body_of_particle: pellet_formats::PodVec(vec![pellet_formats::assets::FREE_PARTICLE; n]),
        ..Default::default()
    }
}

/// A scene whose particles come from a saved 1 M-particle state: its baked
/// folder carries the particles as a ~20 MB object.
fn large_scene(dir: &Path, n: usize) -> Option<PathBuf> {
    let state = random_state(n, 2.0);
    pellet_formats::io::write_asset(&dir.join("state.pellet"), &state).ok()?;
    let scene = dir.join("state_scene.toml");
    std::fs::write(
        &scene,
        "name = \"state_scene\"\n[domain]\nmin = [0, 0, 0]\nmax = [2, 2, 2]\n[[particles]]\nfile = \"state.pellet\"\n",
    )
    .ok()?;
    Some(scene)
}

/// Pellet's whole decode (zstd, BLAKE3, MessagePack, validation) against
/// zstd's decompression alone of the same bytes, in MB/s of payload.
fn decode_throughput(samples: usize, n: usize) -> Row {
    let state = random_state(n, 1.0);
    let file = encode(&state).expect("valid state");
    let limits = DecodeLimits::default();
    let (_, payload) = open(&file, &limits).expect("open");
    let compressed = &file[pellet_formats::container::HEADER_LEN..];
    let pellet = time(samples, || {
        decode::<SimState>(&file, &limits).expect("decode")
    });
    let zstd = time(samples, || zstd::decode_all(compressed).expect("zstd"));
    let mbps = |t: f64| payload.len() as f64 / t / 1e6;
    Row {
        group: GROUP,
        name: "decode throughput".into(),
        workload: format!(
            "{n}-particle state: {:.1} MB payload, {:.1} MB compressed",
            payload.len() as f64 / 1e6,
            compressed.len() as f64 / 1e6
        ),
        pellet: pellet.clone(),
        peer: "zstd decompression alone".into(),
        peer_timing: Some(zstd.clone()),
        notes: format!(
            "{:.0} MB/s of payload against zstd's {:.0} MB/s (Pellet adds BLAKE3, MessagePack and validation)",
            mbps(pellet.median_s),
            mbps(zstd.median_s)
        ),
    }
}

/// A scene edit saved by rename, to the new state rendered (headless, frame
/// read back): watcher debounce, reload, carried state, new kernels, a frame.
fn edit_to_screen(samples: usize) -> Option<Row> {
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto).ok()?);
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join("ballpit.toml");
    let original = std::fs::read_to_string(scene("ballpit.toml")).ok()?;
    std::fs::write(&path, &original).ok()?;
    let setup = load_setup_cached(&path, GridMode::Auto, None).ok()?;
    let particles = setup.particles.len();
    let mut sim = Simulation::gpu(gpu.clone(), &setup).ok()?;
    let min = setup.grid.origin;
    let max: [f32; 3] =
        std::array::from_fn(|k| min[k] + setup.grid.dims[k] as f32 * setup.grid.cell_size);
    let camera = Camera::frame(min, max);
    let mut watcher = FileWatcher::new(std::slice::from_ref(&path)).ok()?;
    let detected = RefCell::new(Vec::new());
    let mut flip = false;
    let timing = time(samples, || {
        flip = !flip;
        let g = if flip { "-5.0" } else { "-9.81" };
        let edited = original.replacen(
            "gravity = [0, -9.81, 0]",
            &format!("gravity = [0, {g}, 0]"),
            1,
        );
        let tmp = dir.path().join("ballpit.toml.tmp");
        std::fs::write(&tmp, edited).expect("write");
        let saved = Instant::now();
        std::fs::rename(&tmp, &path).expect("rename");
        while !watcher.changed() {
            std::thread::sleep(Duration::from_millis(2));
        }
        detected.borrow_mut().push(saved.elapsed().as_secs_f64());
        let mut new_setup = load_setup_cached(&path, GridMode::Auto, None).expect("reload");
        let state = sim.snapshot().expect("snapshot");
        let bodies = sim.bodies().expect("bodies");
        new_setup.carry_state_from(&setup, &state, &bodies);
        sim = Simulation::gpu(gpu.clone(), &new_setup).expect("sim");
        let renderer = FrameRenderer::new(sim.gpu_sim().expect("gpu"), &new_setup, 640, 360)
            .expect("renderer");
        renderer
            .render(&camera, ColourMode::ByBody, 2.0)
            .expect("frame")
    });
    let mut d = detected.into_inner();
    d.sort_by(f64::total_cmp);
    let detect = d.get(d.len() / 2).copied().unwrap_or(0.0);
    Some(Row {
        group: GROUP,
        name: "edit to screen".into(),
        workload: format!(
            "`ballpit` ({particles} particles), gravity edited by a rename-save, 640x360 frame"
        ),
        pellet: timing.clone(),
        peer: "none measured".into(),
        peer_timing: None,
        notes: format!(
            "{:.0} ms to notice the save ({} ms debounce), {:.0} ms to reload, carry the state and draw the frame",
            1e3 * detect,
            pellet_formats::watch::DEBOUNCE.as_millis(),
            1e3 * (timing.median_s - detect)
        ),
    })
}
