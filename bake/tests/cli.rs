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
