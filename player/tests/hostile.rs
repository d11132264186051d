//! Hostile and careless input to `player` (issue 16): baked folders that try
//! to read outside themselves (from disk and from a real HTTP server on
//! loopback), runs that blow up, outputs checked before the work, absurd step
//! counts, overlapping particles, a server that drips, and the rough edges
//! of the command line. Every failure is one line and a non-zero exit; no
//! file is lost.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use pellet_formats::AssetKind;
use pellet_formats::assets::{BakedScene, Manifest, ManifestEntry, SimState};
use pellet_formats::baked_folder::{content_hash, write_manifest};
use pellet_formats::container::encode_payload;

mod server;
use server::{one_line, serve};

fn player(args: &[&str]) -> Output {
    player_env(args, &[])
}

fn player_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_player"));
    cmd.args(args).env("NODEVICE_SELECT", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

const TINY: &str = r#"
name = "tiny"
[simulation]
particle_radius = 0.01
gravity = [0, -9.81, 0]
time_step = 1e-5
duration = 0.001
[domain]
min = [0, 0, 0]
max = [1, 1, 1]
[materials.default]
density = 2500
stiffness = 10000
restitution = 0.5
friction = 0.5
"#;

fn write_scene(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("{TINY}{extra}")).unwrap();
    path
}

const BLOCK: &str = r#"
[[particles]]
region = { min = [0.3, 0.3, 0.3], max = [0.5, 0.5, 0.5] }
count = 50
"#;

/// A baked folder whose scene names `file` as its particle file, written
/// around the encoder's validation (validly hashed, as an attacker would).
/// `listed` extra objects go into the manifest.
fn hostile_folder(folder: &Path, file: &str, extra: &[(String, AssetKind)]) {
    std::fs::create_dir_all(folder).unwrap();
    let text = format!("{TINY}\n[[particles]]\nfile = \"{file}\"\n");
    let scene = pellet_formats::Scene::parse(&text, Path::new("evil.toml")).unwrap();
    let baked = BakedScene {
        scene,
        bodies: Vec::new(),
    };
    let payload = rmp_serde::to_vec_named(&baked).unwrap();
    let bytes = encode_payload(AssetKind::BakedScene, &payload).unwrap();
    let hash = content_hash(&bytes);
    std::fs::write(folder.join(format!("{hash}.pellet")), &bytes).unwrap();
    let mut objects = vec![ManifestEntry {
        hash: hash.clone(),
        kind: AssetKind::BakedScene,
        size: bytes.len() as u64,
        label: "evil".into(),
    }];
    for (h, kind) in extra {
        objects.push(ManifestEntry {
            hash: h.clone(),
            kind: *kind,
            size: 1,
            label: String::new(),
        });
    }
    let manifest = Manifest {
        name: "evil".into(),
        scene: hash,
        objects,
        generator: String::new(),
    };
    write_manifest(folder, &manifest).unwrap();
}

fn run_args<'a>(scene: &'a str, cache: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        scene,
        "--headless",
        "--steps",
        "5",
        "--backend",
        "cpu",
        "--cache-dir",
        cache,
    ]
}

