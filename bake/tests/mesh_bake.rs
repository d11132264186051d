//! `bake_mesh` end to end in the library: mass properties against closed
//! forms, normals and depths, provenance hashes.

use std::path::{Path, PathBuf};

use pellet_bake::bake_mesh::{MeshBakeSettings, Voxelizer, bake_mesh};
use pellet_bake::mesh::TriMesh;
use pellet_bake::mesh::export::to_glb;
use pellet_bake::mesh::shapes::{cuboid, sphere};
use pellet_bake::progress::Progress;
use pellet_bake::voxel::Resolution;
use pellet_formats::assets::FillMode;

fn write(dir: &Path, name: &str, mesh: &TriMesh) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, to_glb(mesh)).expect("write glb");
    path
}

fn settings(resolution: Resolution) -> MeshBakeSettings {
    MeshBakeSettings {
        resolution,
        fill: FillMode::Solid,
        density: 1000.0,
        scale: 1.0,
    }
}

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!((got / want - 1.0).abs() < tol, "{what}: {got} vs {want}");
}

#[test]
fn a_box_has_the_closed_form_mass_and_inertia() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b, c) = (1.0f64, 0.5, 0.25);
    let path = write(
        dir.path(),
        "box.glb",
        &cuboid([0.0; 3], [a as f32, b as f32, c as f32]),
    );
    let baked = bake_mesh(
        &path,
        &settings(Resolution::Cells(64)),
        Voxelizer::Cpu,
        &Progress::hidden(),
    )
    .expect("bake");
    let body = &baked.body;
    let m = 1000.0 * a * b * c;
    close(f64::from(body.mass), m, 1e-4, "mass");
    for (k, want) in [b * b + c * c, a * a + c * c, a * a + b * b]
        .iter()
        .enumerate()
    {
        close(
            f64::from(body.inertia[k][k]),
            m / 12.0 * want,
            0.01,
            "inertia diagonal",
        );
    }
    assert!(body.inertia[0][1].abs() < 1e-3 * body.inertia[0][0]);
    let com = body.centre_of_mass;
    for (k, want) in [a / 2.0, b / 2.0, c / 2.0].iter().enumerate() {
        assert!(
            (f64::from(com[k]) - want).abs() < 1e-5,
            "centre of mass {com:?}"
        );
    }
    // Principal moments are the diagonal, ascending; axes are the box axes.
    let mut diagonal = [0, 1, 2].map(|k| body.inertia[k][k]);
    diagonal.sort_by(f32::total_cmp);
    for k in 0..3 {
        close(
            f64::from(body.principal_moments[k]),
            f64::from(diagonal[k]),
            1e-5,
            "principal moment",
        );
    }
    assert_eq!(body.report.open_edges, 0);
    assert_eq!(body.report.layers, [2, 2, 2]);
}

#[test]
fn a_sphere_has_the_closed_form_inertia() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = 0.5f64;
    let path = write(dir.path(), "ball.glb", &sphere([0.0; 3], r as f32, 96));
    let baked = bake_mesh(
        &path,
        &settings(Resolution::Cells(64)),
        Voxelizer::Cpu,
        &Progress::hidden(),
    )
    .expect("bake");
    let body = &baked.body;
    let m = 1000.0 * 4.0 / 3.0 * std::f64::consts::PI * r.powi(3);
    close(f64::from(body.mass), m, 0.01, "mass");
    for k in 0..3 {
        close(
            f64::from(body.inertia[k][k]),
            0.4 * m * r * r,
            0.01,
            "inertia",
        );
    }
    // Depths: the deepest particle is near the centre, about r below the surface.
    let deepest = body.depths.iter().copied().fold(0.0f32, f32::max);
    close(f64::from(deepest), r, 0.05, "deepest particle");
    // Normals point outwards: along the particle's direction from the centre.
    for (p, n) in body.positions.iter().zip(body.normals.iter()).step_by(97) {
        let len = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
        if len > 0.3 {
            let cos = (p[0] * n[0] + p[1] * n[1] + p[2] * n[2]) / len;
            assert!(cos > 0.8, "normal {n:?} at {p:?}");
        }
    }
}

#[test]
fn provenance_changes_with_the_source_and_the_settings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "box.glb", &cuboid([0.0; 3], [1.0; 3]));
    let bake = |s: &MeshBakeSettings| {
        bake_mesh(&path, s, Voxelizer::Cpu, &Progress::hidden())
            .expect("bake")
            .body
            .source
    };
    let first = bake(&settings(Resolution::Cells(8)));
    assert_eq!(
        first,
        bake(&settings(Resolution::Cells(8))),
        "same input, same hashes"
    );
    let finer = bake(&settings(Resolution::Cells(9)));
    assert_eq!(first.mesh_hash, finer.mesh_hash);
    assert_ne!(first.settings_hash, finer.settings_hash);
    std::fs::write(&path, to_glb(&cuboid([0.0; 3], [1.0, 1.0, 2.0]))).expect("edit");
    assert_ne!(
        first.mesh_hash,
        bake(&settings(Resolution::Cells(8))).mesh_hash
    );
}

