//! Bad meshes get a clear error naming the file and the problem, never a panic.

use std::path::Path;

use pellet_bake::mesh::export::{BufferUri, to_glb, to_gltf};
use pellet_bake::mesh::shapes::cuboid;
use pellet_bake::mesh::{MeshError, load_mesh};

fn cube_gltf(mode: u32, attributes: &str, extra: &str) -> String {
    let (doc, _) = to_gltf(&cuboid([0.0; 3], [1.0; 3]), &BufferUri::DataUri);
    doc.replace("\"mode\":4", &format!("\"mode\":{mode}"))
        .replace("\"attributes\":{\"POSITION\":0}", attributes)
        .replace("\"scene\":0", &format!("\"scene\":0{extra}"))
}

fn load_text(dir: &Path, name: &str, text: &str) -> Result<pellet_bake::mesh::TriMesh, MeshError> {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    load_mesh(&path)
}

#[test]
fn glb_gltf_with_bin_and_data_uris_all_load_the_same_mesh() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cube = cuboid([0.0; 3], [1.0; 3]);
    std::fs::write(dir.path().join("cube.glb"), to_glb(&cube)).expect("glb");
    let (doc, bin) = to_gltf(&cube, &BufferUri::File("cube%20data.bin".into()));
    std::fs::write(dir.path().join("cube.gltf"), doc).expect("gltf");
    std::fs::write(dir.path().join("cube data.bin"), bin.expect("bin")).expect("bin");
    let (inline, _) = to_gltf(&cube, &BufferUri::DataUri);
    std::fs::write(dir.path().join("inline.gltf"), inline).expect("gltf");
    for name in ["cube.glb", "cube.gltf", "inline.gltf"] {
        let mesh = load_mesh(&dir.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(mesh, cube, "{name}");
    }
}

#[test]
fn node_transforms_are_applied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (doc, _) = to_gltf(&cuboid([0.0; 3], [1.0; 3]), &BufferUri::DataUri);
    let doc = doc.replace(
        "\"nodes\":[{\"mesh\":0}]",
        "\"nodes\":[{\"children\":[1],\"translation\":[10,0,0]},{\"mesh\":0,\"scale\":[2,2,2]}]",
    );
    let mesh = load_text(dir.path(), "moved.gltf", &doc).expect("load");
    let b = mesh.bounds().expect("bounds");
    assert_eq!((b.min, b.max), ([10.0, 0.0, 0.0], [12.0, 2.0, 2.0]));
}

#[test]
fn points_and_lines_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (mode, word) in [(0, "points"), (1, "lines"), (3, "line strip")] {
        let err = load_text(
            dir.path(),
            "p.gltf",
            &cube_gltf(mode, "\"attributes\":{\"POSITION\":0}", ""),
        )
        .expect_err("mode");
        assert!(matches!(err, MeshError::NotTriangles { .. }), "{err}");
        assert!(err.to_string().contains(word), "{err}");
    }
}

#[test]
fn a_primitive_without_positions_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = load_text(dir.path(), "n.gltf", &cube_gltf(4, "\"attributes\":{}", ""))
        .expect_err("no positions");
    // The glTF validator or the loader names the missing attribute.
    assert!(err.to_string().contains("POSITION"), "{err}");
}

#[test]
fn nan_coordinates_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cube = cuboid([0.0; 3], [1.0; 3]);
    cube.positions[3][1] = f32::NAN;
    std::fs::write(dir.path().join("nan.glb"), to_glb(&cube)).expect("write");
    let err = load_mesh(&dir.path().join("nan.glb")).expect_err("nan");
    assert!(err.to_string().contains("vertex 3"), "{err}");
    assert!(err.to_string().contains("not finite"), "{err}");
}

#[test]
fn an_empty_mesh_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = r#"{"asset":{"version":"2.0"},"scene":0,"scenes":[{"nodes":[]}]}"#;
    let err = load_text(dir.path(), "empty.gltf", empty).expect_err("empty");
    assert!(matches!(err, MeshError::Empty), "{err}");
}

#[test]
fn truncated_and_foreign_files_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let glb = to_glb(&cuboid([0.0; 3], [1.0; 3]));
    for cut in [0, 11, 20, glb.len() / 2, glb.len() - 1] {
        std::fs::write(dir.path().join("cut.glb"), &glb[..cut]).expect("write");
        let err = load_mesh(&dir.path().join("cut.glb")).expect_err("truncated");
        assert!(
            matches!(
                err,
                MeshError::Gltf(_) | MeshError::ShortBuffer { .. } | MeshError::Buffer { .. }
            ),
            "{cut}: {err}"
        );
    }
    let err = load_text(dir.path(), "text.gltf", "this is not json").expect_err("foreign");
    assert!(
        err.to_string().starts_with("not a valid glTF 2.0 file"),
        "{err}"
    );
}