#[test]
fn a_baked_folder_reads_nothing_outside_itself_from_disk_or_http() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    std::fs::write(dir.path().join("secret.csv"), "0.5,0.5,0.5\n").unwrap();
    let cases = [
        "/etc/passwd",
        "../../secret.csv",
        "../secret.csv",
        "/dev/zero",
    ];
    for (k, file) in cases.iter().enumerate() {
        hostile_folder(&site.join(format!("evil{k}")), file, &[]);
    }
    // A real object of the folder (a valid state, by hash) that the manifest
    // does not list is refused too.
    let state = SimState {
        positions: vec![[0.5f32; 3]].into(),
        velocities: vec![[0.0f32; 3]].into(),
        angular_velocities: vec![[0.0f32; 3]].into(),
        radii: vec![0.01f32].into(),
        body_of_particle: vec![pellet_formats::assets::FREE_PARTICLE].into(),
        ..Default::default()
    };
    let unlisted = site.join("unlisted");
    std::fs::create_dir_all(&unlisted).unwrap();
    let (hash, _) = pellet_formats::baked_folder::write_object(&unlisted, &state).unwrap();
    hostile_folder(&unlisted, &format!("{hash}.pellet"), &[]);
    let cache = dir.path().join("cache");
    let cache = cache.to_str().unwrap();
    let (_server, port) = serve(&site);
    for k in 0..cases.len() {
        let local = site.join(format!("evil{k}"));
        let url = format!("http://127.0.0.1:{port}/evil{k}/");
        for scene in [local.to_str().unwrap(), url.as_str()] {
            let started = Instant::now();
            let line = one_line(&player(&run_args(scene, cache)));
            assert!(line.contains("not an object of the baked folder"), "{line}");
            assert!(!line.contains("root:"), "{line}");
            assert!(started.elapsed() < Duration::from_secs(60), "{line}");
            // `player info` takes the same folders, with the same refusal.
            let line = one_line(&player(&["info", scene]));
            assert!(line.contains("not an object of the baked folder"), "{line}");
        }
    }
    let line = one_line(&player(&run_args(unlisted.to_str().unwrap(), cache)));
    assert!(
        line.contains("is not a particle object of the manifest"),
        "{line}"
    );
    // A listed particle object whose bytes were changed is refused on its hash.
    let tampered = site.join("tampered");
    std::fs::create_dir_all(&tampered).unwrap();
    let (hash, _) = pellet_formats::baked_folder::write_object(&tampered, &state).unwrap();
    let object = tampered.join(format!("{hash}.pellet"));
    let mut bytes = std::fs::read(&object).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&object, bytes).unwrap();
    hostile_folder(
        &tampered,
        &format!("{hash}.pellet"),
        &[(hash.clone(), AssetKind::SimState)],
    );
    let line = one_line(&player(&run_args(tampered.to_str().unwrap(), cache)));
    assert!(
        line.contains("not the") && line.contains("its name promises"),
        "{line}"
    );
}

#[test]
fn local_particle_files_must_be_regular_files_of_bounded_size() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.csv");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for (name, file, expect) in [
        (
            "zero.toml",
            "/dev/zero",
            "character device, not a regular file",
        ),
        ("fifo.toml", "pipe.csv", "FIFO, not a regular file"),
        ("dir.toml", ".", "folder, not a regular file"),
    ] {
        let scene = write_scene(
            dir.path(),
            name,
            &format!("[[particles]]\nfile = \"{file}\"\n"),
        );
        let started = Instant::now();
        let line = one_line(&player(&["info", scene.to_str().unwrap()]));
        assert!(line.contains(expect), "{line}");
        assert!(started.elapsed() < Duration::from_secs(20), "{line}");
    }
    // The scene file itself: a device is refused before it is read.
    let line = one_line(&player(&["info", "/dev/zero"]));
    assert!(line.contains("character device"), "{line}");
}

#[test]
fn a_run_that_blows_up_fails_and_saves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("end.pellet");
    let every = dir.path().join("every");
    let cache = dir.path().join("cache");
    let scene = write_scene(dir.path(), "boom.toml", BLOCK);
    let text = std::fs::read_to_string(&scene)
        .unwrap()
        .replace("gravity = [0, -9.81, 0]", "gravity = [0, -1e30, 0]");
    std::fs::write(&scene, text).unwrap();
    let scene = scene.to_str().unwrap();
    for (backend, budget) in [("cpu", "1GiB"), ("gpu", "1GiB"), ("gpu", "1660KiB")] {
        let out = player(&[
            "run",
            scene,
            "--headless",
            "--steps",
            "20",
            "--backend",
            backend,
            "--device-budget",
            budget,
            "--grid",
            "dense",
            "--save",
            save.to_str().unwrap(),
            "--save-every",
            "10",
            "--save-dir",
            every.to_str().unwrap(),
            "--cache-dir",
            cache.to_str().unwrap(),
        ]);
        let line = one_line(&out);
        assert!(line.contains("blew up at step 1"), "{backend}: {line}");
        assert!(
            line.contains("left the domain through the y min wall"),
            "{line}"
        );
        assert!(line.contains("particle "), "{line}");
        assert!(!save.exists(), "{backend}: saved a blown-up state");
        assert_eq!(std::fs::read_dir(&every).unwrap().count(), 0);
    }
}