#[test]
fn shell_mode_keeps_only_the_surface() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "box.glb", &cuboid([0.0; 3], [1.0; 3]));
    let mut s = settings(Resolution::Cells(10));
    s.fill = FillMode::Shell;
    let body = bake_mesh(&path, &s, Voxelizer::Cpu, &Progress::hidden())
        .expect("bake")
        .body;
    assert_eq!(body.positions.len(), 1000 - 512);
    assert_eq!(body.fill, FillMode::Shell);
}

#[test]
fn a_bake_over_the_voxel_or_particle_limit_is_refused_before_voxelizing() {
    use pellet_bake::BakeError;
    use pellet_bake::bake_mesh::estimate;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "cube.glb", &cuboid([0.0; 3], [1.0; 3]));
    let cube = pellet_bake::mesh::load_mesh(&path).expect("load");
    // A 10 m cube at 0.01 m voxels: 10^9 voxels and particles.
    let huge = MeshBakeSettings {
        scale: 10.0,
        ..settings(Resolution::VoxelSize(0.01))
    };
    let started = std::time::Instant::now();
    let err = bake_mesh(&path, &huge, Voxelizer::Cpu, &Progress::hidden()).expect_err("too big");
    // Voxelizing 10^9 voxels takes minutes; the estimate is instant.
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
    match &err {
        BakeError::TooLarge {
            path: p,
            dims,
            voxels,
            particles,
            ..
        } => {
            assert_eq!(p, &path);
            assert_eq!(*dims, [1000; 3]);
            assert_eq!(*voxels, 1_000_000_000);
            assert_eq!(*particles, 1_000_000_000);
        }
        other => panic!("{other}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("more than the limits of 268435456 voxels and 33554432 particles; "),
        "{message}"
    );
    // The voxel size suggested fits both limits.
    let hint = message
        .rsplit("at least ")
        .next()
        .and_then(|h| h.strip_suffix(" m"))
        .and_then(|h| h.parse::<f32>().ok())
        .expect("a voxel size hint");
    let fits = MeshBakeSettings {
        scale: 10.0,
        ..settings(Resolution::VoxelSize(hint))
    };
    assert!(
        estimate(&cube, &fits).expect("estimate").within_limit(),
        "{message}"
    );
    // Only the voxels over: a shell of the same cube (6 M particles).
    let shell = MeshBakeSettings {
        fill: FillMode::Shell,
        ..huge
    };
    let err = bake_mesh(&path, &shell, Voxelizer::Cpu, &Progress::hidden()).expect_err("too big");
    assert!(
        err.to_string()
            .contains("more than the limit of 268435456 voxels; use a voxel size"),
        "{err}"
    );
    // Only the particles over: 400^3 = 64 M voxels, all of them inside; the
    // resolution suggested fits.
    let err = bake_mesh(
        &path,
        &settings(Resolution::Cells(400)),
        Voxelizer::Cpu,
        &Progress::hidden(),
    )
    .expect_err("too big");
    assert_eq!(
        err.to_string(),
        format!(
            "{}: at 0.0025 m voxels the grid would be 400x400x400 = 64000000 voxels (about 64000000 particles), more than the limit of 33554432 particles; use at most 322 cells along the longest axis",
            path.display()
        )
    );
    assert!(
        estimate(&cube, &settings(Resolution::Cells(322)))
            .expect("estimate")
            .within_limit()
    );
    assert!(
        !estimate(&cube, &settings(Resolution::Cells(323)))
            .expect("estimate")
            .within_limit()
    );
}

#[test]
fn the_estimate_is_close_before_voxelizing() {
    use pellet_bake::bake_mesh::estimate;
    let bunny = pellet_bake::mesh::load_mesh(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/meshes/bunny.glb"),
    )
    .expect("bunny");
    // The README's bake: 418 987 particles on 128x125x98 voxels.
    let e = estimate(&bunny, &settings(Resolution::Cells(128))).expect("estimate");
    assert_eq!(e.spec.dims, [128, 125, 98]);
    assert!(e.within_limit());
    close(e.particles as f64, 418_987.0, 0.03, "bunny at 128");
    // The bunny at 0.01 m voxels: about 194 M particles, refused.
    let e = estimate(&bunny, &settings(Resolution::VoxelSize(0.01))).expect("estimate");
    assert!(!e.within_limit(), "{e:?}");
    close(e.particles as f64, 194e6, 0.05, "bunny at 0.01 m");
    // Solid and shell against real bakes of a sphere.
    let dir = tempfile::tempdir().expect("tempdir");
    let ball = sphere([0.0; 3], 1.0, 48);
    let path = write(dir.path(), "ball.glb", &ball);
    for fill in [FillMode::Solid, FillMode::Shell] {
        let s = MeshBakeSettings {
            fill,
            ..settings(Resolution::Cells(48))
        };
        let e = estimate(&ball, &s).expect("estimate");
        let baked = bake_mesh(&path, &s, Voxelizer::Cpu, &Progress::hidden()).expect("bake");
        assert_eq!(e.spec, baked.spec);
        let tol = if fill == FillMode::Solid { 0.03 } else { 0.1 };
        close(
            e.particles as f64,
            baked.body.positions.len() as f64,
            tol,
            fill.name(),
        );
    }
}