#[test]
fn buffer_uris_may_not_leave_the_mesh_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cube = cuboid([0.0; 3], [1.0; 3]);
    for (uri, reason) in [
        ("../secret.bin", "leaves the mesh's folder"),
        ("sub/../../secret.bin", "leaves the mesh's folder"),
        ("/etc/passwd", "absolute path"),
        ("file:///etc/passwd", "not a file inside"),
        ("http://example.com/a.bin", "not a file inside"),
        ("C:/Windows/a.bin", "not a file inside"),
    ] {
        let (doc, _) = to_gltf(&cube, &BufferUri::File(uri.into()));
        let err = load_text(dir.path(), "evil.gltf", &doc).expect_err(uri);
        assert!(
            matches!(err, MeshError::ForbiddenUri { .. }),
            "{uri}: {err}"
        );
        assert!(err.to_string().contains(reason), "{uri}: {err}");
    }
}

#[test]
fn accessors_pointing_past_their_data_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (doc, _) = to_gltf(&cuboid([0.0; 3], [1.0; 3]), &BufferUri::DataUri);
    let doc = doc.replace("\"count\":8", "\"count\":800");
    let err = load_text(dir.path(), "long.gltf", &doc).expect_err("count");
    assert!(
        matches!(err, MeshError::Accessor { .. } | MeshError::Gltf(_)),
        "{err}"
    );
    let (doc, _) = to_gltf(&cuboid([0.0; 3], [1.0; 3]), &BufferUri::DataUri);
    let doc = doc.replace("\"componentType\":5126", "\"componentType\":5121");
    let err = load_text(dir.path(), "bytes.gltf", &doc).expect_err("type");
    assert!(
        err.to_string().contains("float VEC3") || matches!(err, MeshError::Gltf(_)),
        "{err}"
    );
}

#[test]
fn indices_past_the_vertices_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cube = cuboid([0.0; 3], [1.0; 3]);
    cube.triangles[5][2] = 99;
    std::fs::write(dir.path().join("bad.glb"), to_glb(&cube)).expect("write");
    let err = load_mesh(&dir.path().join("bad.glb")).expect_err("index");
    assert!(
        matches!(err, MeshError::IndexOutOfRange { vertex: 99, .. }),
        "{err}"
    );
}

/// Thousands of corrupted GLB and glTF files: every one loads or returns an
/// error, none panics.
#[test]
fn corrupted_files_never_panic() {
    use pellet_formats::scene::Rng;
    let dir = tempfile::tempdir().expect("tempdir");
    let cube = cuboid([0.0; 3], [1.0; 3]);
    let (gltf, _) = to_gltf(&cube, &BufferUri::DataUri);
    let samples = [to_glb(&cube), gltf.into_bytes()];
    let mut rng = Rng::new(77);
    let mut pick = |n: usize| (rng.next_u64() % n.max(1) as u64) as usize;
    let path = dir.path().join("mutant.glb");
    let gltf_path = dir.path().join("mutant.gltf");
    let (mut loaded, mut refused) = (0, 0);
    for round in 0..3000 {
        let which = round % 2;
        let mut bytes = samples[which].clone();
        for _ in 0..1 + pick(4) {
            if bytes.is_empty() {
                break;
            }
            match pick(4) {
                0 => {
                    let i = pick(bytes.len());
                    bytes[i] ^= 1 << pick(8);
                }
                1 => {
                    let i = pick(bytes.len());
                    bytes[i] = b"0123456789-.e,:{}[]\"\x00\xff"[pick(22)];
                }
                2 => bytes.truncate(pick(bytes.len())),
                _ => {
                    // Overwrite a 4-byte length-like field with a large value.
                    let i = pick(bytes.len().saturating_sub(4));
                    if bytes.len() >= 4 {
                        bytes[i..i + 4].copy_from_slice(&(pick(usize::MAX) as u32).to_le_bytes());
                    }
                }
            }
        }
        let target = if which == 0 { &path } else { &gltf_path };
        std::fs::write(target, &bytes).expect("write");
        match load_mesh(target) {
            Ok(_) => loaded += 1,
            Err(_) => refused += 1,
        }
    }
    assert!(refused > 1000, "{refused} refused, {loaded} loaded");
}

#[test]
fn devices_fifos_and_folders_are_refused_before_reading() {
    use pellet_bake::mesh::load_mesh_with_files;
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("pipe.glb");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(status.success());
    for (path, kind) in [
        (Path::new("/dev/zero"), "character device"),
        (fifo.as_path(), "FIFO"),
        (dir.path(), "folder"),
    ] {
        // A read of any of these would block or never end.
        let err = load_mesh(path).expect_err("not a regular file");
        assert!(matches!(err, MeshError::File(_)), "{err}");
        assert_eq!(err.to_string(), format!("is a {kind}, not a regular file"));
    }
    // The files a .gltf load read: itself and its buffer.
    let cube = cuboid([0.0; 3], [1.0; 3]);
    let (doc, bin) = to_gltf(&cube, &BufferUri::File("cube.bin".into()));
    std::fs::write(dir.path().join("cube.gltf"), doc).expect("gltf");
    std::fs::write(dir.path().join("cube.bin"), bin.expect("bin")).expect("bin");
    let (_, _, files) = load_mesh_with_files(&dir.path().join("cube.gltf")).expect("load");
    assert_eq!(
        files,
        [dir.path().join("cube.gltf"), dir.path().join("cube.bin")]
    );
}