#[test]
fn an_open_domain_that_blows_up_fails_on_its_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("end.pellet");
    let scene = write_scene(dir.path(), "open.toml", BLOCK);
    let text = std::fs::read_to_string(&scene)
        .unwrap()
        .replace("gravity = [0, -9.81, 0]", "gravity = [0, -1e30, 0]")
        .replace("max = [1, 1, 1]", "max = [1, 1, 1]\nwalls = false");
    std::fs::write(&scene, text).unwrap();
    let out = player(&[
        "run",
        scene.to_str().unwrap(),
        "--headless",
        "--steps",
        "20",
        "--backend",
        "cpu",
        "--stats-every",
        "10",
        "--save",
        save.to_str().unwrap(),
    ]);
    let line = one_line(&out);
    assert!(line.contains("blew up"), "{line}");
    assert!(!save.exists());
}

#[test]
fn a_body_through_a_wall_at_the_start_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mesh = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/meshes/bunny.glb");
    let scene = write_scene(
        dir.path(),
        "body.toml",
        &format!(
            "[[bodies]]\nmesh = \"{}\"\nscale = 0.02\nposition = [0.5, -0.5, 0.5]\n",
            mesh.display()
        ),
    );
    let cache = dir.path().join("cache");
    let line = one_line(&player(&run_args(
        scene.to_str().unwrap(),
        cache.to_str().unwrap(),
    )));
    assert!(line.contains("beyond the y min wall"), "{line}");
}

#[test]
fn states_with_absurd_values_are_refused_on_load() {
    let dir = tempfile::tempdir().unwrap();
    for (name, radius, position) in [
        ("radius.pellet", 1e30f32, [0.5f32; 3]),
        ("far.pellet", 0.01, [0.5, -1e28, 0.5]),
    ] {
        let state = SimState {
            positions: vec![position].into(),
            velocities: vec![[0.0f32; 3]].into(),
            angular_velocities: vec![[0.0f32; 3]].into(),
            radii: vec![radius].into(),
            body_of_particle: vec![pellet_formats::assets::FREE_PARTICLE].into(),
            ..Default::default()
        };
        let payload = rmp_serde::to_vec_named(&state).unwrap();
        let bytes = encode_payload(AssetKind::SimState, &payload).unwrap();
        std::fs::write(dir.path().join(name), bytes).unwrap();
        let scene = write_scene(
            dir.path(),
            &format!("{name}.toml"),
            &format!("[[particles]]\nfile = \"{name}\"\n"),
        );
        let line = one_line(&player(&["info", scene.to_str().unwrap()]));
        assert!(line.contains(name), "{line}");
        assert!(
            line.contains("at most 1e6 m") || line.contains("beyond the 1e9 m"),
            "{line}"
        );
    }
}

#[test]
fn outputs_are_checked_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let scene = write_scene(dir.path(), "ok.toml", BLOCK);
    let scene = scene.to_str().unwrap();
    let file_in_file = dir.path().join("ok.toml").join("x");
    for (flag, value) in [
        ("--save", "/nodir/x.pellet"),
        ("--stats", "/nodir/s.jsonl"),
        ("--save", dir.path().to_str().unwrap()),
        ("--save-dir", file_in_file.to_str().unwrap()),
    ] {
        let mut args = vec![
            "run",
            scene,
            "--headless",
            "--steps",
            "1000000",
            "--backend",
            "cpu",
            flag,
            value,
        ];
        if flag == "--save-dir" {
            args.extend(["--save-every", "10"]);
        }
        let started = Instant::now();
        let line = one_line(&player(&args));
        assert!(line.contains(flag), "{line}");
        assert_eq!(line.matches(value).count(), 1, "{line}");
        // Refused before 10^6 steps were taken.
        assert!(started.elapsed() < Duration::from_secs(30), "{line}");
    }
    for flag in ["--out", "--counts", "--report"] {
        let line = one_line(&player(&[
            "nns",
            "--generate",
            "uniform",
            "--particles",
            "1000",
            "--radius",
            "0.5",
            "--backend",
            "cpu",
            flag,
            "/nodir/x",
        ]));
        assert!(
            line.contains(flag) && line.contains("does not exist"),
            "{line}"
        );
    }
}

