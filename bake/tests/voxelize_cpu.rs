//! The CPU reference voxelizer against exact counts and closed-form volumes.

use std::f64::consts::PI;

use pellet_bake::mesh::TriMesh;
use pellet_bake::mesh::shapes::{cuboid, sphere, torus};
use pellet_bake::voxel::{GridSpec, Resolution, cpu};

fn fit(mesh: &TriMesh, resolution: Resolution) -> GridSpec {
    GridSpec::fit(&mesh.bounds().expect("non-empty"), resolution).expect("grid")
}

fn volume(count: u64, spec: &GridSpec) -> f64 {
    count as f64 * f64::from(spec.voxel_size).powi(3)
}

#[test]
fn an_axis_aligned_box_has_exactly_its_voxels() {
    let mesh = cuboid([0.013, -0.2, 5.0], [1.013, 0.3, 5.25]);
    assert!(mesh.edge_report().is_watertight());
    let spec = fit(&mesh, Resolution::VoxelSize(0.05));
    assert_eq!(spec.dims, [20, 10, 5]);
    let solid = cpu::solid(&mesh, &spec);
    assert_eq!(solid.grid.count(), 1000);
    assert_eq!(solid.disagreements, 0);
    assert_eq!(solid.layers, [2, 2, 2]);
}

#[test]
fn a_box_shell_is_its_outer_layer() {
    let mesh = cuboid([0.0; 3], [1.0; 3]);
    let spec = fit(&mesh, Resolution::Cells(10));
    assert_eq!(cpu::shell(&mesh, &spec).count(), 1000 - 512);
}

#[test]
fn a_sphere_at_64_cubed_has_its_volume_within_one_percent() {
    let mesh = sphere([0.1, 0.2, 0.3], 0.5, 96);
    assert!(
        mesh.edge_report().is_watertight(),
        "{:?}",
        mesh.edge_report()
    );
    let spec = fit(&mesh, Resolution::Cells(64));
    let solid = cpu::solid(&mesh, &spec);
    let exact = 4.0 / 3.0 * PI * 0.5f64.powi(3);
    let got = volume(solid.grid.count(), &spec);
    assert!(
        (got / exact - 1.0).abs() < 0.01,
        "sphere volume {got} vs {exact}"
    );
    assert_eq!(solid.disagreements, 0);
}

#[test]
fn a_torus_keeps_its_hole() {
    let (major, minor) = (0.6f32, 0.2f32);
    let mesh = torus([0.0; 3], major, minor, 96, 48);
    assert!(mesh.edge_report().is_watertight());
    let spec = fit(&mesh, Resolution::Cells(96));
    let solid = cpu::solid(&mesh, &spec);
    let exact = 2.0 * PI * PI * f64::from(major) * f64::from(minor).powi(2);
    let got = volume(solid.grid.count(), &spec);
    assert!(
        (got / exact - 1.0).abs() < 0.02,
        "torus volume {got} vs {exact}"
    );
    // The centre of the hole is empty; the middle of the tube is full.
    let at = |p: [f32; 3]| {
        let v: [u32; 3] =
            std::array::from_fn(|a| ((p[a] - spec.origin[a]) / spec.voxel_size) as u32);
        solid.grid.get(spec.index(v))
    };
    assert!(!at([0.0, 0.0, 0.0]));
    assert!(at([major, 0.0, 0.0]));
    assert!(at([0.0, 0.0, -major]));
    assert_eq!(
        solid.layers[1], 2,
        "along y every column crosses the tube twice"
    );
    assert_eq!(
        solid.layers[0], 4,
        "along x the central columns cross it four times"
    );
}

#[test]
fn a_box_with_a_sealed_cavity_is_hollow() {
    let mut mesh = cuboid([0.0; 3], [1.0; 3]);
    mesh.append(&cuboid([0.3; 3], [0.7; 3]).flipped());
    let spec = fit(&mesh, Resolution::VoxelSize(0.05));
    let solid = cpu::solid(&mesh, &spec);
    assert_eq!(solid.grid.count(), 8000 - 512);
    assert_eq!(solid.layers, [4, 4, 4]);
    let centre = spec.index([10, 10, 10]);
    assert!(!solid.grid.get(centre));
}

#[test]
fn spheres_nested_in_spheres_alternate() {
    let mut mesh = sphere([0.0; 3], 1.0, 64);
    mesh.append(&sphere([0.0; 3], 0.6, 48).flipped());
    mesh.append(&sphere([0.0; 3], 0.3, 32));
    let spec = fit(&mesh, Resolution::Cells(80));
    let solid = cpu::solid(&mesh, &spec);
    let v = |r: f64| 4.0 / 3.0 * PI * r.powi(3);
    let exact = v(1.0) - v(0.6) + v(0.3);
    let got = volume(solid.grid.count(), &spec);
    assert!(
        (got / exact - 1.0).abs() < 0.02,
        "nested volume {got} vs {exact}"
    );
    assert_eq!(solid.layers, [6, 6, 6]);
    let at = |r: f32| {
        let v: [u32; 3] = std::array::from_fn(|a| {
            ((if a == 0 { r } else { 0.0 } - spec.origin[a]) / spec.voxel_size) as u32
        });
        solid.grid.get(spec.index(v))
    };
    assert!(at(0.0) && !at(0.45) && at(0.8));
}

#[test]
fn an_open_box_is_diagnosed_and_filled_by_the_vote() {
    let mut mesh = cuboid([0.0; 3], [1.0; 3]);
    // Remove the +y face (triangles 6 and 7).
    mesh.triangles.drain(6..8);
    let report = mesh.edge_report();
    assert_eq!(report.open_edges, 4);
    assert!(!report.is_watertight());
    let spec = fit(&mesh, Resolution::Cells(10));
    let solid = cpu::solid(&mesh, &spec);
    assert_eq!(solid.grid.count(), 1000);
}

#[test]
fn a_cube_rotated_off_the_grid_has_its_volume() {
    // 30 degrees about z: no face is aligned with the voxels.
    let mut mesh = cuboid([-0.5; 3], [0.5; 3]);
    let (s, c) = (30f32.to_radians().sin(), 30f32.to_radians().cos());
    for p in &mut mesh.positions {
        *p = [c * p[0] - s * p[1], s * p[0] + c * p[1], p[2]];
    }
    let spec = fit(&mesh, Resolution::Cells(64));
    let solid = cpu::solid(&mesh, &spec);
    let got = volume(solid.grid.count(), &spec);
    assert!((got - 1.0).abs() < 0.01, "{got}");
    assert_eq!(solid.disagreements, 0);
}
