//! The GPU voxelizer against its CPU twin (the oracle), on closed shapes and
//! the Stanford bunny. These tests need a GPU adapter (lavapipe without a GPU)
//! and fail, never skip, without one.

use pellet_bake::mesh::shapes::{cuboid, sphere, torus};
use pellet_bake::mesh::{TriMesh, load_mesh};
use pellet_bake::voxel::gpu::{GpuVoxelizer, SHADERS, UNIFORM_SIZES};
use pellet_bake::voxel::{GridSpec, Resolution, cpu};
use pellet_gpu::{BackendChoice, Gpu};

fn voxelizer() -> GpuVoxelizer {
    let gpu =
        Gpu::new(BackendChoice::Auto).unwrap_or_else(|e| panic!("GPU tests need an adapter: {e}"));
    GpuVoxelizer::new(gpu)
}

fn fit(mesh: &TriMesh, resolution: Resolution) -> GridSpec {
    GridSpec::fit(&mesh.bounds().expect("non-empty"), resolution).expect("grid")
}

/// Solid GPU vs CPU: same layers, agreement on at least 99.9 % of voxels.
fn check_solid(v: &GpuVoxelizer, name: &str, mesh: &TriMesh, resolution: Resolution) -> (u64, u64) {
    let spec = fit(mesh, resolution);
    let gpu = v.solid(mesh, &spec).expect("GPU voxelization");
    let cpu = cpu::solid(mesh, &spec);
    let differ = gpu.grid.count_differences(&cpu.grid);
    let agreement = 1.0 - differ as f64 / spec.len() as f64;
    eprintln!(
        "{name}: {:?} voxels, GPU {} CPU {} set, {differ} differ ({:.4}% agree), layers GPU {:?} CPU {:?}",
        spec.dims,
        gpu.grid.count(),
        cpu.grid.count(),
        100.0 * agreement,
        gpu.layers,
        cpu.layers
    );
    assert!(
        agreement >= 0.999,
        "{name}: only {:.4}% of voxels agree",
        100.0 * agreement
    );
    assert_eq!(gpu.layers, cpu.layers, "{name}: layers peeled");
    (gpu.grid.count(), gpu.disagreements)
}

#[test]
fn shaders_validate_and_uniform_structs_match_their_wgsl_layouts() {
    use pellet_gpu::naga;
    for (file, source) in SHADERS {
        let (module, _) = pellet_gpu::validate_wgsl(file, source).unwrap_or_else(|e| panic!("{e}"));
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).expect("layout");
        for (name, rust_size) in UNIFORM_SIZES {
            if let Some((handle, _)) = module
                .types
                .iter()
                .find(|(_, t)| t.name.as_deref() == Some(name))
            {
                assert_eq!(
                    layouter[handle].size as usize, rust_size,
                    "{name} in {file}"
                );
            }
        }
    }
}

#[test]
fn gpu_solid_matches_cpu_on_closed_shapes() {
    let v = voxelizer();
    let (count, disagreements) = check_solid(
        &v,
        "box",
        &cuboid([0.013, -0.2, 5.0], [1.013, 0.3, 5.25]),
        Resolution::VoxelSize(0.05),
    );
    assert_eq!(
        (count, disagreements),
        (1000, 0),
        "an axis-aligned box has exactly its voxels"
    );
    check_solid(
        &v,
        "sphere",
        &sphere([0.1, 0.2, 0.3], 0.5, 96),
        Resolution::Cells(64),
    );
    check_solid(
        &v,
        "torus",
        &torus([0.0; 3], 0.6, 0.2, 96, 48),
        Resolution::Cells(96),
    );
    let mut cavity = cuboid([0.0; 3], [1.0; 3]);
    cavity.append(&cuboid([0.3; 3], [0.7; 3]).flipped());
    let (count, _) = check_solid(
        &v,
        "box with a sealed cavity",
        &cavity,
        Resolution::VoxelSize(0.05),
    );
    assert_eq!(count, 8000 - 512);
    let mut nested = sphere([0.0; 3], 1.0, 64);
    nested.append(&sphere([0.0; 3], 0.6, 48).flipped());
    nested.append(&sphere([0.0; 3], 0.3, 32));
    check_solid(&v, "nested spheres", &nested, Resolution::Cells(80));
}

#[test]
fn gpu_solid_matches_cpu_on_non_cubic_grids_and_the_bunny() {
    let v = voxelizer();
    let mut slab = cuboid([-0.5; 3], [0.5, 0.1, 0.3]);
    let (s, c) = (20f32.to_radians().sin(), 20f32.to_radians().cos());
    for p in &mut slab.positions {
        *p = [c * p[0] - s * p[1], s * p[0] + c * p[1], p[2]];
    }
    check_solid(&v, "rotated slab", &slab, Resolution::Cells(100));
    let bunny = load_mesh(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/meshes/bunny.glb"),
    )
    .expect("bunny");
    check_solid(&v, "bunny 64", &bunny, Resolution::Cells(64));
    check_solid(&v, "bunny 128", &bunny, Resolution::Cells(128));
}

#[test]
fn gpu_tiles_grids_wider_than_one_tile() {
    // 600 columns along x exceed the 512-column tile: the work is split.
    let v = voxelizer();
    let mesh = cuboid([0.0; 3], [6.0, 0.2, 0.2]);
    let (count, _) = check_solid(&v, "long bar", &mesh, Resolution::Cells(600));
    assert_eq!(count, 600 * 20 * 20);
}

#[test]
fn gpu_shell_matches_cpu() {
    let v = voxelizer();
    for (name, mesh, resolution) in [
        ("box", cuboid([0.0; 3], [1.0; 3]), Resolution::Cells(10)),
        ("sphere", sphere([0.0; 3], 1.0, 48), Resolution::Cells(64)),
        (
            "torus",
            torus([0.0; 3], 0.6, 0.2, 64, 32),
            Resolution::Cells(80),
        ),
    ] {
        let spec = fit(&mesh, resolution);
        let gpu = v.shell(&mesh, &spec).expect("GPU shell");
        let cpu = cpu::shell(&mesh, &spec);
        let differ = gpu.count_differences(&cpu);
        eprintln!(
            "{name} shell: GPU {} CPU {} set, {differ} differ",
            gpu.count(),
            cpu.count()
        );
        assert!(
            differ as f64 <= 0.001 * spec.len() as f64,
            "{name}: {differ} voxels differ"
        );
        if name == "box" {
            assert_eq!(gpu.count(), 1000 - 512);
        }
    }
}