#[test]
fn absurd_step_counts_are_refused_with_the_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let scene = write_scene(dir.path(), "slow.toml", BLOCK);
    let text = std::fs::read_to_string(&scene)
        .unwrap()
        .replace("time_step = 1e-5", "time_step = 1e-30");
    std::fs::write(&scene, text).unwrap();
    let line = one_line(&player(&[
        "run",
        scene.to_str().unwrap(),
        "--headless",
        "--backend",
        "cpu",
    ]));
    assert!(line.contains("1e-30") && line.contains("1e12"), "{line}");
    let scene = write_scene(dir.path(), "ok.toml", BLOCK);
    let line = one_line(&player(&[
        "run",
        scene.to_str().unwrap(),
        "--headless",
        "--backend",
        "cpu",
        "--steps",
        "10000000000000",
    ]));
    assert!(line.contains("more than the limit"), "{line}");
    // 32 blocks of 1.25e8 particles: refused before allocating, with the figure.
    let mut blocks = String::new();
    for _ in 0..32 {
        blocks.push_str(
            "[[particles]]\nregion = { min = [0, 0, 0], max = [1, 1, 1] }\nradius = 0.0001\ncount = 125000000\n",
        );
    }
    let scene = write_scene(dir.path(), "huge.toml", &blocks);
    let line = one_line(&player(&["info", scene.to_str().unwrap()]));
    assert!(line.contains("GB") && line.contains("in all"), "{line}");
}

#[test]
fn coincident_particles_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("dup.csv"),
        "0.5,0.5,0.5\n0.5005,0.5,0.5\n0.6,0.5,0.5\n0.6,0.5,0.5005\n0.3,0.3,0.3\n",
    )
    .unwrap();
    let scene = write_scene(
        dir.path(),
        "dup.toml",
        "[[particles]]\nfile = \"dup.csv\"\n",
    );
    let out = player(&[
        "run",
        scene.to_str().unwrap(),
        "--headless",
        "--steps",
        "1",
        "--backend",
        "cpu",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("2 pairs of particles start overlapping")
            && err.contains("particles 0 and 1")
            && err.contains("1.950e-2 m"),
        "{err}"
    );
}

#[test]
fn a_server_that_drips_cannot_hold_a_load() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn({
                let stopped = stopped.clone();
                move || {
                    let mut buf = [0u8; 1024];
                    let _ = stream.read(&mut buf);
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\nConnection: close\r\n\r\n",
                    );
                    // One byte every 100 ms, for at most 60 s.
                    for _ in 0..600 {
                        if stopped.load(std::sync::atomic::Ordering::Relaxed)
                            || stream.write_all(b"x").is_err()
                        {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/drip/");
    let started = Instant::now();
    let out = player_env(
        &run_args(&url, dir.path().to_str().unwrap()),
        &[("PELLET_HTTP_TIMEOUT_S", "3")],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let line = one_line(&out);
    assert!(line.contains("whole load took more than 3 s"), "{line}");
    assert!(started.elapsed() < Duration::from_secs(20), "{line}");
}

#[test]
fn rough_edges_of_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let scene = write_scene(dir.path(), "ok.toml", BLOCK);
    let scene = scene.to_str().unwrap();
    // Global flags before and after the subcommand.
    for args in [
        vec![
            "-v",
            "run",
            scene,
            "--headless",
            "--steps",
            "2",
            "--backend",
            "cpu",
        ],
        vec![
            "run",
            scene,
            "--headless",
            "--steps",
            "2",
            "--backend",
            "cpu",
            "-v",
        ],
    ] {
        let out = player(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A saved state where a scene belongs: what it is and how to use it.
    let save = dir.path().join("state.pellet");
    let out = player(&[
        "run",
        scene,
        "--headless",
        "--steps",
        "2",
        "--backend",
        "cpu",
        "--save",
        save.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    for sub in ["run", "info"] {
        let mut args = vec![sub, save.to_str().unwrap()];
        if sub == "run" {
            args.push("--headless");
        }
        let line = one_line(&player(&args));
        assert!(
            line.contains("not a scene") && line.contains("[[particles]] file"),
            "{line}"
        );
        assert!(!line.contains("UTF-8"), "{line}");
    }
    // A display that does not answer: one line, no source paths.
    let out = player_env(&[scene], &[("DISPLAY", ":77")]);
    let line = one_line(&out);
    assert!(line.contains("DISPLAY=:77"), "{line}");
    assert!(!line.contains(".cargo") && !line.contains(".rs"), "{line}");
    // Mesa's device-select layer is silenced without NODEVICE_SELECT.
    let out = Command::new(env!("CARGO_BIN_EXE_player"))
        .arg("gpu")
        .env_remove("NODEVICE_SELECT")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("XDG_RUNTIME_DIR"), "{err}");
}
