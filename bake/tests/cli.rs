//! `bake` end to end: the real binary on real files in a temporary folder.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pellet_formats::assets::decode_any;
use pellet_formats::scene::Rng;
use pellet_formats::{AssetKind, DecodeLimits};

fn bake(args: &[&OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bake"))
        .args(args)
        .output()
        .expect("run bake")
}

fn golden_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../formats/tests/golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("golden dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "pellet"))
        .collect();
    files.sort();
    assert_eq!(
        files.len(),
        AssetKind::ALL.len(),
        "one golden file per kind"
    );
    files
}

fn assert_one_line_error(out: &Output, file: &Path) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}: {stderr}", file.display());
    assert_eq!(
        stderr.lines().count(),
        1,
        "{}: not one line: {stderr}",
        file.display()
    );
    assert!(
        stderr.starts_with(&format!("bake: {}: ", file.display())),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn inspect_reads_every_golden_file_as_text_and_json() {
    for file in golden_files() {
        let out = bake(&["inspect".as_ref(), file.as_os_str()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).expect("utf-8");
        assert!(text.contains("format version"), "{text}");
        assert!(text.contains("(verified)"), "{text}");

        let out = bake(&["inspect".as_ref(), "--json".as_ref(), file.as_os_str()]);
        assert!(out.status.success());
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
        let stem = file.file_stem().and_then(|s| s.to_str()).expect("stem");
        assert_eq!(
            json["header"]["kind"], stem,
            "golden files are named after their kind"
        );
        assert_eq!(json["header"]["version"], 1);
        assert!(json["summary"].is_object());
    }
}

#[test]
fn inspect_of_several_files_gives_a_json_array() {
    let files = golden_files();
    let mut args: Vec<&OsStr> = vec!["inspect".as_ref(), "--json".as_ref()];
    args.extend(files.iter().map(|f| f.as_os_str()));
    let out = bake(&args);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(json.as_array().map(Vec::len), Some(files.len()));
}

#[test]
fn inspect_rejects_a_thousand_mutated_files_with_one_line_each() {
    let dir = tempfile::tempdir().expect("tempdir");
    let samples: Vec<Vec<u8>> = golden_files()
        .iter()
        .map(|f| std::fs::read(f).expect("read"))
        .collect();
    let mut rng = Rng::new(2026);
    let mut pick = |n: usize| (rng.next_u64() % n as u64) as usize;
    let mut files = Vec::new();
    while files.len() < 1000 {
        let mut bytes = samples[pick(samples.len())].clone();
        match pick(5) {
            0 | 1 => {
                let i = pick(bytes.len());
                bytes[i] ^= 1 << pick(8);
            }
            2 => bytes.truncate(pick(bytes.len())),
            3 => {
                let at = if pick(2) == 0 { 16 } else { 24 };
                let value = (pick(usize::MAX) as u64).to_le_bytes();
                bytes[at..at + 8].copy_from_slice(&value);
            }
            _ => {
                let i = pick(bytes.len());
                bytes[i] = bytes[i].wrapping_add(1 + pick(255) as u8);
            }
        }
        // Keep only files that are really broken (a flip can land in zstd
        // redundancy and leave the hashed payload intact; see formats' tests).
        if decode_any(&bytes, &DecodeLimits::default()).is_ok() {
            continue;
        }
        let path = dir.path().join(format!("mutant-{:04}.pellet", files.len()));
        std::fs::write(&path, &bytes).expect("write");
        files.push(path);
    }
    for file in &files {
        let out = bake(&["inspect".as_ref(), file.as_os_str()]);
        assert_one_line_error(&out, file);
    }
}

#[test]
fn foreign_and_missing_files_get_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: [(&str, &[u8], &str); 3] = [
        ("notes.pellet", b"hello, world\n", "not a Pellet file"),
        ("empty.pellet", b"", "empty file"),
        (
            "short.pellet",
            b"\x89PELLET\n\x01\x00",
            "shorter than the 80-byte Pellet header",
        ),
    ];
    for (name, bytes, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("write");
        let out = bake(&["inspect".as_ref(), path.as_os_str()]);
        assert_one_line_error(&out, &path);
        assert!(String::from_utf8_lossy(&out.stderr).contains(expected));
    }
    let missing = dir.path().join("missing.pellet");
    let out = bake(&["inspect".as_ref(), missing.as_os_str()]);
    assert_one_line_error(&out, &missing);
    let out = bake(&["inspect".as_ref(), dir.path().as_os_str()]);
    assert_one_line_error(&out, dir.path());
}

#[test]
fn usage_errors_exit_with_two() {
    let out = bake(&["inspect".as_ref()]);
    assert_eq!(out.status.code(), Some(2));
    let out = bake(&["frobnicate".as_ref()]);
    assert_eq!(out.status.code(), Some(2));
}

fn write_box_glb(dir: &Path) -> PathBuf {
    let path = dir.join("box.glb");
    let mesh = pellet_bake::mesh::shapes::cuboid([0.0; 3], [1.0, 0.5, 0.25]);
    std::fs::write(&path, pellet_bake::mesh::export::to_glb(&mesh)).expect("write");
    path
}

#[test]
fn bake_mesh_writes_a_body_a_preview_and_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write_box_glb(dir.path());
    let out = dir.path().join("box.pellet");
    let png = dir.path().join("box.png");
    for backend in ["gpu", "cpu"] {
        let o = bake(&[
            "mesh".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--voxel-size".as_ref(),
            "0.05".as_ref(),
            "--preview".as_ref(),
            png.as_os_str(),
            "--backend".as_ref(),
            backend.as_ref(),
            "--json".as_ref(),
        ]);
        assert!(
            o.status.success(),
            "{backend}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        let summary = &json["summary"];
        assert_eq!(summary["particles"], 1000, "{backend}");
        assert_eq!(summary["grid_dims"], serde_json::json!([20.0, 10.0, 5.0]));
        assert_eq!(
            summary["layers_peeled_xyz"],
            serde_json::json!([2.0, 2.0, 2.0])
        );
        assert_eq!(summary["open_edges"], 0);
        assert!(
            summary["backend"]
                .as_str()
                .expect("backend")
                .starts_with(backend)
        );
        let image = std::fs::read(&png).expect("preview written");
        assert_eq!(&image[1..4], b"PNG");
    }
    // --points: one line per particle, in the mesh's frame (inside the box).
    let o = bake(&["inspect".as_ref(), out.as_os_str(), "--points".as_ref()]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).expect("utf-8");
    assert_eq!(text.lines().count(), 1000);
    for line in text.lines() {
        let v: Vec<f32> = line
            .split(',')
            .map(|x| x.parse().expect("number"))
            .collect();
        assert!(
            v[0] > 0.0 && v[0] < 1.0 && v[1] > 0.0 && v[1] < 0.5 && v[2] > 0.0 && v[2] < 0.25,
            "{line}"
        );
    }
}

#[test]
fn bake_mesh_errors_are_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let junk = dir.path().join("junk.glb");
    std::fs::write(&junk, b"glTF\x02\0\0\0garbage").expect("write");
    let out = dir.path().join("junk.pellet");
    let o = bake(&[
        "mesh".as_ref(),
        junk.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--resolution".as_ref(),
        "8".as_ref(),
        "--backend".as_ref(),
        "cpu".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "bake: {}: not a valid glTF 2.0 file",
            junk.display()
        )),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing written for a failed bake");
    // Neither --voxel-size nor --resolution: a usage error.
    let input = write_box_glb(dir.path());
    let o = bake(&[
        "mesh".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let o = bake(&[
        "mesh".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
        "--voxel-size=-1".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("voxel size must be a positive number"));
}

#[test]
fn bake_table_then_inspect_at_a_ratio_and_as_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = dir.path().join("table.pellet");
    let o = bake(&[
        "table".as_ref(),
        "-o".as_ref(),
        table.as_os_str(),
        "--ratios".as_ref(),
        "8".as_ref(),
        "--samples".as_ref(),
        "20000".as_ref(),
        "--method".as_ref(),
        "sobol".as_ref(),
        "--quiet".as_ref(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Every offset of {-2..2}^3 at one ratio, as CSV, summing to the sphere.
    let o = bake(&[
        "inspect".as_ref(),
        table.as_os_str(),
        "--ratio".as_ref(),
        "1.0".as_ref(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).expect("utf-8");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("dx,dy,dz,value,stderr"));
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|x| x.parse().expect("number")).collect())
        .collect();
    assert_eq!(rows.len(), 125);
    let sum: f64 = rows.iter().map(|r| r[3]).sum();
    assert!(
        (sum - 4.0 / 3.0 * std::f64::consts::PI).abs() < 0.01,
        "{sum}"
    );
    // JSON: every stored entry.
    let o = bake(&["inspect".as_ref(), table.as_os_str(), "--json".as_ref()]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(json["entries"].as_array().map(Vec::len), Some(8 * 10));
    // Out of range: one line, exit 1.
    let o = bake(&[
        "inspect".as_ref(),
        table.as_os_str(),
        "--ratio".as_ref(),
        "2.5".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("outside the table's range"));
    // validate-table on a point file in metres (cell length 0.1 m), as JSON.
    let points = dir.path().join("points.csv");
    let mut rng = Rng::new(5);
    let mut csv = String::from("x,y,z\n");
    for _ in 0..5000 {
        let mut u = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        csv.push_str(&format!("{},{},{}\n", u() - 0.5, u() * 0.5, u()));
    }
    std::fs::write(&points, csv).expect("write");
    let o = bake(&[
        "validate-table".as_ref(),
        table.as_os_str(),
        "--points".as_ref(),
        points.as_os_str(),
        "--cell-length".as_ref(),
        "0.1".as_ref(),
        "--ratios".as_ref(),
        "1".as_ref(),
        "--json".as_ref(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let row = &json[0];
    assert_eq!(row["distribution"], "points");
    assert_eq!(row["particles"], 5000);
    // 10 per cell and eps = 0.1 m: about 40 neighbours, less at the faces.
    let mean = row["mean_neighbours"].as_f64().expect("mean");
    assert!((20.0..42.0).contains(&mean), "{row}");
    // The truth has a spread; the oracle (the fit plus the exact counts
    // around each cell) is reported (null where the sample is too small to
    // fit, as here: 5000 points give too few sample cells).
    assert!(row["truth_std"].as_f64().expect("std") > 0.0, "{row}");
    assert!(row.get("oracle_correlation").is_some(), "{row}");
    // --points needs --cell-length; a bad point file is one line.
    let o = bake(&[
        "validate-table".as_ref(),
        table.as_os_str(),
        "--points".as_ref(),
        points.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::write(&points, "1,2\n").expect("write");
    let o = bake(&[
        "validate-table".as_ref(),
        table.as_os_str(),
        "--points".as_ref(),
        points.as_os_str(),
        "--cell-length".as_ref(),
        "0.1".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim_end(),
        format!("bake: {}:1: has 2 fields, expected x,y,z", points.display())
    );
    // A corrupt table: one line naming the file.
    let mut bytes = std::fs::read(&table).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&table, &bytes).expect("write");
    let o = bake(&[
        "inspect".as_ref(),
        table.as_os_str(),
        "--ratio".as_ref(),
        "1.0".as_ref(),
    ]);
    assert_one_line_error(&o, &table);
}

#[test]
fn inspect_particles_prints_a_saved_state_as_csv() {
    let state_file = golden_files()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("sim_state"))
        .expect("golden sim state");
    let (_, asset) = decode_any(
        &std::fs::read(&state_file).expect("read"),
        &DecodeLimits::default(),
    )
    .expect("decode");
    let pellet_formats::AnyAsset::SimState(state) = asset else {
        panic!("not a sim state")
    };
    let out = bake(&[
        OsStr::new("inspect"),
        state_file.as_os_str(),
        OsStr::new("--particles"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf8");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("id,x,y,z,vx,vy,vz,radius,body"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), state.positions.len());
    let first: Vec<f64> = rows[0]
        .split(',')
        .map(|v| v.parse().expect("number"))
        .collect();
    assert_eq!(first.len(), 9);
    assert_eq!(first[1] as f32, state.positions[0][0]);
    // Not a state: one line naming the file.
    let other = golden_files()
        .into_iter()
        .find(|p| !p.to_string_lossy().contains("sim_state"))
        .expect("another golden file");
    let out = bake(&[
        OsStr::new("inspect"),
        other.as_os_str(),
        OsStr::new("--particles"),
    ]);
    assert_one_line_error(&out, &other);
}

#[test]
fn bake_scene_writes_a_folder_reuses_unchanged_bodies_and_rejects_tampering() {
    let dir = tempfile::tempdir().expect("tempdir");
    let meshes = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/meshes");
    std::fs::copy(meshes.join("tile.glb"), dir.path().join("tile.glb")).expect("copy");
    std::fs::write(
        dir.path().join("grains.csv"),
        "x,y,z\n0.1,0.2,0.1\n0.15,0.2,0.1\n",
    )
    .expect("csv");
    let scene = dir.path().join("scene.toml");
    std::fs::write(
        &scene,
        "name = \"tiles\"\n[domain]\nmin = [0, 0, 0]\nmax = [1, 1, 1]\n\
         [[particles]]\nfile = \"grains.csv\"\n\
         [[bodies]]\nmesh = \"tile.glb\"\nposition = [0.5, 0.5, 0.5]\narray = { count = [2, 1, 1], spacing = [0.1, 0, 0] }\n",
    )
    .expect("scene");
    let out = dir.path().join("baked");
    let run = || {
        bake(&[
            OsStr::new("scene"),
            scene.as_os_str(),
            OsStr::new("-o"),
            out.as_os_str(),
            OsStr::new("--json"),
            OsStr::new("--quiet"),
        ])
    };
    let first = run();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&first.stdout).expect("json");
    assert_eq!(report["bodies"][0]["baked"], true);
    assert_eq!(report["bodies"][0]["particles"], 9);
    // body, particle file, scene
    assert_eq!(report["objects"], 3);
    let manifest = out.join("manifest.pellet");
    assert!(manifest.exists());
    // Every object's name is its content hash.
    for entry in std::fs::read_dir(&out).expect("read dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_stem()
            .expect("stem")
            .to_string_lossy()
            .into_owned();
        if name != "manifest" {
            let bytes = std::fs::read(&path).expect("read");
            assert_eq!(blake3::hash(&bytes).to_hex().to_string(), name);
        }
    }
    // Unchanged: nothing re-baked, same scene object.
    let second = run();
    assert!(second.status.success());
    let again: serde_json::Value = serde_json::from_slice(&second.stdout).expect("json");
    assert_eq!(again["bodies"][0]["baked"], false);
    assert_eq!(again["scene_object"], report["scene_object"]);
    // A tampered object is rejected by readers, naming the file.
    let body = out.join(format!(
        "{}.pellet",
        report["bodies"][0]["object"].as_str().expect("hash")
    ));
    let mut bytes = std::fs::read(&body).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&body, &bytes).expect("write");
    let err = pellet_formats::baked_folder::read_object::<pellet_formats::assets::ParticleBody>(
        &out,
        report["bodies"][0]["object"].as_str().expect("hash"),
        &DecodeLimits::default(),
    )
    .expect_err("tampered");
    assert!(err.to_string().contains("content hash"), "{err}");
    // A broken scene is one line.
    std::fs::write(&scene, "[domain]\nmin = [0, 0]\n").expect("scene");
    let broken = run();
    assert_eq!(broken.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&broken.stderr)
            .trim()
            .lines()
            .count(),
        1
    );
}

#[test]
fn inspect_bodies_prints_body_rows() {
    let state_file = golden_files()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("sim_state"))
        .expect("golden sim state");
    let out = bake(&[
        OsStr::new("inspect"),
        state_file.as_os_str(),
        OsStr::new("--bodies"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "id,x,y,z,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz");
    assert_eq!(lines.len(), 2, "one body: {text}");
    let cols: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(cols.len(), 14);
    assert_eq!(cols[4], "1", "qw of the identity");
}

#[test]
fn bake_watch_rebakes_after_an_edit_and_survives_a_broken_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let meshes = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/meshes");
    std::fs::copy(meshes.join("tile.glb"), dir.path().join("tile.glb")).expect("copy");
    let scene = dir.path().join("scene.toml");
    let good = |radius: f32| {
        format!(
            "name = \"w\"\n[domain]\nmin = [0, 0, 0]\nmax = [1, 1, 1]\n[[bodies]]\nmesh = \"tile.glb\"\nparticle_radius = {radius}\nposition = [0.5, 0.5, 0.5]\n"
        )
    };
    let save = |text: &str| {
        let tmp = dir.path().join("scene.toml.tmp");
        std::fs::write(&tmp, text).expect("write");
        std::fs::rename(&tmp, &scene).expect("rename");
    };
    save(&good(0.01));
    let out = dir.path().join("baked");
    let child = Command::new(env!("CARGO_BIN_EXE_bake"))
        .args([
            OsStr::new("watch"),
            scene.as_os_str(),
            OsStr::new("-o"),
            out.as_os_str(),
        ])
        .args(["--max-bakes", "3"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // The first bake.
    let start = std::time::Instant::now();
    while !out.join("manifest.pellet").exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "no first bake"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(700));
    save("[domain]\nmin = [0, 0, 0]\n"); // broken: the folder stays
    std::thread::sleep(std::time::Duration::from_millis(1200));
    save(&good(0.005)); // fixed: re-baked at a new size
    let output = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("baked")).count(),
        2,
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("(1 re-baked)"), "{stdout}");
    assert!(stderr.contains("keeping the last good folder"), "{stderr}");
    assert!(out.join("manifest.pellet").exists());
}

/// Runs `bake` with `args`, killing it (and failing) if it runs past
/// `seconds`: a FIFO or device read would otherwise hang the test.
fn bake_within(seconds: u64, args: &[&OsStr], env_remove: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bake"));
    command
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for var in env_remove {
        command.env_remove(var);
    }
    let mut child = command.spawn().expect("spawn bake");
    let start = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > std::time::Duration::from_secs(seconds) {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "bake {args:?} still running after {seconds} s: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// `bake mesh INPUT -o OUTPUT` with the CPU voxelizer and `extra`.
fn bake_mesh_args<'a>(input: &'a Path, output: &'a Path, extra: &'a [&'a str]) -> Vec<&'a OsStr> {
    let mut args: Vec<&OsStr> = vec![
        "mesh".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        output.as_os_str(),
        "--backend".as_ref(),
        "cpu".as_ref(),
    ];
    args.extend(extra.iter().map(OsStr::new));
    args
}

/// Exactly one line on stderr, exit 1, `file` named once right after
/// `bake: `, and no `: `-separated fragment said twice.
fn assert_one_clear_line(out: &Output, file: &Path) -> String {
    assert_one_line_error(out, file);
    let line = String::from_utf8_lossy(&out.stderr).trim_end().to_owned();
    let name = file.display().to_string();
    assert_eq!(line.matches(&*name).count(), 1, "file named once: {line}");
    let fragments: Vec<&str> = line.split(": ").collect();
    for (i, f) in fragments.iter().enumerate() {
        assert!(!fragments[i + 1..].contains(f), "{f:?} repeated in {line}");
    }
    line
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Hidden files left in `dir`: temporary files that should be gone.
fn temporary_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

#[test]
fn bake_mesh_refuses_devices_fifos_and_folders_quickly_in_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("x.pellet");
    let fifo = dir.path().join("pipe.glb");
    mkfifo(&fifo);
    let cases: [(&Path, &str); 3] = [
        (
            Path::new("/dev/zero"),
            "is a character device, not a regular file",
        ),
        (&fifo, "is a FIFO, not a regular file"),
        (dir.path(), "is a folder, not a regular file"),
    ];
    for (input, expected) in cases {
        // 2 GB of address space: reading /dev/zero to its end would abort.
        let script =
            "ulimit -v 2000000; exec \"$0\" mesh \"$1\" -o \"$2\" --resolution 8 --backend cpu";
        let mut child = Command::new("bash")
            .args(["-c", script, env!("CARGO_BIN_EXE_bake")])
            .arg(input)
            .arg(&out)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let start = std::time::Instant::now();
        while child.try_wait().expect("wait").is_none() {
            if start.elapsed().as_secs() > 30 {
                let _ = child.kill();
                panic!("bake mesh {} hangs", input.display());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let o = child.wait_with_output().expect("output");
        let line = assert_one_clear_line(&o, input);
        assert_eq!(line, format!("bake: {}: {expected}", input.display()));
        assert!(!out.exists());
    }
    // A glTF whose buffer is a FIFO (or /dev/zero behind a link) in its folder.
    let cube = pellet_bake::mesh::shapes::cuboid([0.0; 3], [1.0; 3]);
    let (doc, _) = pellet_bake::mesh::export::to_gltf(
        &cube,
        &pellet_bake::mesh::export::BufferUri::File("cube.bin".into()),
    );
    let gltf = dir.path().join("cube.gltf");
    std::fs::write(&gltf, doc).expect("gltf");
    mkfifo(&dir.path().join("cube.bin"));
    let o = bake_within(
        30,
        &bake_mesh_args(&gltf, &out, &["--resolution", "8"]),
        &[],
    );
    let line = assert_one_clear_line(&o, &gltf);
    assert!(
        line.ends_with("buffer 0 (cube.bin): is a FIFO, not a regular file"),
        "{line}"
    );
    std::fs::remove_file(dir.path().join("cube.bin")).expect("rm fifo");
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("cube.bin")).expect("symlink");
    let o = bake_within(
        30,
        &bake_mesh_args(&gltf, &out, &["--resolution", "8"]),
        &[],
    );
    let line = assert_one_clear_line(&o, &gltf);
    assert!(
        line.ends_with("is a character device, not a regular file"),
        "{line}"
    );
    assert!(!out.exists());
    assert!(temporary_files(dir.path()).is_empty());
}

#[test]
fn bake_mesh_never_overwrites_its_input_and_replaces_outputs_all_or_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write_box_glb(dir.path());
    let original = std::fs::read(&input).expect("read");
    let out = dir.path().join("box.pellet");
    let png = dir.path().join("box.png");
    // -o the input itself, also spelt differently: refused, the mesh intact.
    let spelt = dir.path().join(".").join("box.glb");
    for target in [&input, &spelt] {
        let o = bake(&bake_mesh_args(&input, target, &["--voxel-size", "0.05"]));
        let line = assert_one_clear_line(&o, target);
        assert!(
            line.ends_with("is also an input of this command; refusing to overwrite it"),
            "{line}"
        );
        assert_eq!(std::fs::read(&input).expect("read"), original);
    }
    // --preview the input, or the output.
    let input_str = input.to_str().expect("utf-8");
    let o = bake(&bake_mesh_args(
        &input,
        &out,
        &["--voxel-size", "0.05", "--preview", input_str],
    ));
    assert_one_clear_line(&o, &input);
    assert_eq!(std::fs::read(&input).expect("read"), original);
    let out_str = out.to_str().expect("utf-8");
    let o = bake(&bake_mesh_args(
        &input,
        &out,
        &["--voxel-size", "0.05", "--preview", out_str],
    ));
    let line = assert_one_clear_line(&o, &out);
    assert!(line.ends_with("is named for two outputs"), "{line}");
    assert!(!out.exists());
    // -o a folder.
    let o = bake(&bake_mesh_args(
        &input,
        dir.path(),
        &["--voxel-size", "0.05"],
    ));
    let line = assert_one_clear_line(&o, dir.path());
    assert!(line.ends_with("is a folder, not a file"), "{line}");

    // An existing output survives a bad --preview path byte for byte, and
    // the preview is checked before the mesh is even read (a broken mesh
    // is not what is reported).
    std::fs::write(&out, b"the old body").expect("write");
    let junk = dir.path().join("junk.glb");
    std::fs::write(&junk, b"not a mesh").expect("write");
    let bad = Path::new("/nodir/p.png");
    for mesh in [&input, &junk] {
        let o = bake(&bake_mesh_args(
            mesh,
            &out,
            &["--voxel-size", "0.05", "--preview", "/nodir/p.png"],
        ));
        let line = assert_one_clear_line(&o, bad);
        assert_eq!(line, "bake: /nodir/p.png: the folder /nodir does not exist");
        assert_eq!(std::fs::read(&out).expect("read"), b"the old body");
    }
    // A bake that fails after the checks leaves the old output as it was.
    let o = bake(&bake_mesh_args(
        &junk,
        &out,
        &[
            "--voxel-size",
            "0.05",
            "--preview",
            png.to_str().expect("utf-8"),
        ],
    ));
    assert_one_clear_line(&o, &junk);
    assert_eq!(std::fs::read(&out).expect("read"), b"the old body");
    assert!(!png.exists());
    assert!(
        temporary_files(dir.path()).is_empty(),
        "{:?}",
        temporary_files(dir.path())
    );

    // A .gltf's buffer file is an input too.
    let cube = pellet_bake::mesh::shapes::cuboid([0.0; 3], [1.0; 3]);
    let (doc, bin) = pellet_bake::mesh::export::to_gltf(
        &cube,
        &pellet_bake::mesh::export::BufferUri::File("cube.bin".into()),
    );
    let gltf = dir.path().join("cube.gltf");
    let bin_path = dir.path().join("cube.bin");
    std::fs::write(&gltf, doc).expect("gltf");
    let bin = bin.expect("bin");
    std::fs::write(&bin_path, &bin).expect("bin");
    let o = bake(&bake_mesh_args(&gltf, &bin_path, &["--resolution", "4"]));
    let line = assert_one_clear_line(&o, &bin_path);
    assert!(line.contains("is also an input"), "{line}");
    assert_eq!(std::fs::read(&bin_path).expect("read"), bin);

    // And a good bake replaces both outputs.
    let o = bake(&bake_mesh_args(
        &input,
        &out,
        &[
            "--voxel-size",
            "0.05",
            "--preview",
            png.to_str().expect("utf-8"),
            "--quiet",
        ],
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_ne!(std::fs::read(&out).expect("read"), b"the old body");
    assert_eq!(&std::fs::read(&png).expect("png")[1..4], b"PNG");
    assert!(temporary_files(dir.path()).is_empty());
}

#[test]
fn bake_table_and_scene_check_their_outputs_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = Path::new("/nodir/t.pellet");
    // A million samples per entry would take a while: the check comes first.
    let o = bake_within(
        30,
        &[
            "table".as_ref(),
            "-o".as_ref(),
            bad.as_os_str(),
            "--quiet".as_ref(),
        ],
        &[],
    );
    let line = assert_one_clear_line(&o, bad);
    assert!(line.ends_with("the folder /nodir does not exist"), "{line}");
    let o = bake(&["table".as_ref(), "-o".as_ref(), dir.path().as_os_str()]);
    assert_one_clear_line(&o, dir.path());
    // bake scene -o a file: refused, the file intact.
    let scene = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/scenes/ballpit.toml");
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, b"keep me").expect("write");
    let o = bake(&[
        "scene".as_ref(),
        scene.as_os_str(),
        "-o".as_ref(),
        file.as_os_str(),
    ]);
    let line = assert_one_clear_line(&o, &file);
    assert!(line.ends_with("is a file, not a folder"), "{line}");
    assert_eq!(std::fs::read(&file).expect("read"), b"keep me");
}

#[test]
fn bake_table_refuses_more_samples_than_memory_allows_before_allocating() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = dir.path().join("t.pellet");
    let o = bake_within(
        30,
        &[
            "table".as_ref(),
            "-o".as_ref(),
            table.as_os_str(),
            "--samples".as_ref(),
            "1000000000000".as_ref(),
        ],
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim_end(),
        "bake: 1000000000000 samples per entry need 14.6 TiB of memory, more than the 4.0 GiB limit (at most 268435456 samples)"
    );
    assert!(!table.exists());
    assert!(temporary_files(dir.path()).is_empty());
}

#[test]
fn grid_errors_name_the_mesh_once_and_say_the_problem_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write_box_glb(dir.path());
    let out = dir.path().join("o.pellet");
    let point = dir.path().join("point.glb");
    let mesh = pellet_bake::mesh::TriMesh {
        positions: vec![[0.5; 3]; 3],
        triangles: vec![[0, 1, 2]],
    };
    std::fs::write(&point, pellet_bake::mesh::export::to_glb(&mesh)).expect("write");
    let cube = dir.path().join("cube.glb");
    let mesh = pellet_bake::mesh::shapes::cuboid([0.0; 3], [1.0; 3]);
    std::fs::write(&cube, pellet_bake::mesh::export::to_glb(&mesh)).expect("write");
    let cases: [(&Path, &[&str], &str); 5] = [
        (
            &input,
            &["--resolution", "0"],
            "the resolution must be at least 1 cell",
        ),
        (
            &input,
            &["--voxel-size=-1"],
            "the voxel size must be a positive number of metres, not -1",
        ),
        (
            &input,
            &["--voxel-size", "0.000125"],
            "the grid would be [8000, 4000, 2000] voxels; at most 4096 per side (use a larger voxel size)",
        ),
        (
            &point,
            &["--resolution", "8"],
            "the mesh's bounding box [0.0, 0.0, 0.0] has no extent along its longest axis",
        ),
        // The bunny-at-10-m case: a 10 m cube at 0.01 m voxels.
        (
            &cube,
            &["--voxel-size", "0.01", "--scale", "10"],
            "at 0.01 m voxels the grid would be 1000x1000x1000 = 1000000000 voxels (about 1000000000 particles), more than the limits of 268435456 voxels and 33554432 particles; use a voxel size of at least 0.0311 m",
        ),
    ];
    for (mesh, extra, expected) in cases {
        let o = bake_within(60, &bake_mesh_args(mesh, &out, extra), &[]);
        let line = assert_one_clear_line(&o, mesh);
        assert_eq!(
            line,
            format!("bake: {}: {expected}", mesh.display()),
            "{extra:?}"
        );
        assert!(!out.exists());
    }
}

#[test]
fn gpu_commands_print_no_device_select_noise() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = write_box_glb(dir.path());
    let out = dir.path().join("box.pellet");
    let o = bake_within(
        300,
        &[
            "mesh".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--voxel-size".as_ref(),
            "0.05".as_ref(),
            "--backend".as_ref(),
            "gpu".as_ref(),
            "--quiet".as_ref(),
        ],
        &["NODEVICE_SELECT", "XDG_RUNTIME_DIR"],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(!stderr.contains("XDG_RUNTIME_DIR"), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn validate_table_progress_stays_off_a_pipe() {
    let dir = tempfile::tempdir().expect("tempdir");
    let table = dir.path().join("table.pellet");
    let o = bake(&[
        "table".as_ref(),
        "-o".as_ref(),
        table.as_os_str(),
        "--ratios".as_ref(),
        "4".as_ref(),
        "--ratio-min".as_ref(),
        "0.5".as_ref(),
        "--samples".as_ref(),
        "16000".as_ref(),
        "--quiet".as_ref(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for quiet in [false, true] {
        let mut args: Vec<&OsStr> = vec![
            "validate-table".as_ref(),
            table.as_os_str(),
            "--particles".as_ref(),
            "20000".as_ref(),
            "--distributions".as_ref(),
            "uniform".as_ref(),
            "--ratios".as_ref(),
            "1".as_ref(),
            "--json".as_ref(),
        ];
        if quiet {
            args.push("--quiet".as_ref());
        }
        let o = bake(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            o.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(rows.as_array().map(Vec::len), Some(1));
    }
}

#[test]
fn an_interrupted_bake_leaves_the_old_output_and_no_temporary_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cube = dir.path().join("cube.glb");
    let mesh = pellet_bake::mesh::shapes::cuboid([0.0; 3], [1.0; 3]);
    std::fs::write(&cube, pellet_bake::mesh::export::to_glb(&mesh)).expect("write");
    let out = dir.path().join("cube.pellet");
    let png = dir.path().join("cube.png");
    std::fs::write(&out, b"the old body").expect("write");
    // 300^3 voxels: seconds of work, killed in the middle of it.
    let mut child = Command::new(env!("CARGO_BIN_EXE_bake"))
        .args(bake_mesh_args(
            &cube,
            &out,
            &[
                "--resolution",
                "300",
                "--preview",
                png.to_str().expect("utf-8"),
            ],
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        child.try_wait().expect("wait").is_none(),
        "the bake finished before it could be interrupted"
    );
    child.kill().expect("kill");
    child.wait().expect("wait");
    assert_eq!(std::fs::read(&out).expect("read"), b"the old body");
    assert!(!png.exists());
    assert!(
        temporary_files(dir.path()).is_empty(),
        "{:?}",
        temporary_files(dir.path())
    );
}
