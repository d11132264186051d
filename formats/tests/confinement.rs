//! What `formats` refuses so that untrusted input cannot make a reader read
//! outside a baked folder, block, or grow without bound (issue 16).
#![allow(clippy::unwrap_used)]

use std::path::Path;

use pellet_formats::AssetKind;
use pellet_formats::assets::{BakedScene, SimState};
use pellet_formats::container::{DecodeLimits, decode, encode, encode_payload};
use pellet_formats::io::{FileReadError, check_output_file, read_regular_file};

mod common;

#[test]
fn only_regular_files_within_the_limit_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.csv");
    std::fs::write(&file, b"1,2,3\n").unwrap();
    assert_eq!(read_regular_file(&file, 6).unwrap(), b"1,2,3\n");
    assert!(matches!(
        read_regular_file(&file, 5),
        Err(FileReadError::TooLarge { size: 6, limit: 5 })
    ));
    assert!(matches!(
        read_regular_file(Path::new("/dev/zero"), 1 << 20),
        Err(FileReadError::NotRegular("character device"))
    ));
    assert!(matches!(
        read_regular_file(dir.path(), 1 << 20),
        Err(FileReadError::NotRegular("folder"))
    ));
    let fifo = dir.path().join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // Refused without opening it (opening would block until a writer came).
    assert!(matches!(
        read_regular_file(&fifo, 1 << 20),
        Err(FileReadError::NotRegular("FIFO"))
    ));
    let e = pellet_formats::io::read_bytes(&fifo, &DecodeLimits::default()).unwrap_err();
    assert!(e.to_string().contains("FIFO, not a regular file"), "{e}");
    assert!(matches!(
        read_regular_file(&dir.path().join("missing"), 1),
        Err(FileReadError::Io(_))
    ));
}

#[test]
fn output_paths_are_checked_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    assert!(check_output_file(&dir.path().join("x.pellet")).is_ok());
    assert!(!dir.path().join("x.pellet").exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let e = check_output_file(Path::new("/nodir/x.pellet"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nodir does not exist"), "{e}");
    let e = check_output_file(dir.path()).unwrap_err().to_string();
    assert!(e.contains("is a folder"), "{e}");
}

fn baked_with_file(file: &str) -> BakedScene {
    let mut baked = common::baked_scene();
    let text =
        format!("[domain]\nmin = [0, 0, 0]\nmax = [1, 1, 1]\n[[particles]]\nfile = \"{file}\"\n");
    baked.scene = pellet_formats::Scene::parse(&text, Path::new("s.toml")).unwrap();
    baked.bodies.clear();
    baked
}

#[test]
fn a_baked_scene_names_only_objects_of_its_folder() {
    let hash = "ab".repeat(32);
    let good = baked_with_file(&format!("{hash}.pellet"));
    let bytes = encode(&good).unwrap();
    let back: BakedScene = decode(&bytes, &DecodeLimits::default()).unwrap();
    assert_eq!(back, good);
    for file in [
        "/etc/passwd",
        "../x.csv",
        "/dev/zero",
        "p.csv",
        &format!("../{hash}.pellet"),
        &format!("{}.pellet", "AB".repeat(32)),
    ] {
        let hostile = baked_with_file(file);
        // The encoder refuses to write it...
        assert!(encode(&hostile).is_err(), "{file}");
        // ...and a hand-made one is refused on decode.
        let payload = rmp_serde::to_vec_named(&hostile).unwrap();
        let bytes = encode_payload(AssetKind::BakedScene, &payload).unwrap();
        let e = decode::<BakedScene>(&bytes, &DecodeLimits::default()).unwrap_err();
        assert!(
            e.to_string().contains("not an object of the baked folder"),
            "{file}: {e}"
        );
    }
}

#[test]
fn states_with_absurd_values_are_refused() {
    let base = common::sim_state();
    assert!(encode(&base).is_ok());
    let mut cases = Vec::new();
    let mut s = base.clone();
    s.radii = vec![1e30f32; s.radii.len()].into();
    cases.push(("radii[0]", s));
    let mut s = base.clone();
    let mut p = s.positions.to_vec();
    p[1] = [0.0, -1e28, 0.0];
    s.positions = p.into();
    cases.push(("positions[1]", s));
    let mut s = base.clone();
    let mut v = s.velocities.to_vec();
    v[0] = [4e8, 0.0, 0.0];
    s.velocities = v.into();
    cases.push(("velocities[0]", s));
    for (field, state) in cases {
        assert!(encode(&state).is_err(), "{field}");
        let payload = rmp_serde::to_vec_named(&state).unwrap();
        let bytes = encode_payload(AssetKind::SimState, &payload).unwrap();
        let e = decode::<SimState>(&bytes, &DecodeLimits::default()).unwrap_err();
        assert!(e.to_string().contains(field), "{field}: {e}");
    }
}

#[test]
fn scenes_that_would_exhaust_memory_or_time_are_refused() {
    let base = "[domain]\nmin = [0, 0, 0]\nmax = [1, 1, 1]\n";
    let mut blocks = String::from(base);
    for _ in 0..32 {
        blocks.push_str(
            "[[particles]]\nregion = { min = [0, 0, 0], max = [1, 1, 1] }\nradius = 0.0001\ncount = 125000000\n",
        );
    }
    let e = pellet_formats::Scene::parse(&blocks, Path::new("huge.toml")).unwrap_err();
    let e = e.to_string();
    assert!(e.contains("particles[2]") && e.contains("GB"), "{e}");
    let slow = format!("{base}[simulation]\ntime_step = 1e-30\n");
    let e = pellet_formats::Scene::parse(&slow, Path::new("slow.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("1e-30 s") && e.contains("1e12"), "{e}");
}
