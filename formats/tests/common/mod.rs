//! Small, fixed sample assets shared by the round-trip, golden and fuzz-style
//! tests. Changing any value here breaks the golden files on purpose.
#![allow(dead_code)]

use std::path::Path;

use pellet_formats::assets::{
    BakeSource, BakedBodyRef, BakedScene, BodyState, FREE_PARTICLE, FillMode, Manifest,
    ManifestEntry, OverlapTable, ParticleBody, SamplingMethod, SimState,
};
use pellet_formats::{AnyAsset, PodVec, Scene};

/// An L-shaped body of 7 voxels on a 3x2x2 grid, 0.1 m voxels.
pub fn particle_body() -> ParticleBody {
    let dims = [3u32, 2, 2];
    let voxel = 0.1f32;
    let set = [0usize, 1, 2, 3, 6, 9, 11];
    let mut occupancy = vec![0u8; 2];
    for &i in &set {
        occupancy[i / 8] |= 1 << (i % 8);
    }
    let centres: Vec<[f32; 3]> = set
        .iter()
        .map(|&i| {
            let (x, y, z) = (i % 3, (i / 3) % 2, i / 6);
            [
                (x as f32 + 0.5) * voxel,
                (y as f32 + 0.5) * voxel,
                (z as f32 + 0.5) * voxel,
            ]
        })
        .collect();
    let n = centres.len() as f32;
    let com: [f32; 3] = std::array::from_fn(|a| centres.iter().map(|c| c[a]).sum::<f32>() / n);
    let density = 1000.0f32;
    let m = density * voxel.powi(3);
    let mut inertia = [[0.0f32; 3]; 3];
    for c in &centres {
        let r: [f32; 3] = std::array::from_fn(|a| c[a] - com[a]);
        let r2 = r.iter().map(|x| x * x).sum::<f32>();
        for i in 0..3 {
            for j in 0..3 {
                let delta = if i == j { 1.0 } else { 0.0 };
                inertia[i][j] += m * (r2 * delta - r[i] * r[j]);
            }
            inertia[i][i] += m * voxel * voxel / 6.0;
        }
    }
    ParticleBody {
        name: "ell".into(),
        source: BakeSource {
            mesh: "meshes/ell.glb".into(),
            mesh_hash: "ab".repeat(32),
            settings_hash: "cd".repeat(32),
        },
        fill: FillMode::Solid,
        voxel_size: voxel,
        grid_origin: [0.0, 0.0, 0.0],
        grid_dims: dims,
        occupancy: PodVec(occupancy),
        positions: PodVec(
            centres
                .iter()
                .map(|c| std::array::from_fn(|a| c[a] - com[a]))
                .collect(),
        ),
        density,
        mass: m * n,
        centre_of_mass: com,
        inertia,
        // Fields added after the golden file was written take their defaults.
        normals: PodVec::default(),
        depths: PodVec::default(),
        principal_moments: [0.0; 3],
        principal_axes: [[0.0; 3]; 3],
        report: Default::default(),
    }
}

/// A two-ratio table over the four canonical offsets of reach 1.
pub fn overlap_table() -> OverlapTable {
    let offsets = vec![[0i8, 0, 0], [0, 0, 1], [0, 1, 1], [1, 1, 1]];
    OverlapTable {
        method: SamplingMethod::Sobol,
        samples: 4096,
        seed: 7,
        ratios: PodVec(vec![0.25, 0.5]),
        offsets: PodVec(offsets),
        values: PodVec(vec![0.06, 0.0055, 0.0003, 0.00001, 0.3, 0.06, 0.01, 0.001]),
        stderr: PodVec(vec![1e-4; 8]),
    }
}

/// The scene used inside the baked-scene sample.
pub const SCENE_TOML: &str = r#"
name = "golden"
description = "a small scene for golden files"

[simulation]
particle_radius = 0.05
gravity = [0, -9.81, 0]
time_step = "auto"
integrator = "rk2"
contact_slots = 16  # written by every build before the slots became optional

[domain]
min = [-1, 0, -1]
max = [1, 2, 1]
periodic = [true, false, false]

[materials.rubber]
density = 1100
stiffness = 5000
restitution = 0.8
friction = 0.9

[[particles]]
region = { min = [-0.5, 0.5, -0.5], max = [0.5, 1.0, 0.5] }
jitter = 0.2
seed = 3
radius = { min = 0.03, max = 0.05 }

[[bodies]]
mesh = "../meshes/bunny.glb"
position = [0, 1.5, 0]
rotation = [0, 90, 0]
motion = "dynamic"
material = "rubber"
array = { count = [2, 1, 1], spacing = [0.5, 0, 0] }

[[walls]]
name = "gate"
point = [0.8, 0, 0]
normal = [-1, 0, 0]
remove_at = 0.5
"#;

pub fn scene() -> Scene {
    Scene::parse(SCENE_TOML, Path::new("golden.toml")).expect("the sample scene is valid")
}

pub fn baked_scene() -> BakedScene {
    BakedScene {
        scene: scene(),
        bodies: vec![BakedBodyRef {
            mesh: "../meshes/bunny.glb".into(),
            object: "0f".repeat(32),
            voxel_size: 0.1,
        }],
    }
}

pub fn manifest() -> Manifest {
    Manifest {
        name: "golden".into(),
        scene: "0a".repeat(32),
        objects: vec![
            ManifestEntry {
                hash: "0a".repeat(32),
                kind: pellet_formats::AssetKind::BakedScene,
                size: 900,
                label: "golden.toml".into(),
            },
            ManifestEntry {
                hash: "0f".repeat(32),
                kind: pellet_formats::AssetKind::ParticleBody,
                size: 4000,
                label: "bunny.glb".into(),
            },
        ],
        generator: "pellet-bake 0.1.0".into(),
    }
}

pub fn sim_state() -> SimState {
    SimState {
        time: 1.25,
        step: 500,
        positions: PodVec(vec![[0.0, 1.0, 0.0], [0.1, 1.0, 0.0], [0.5, 0.2, 0.5]]),
        velocities: PodVec(vec![[0.0, -1.0, 0.0], [0.0, -1.0, 0.0], [0.0; 3]]),
        angular_velocities: PodVec(vec![[0.0; 3], [0.0, 0.0, 2.0], [0.0; 3]]),
        radii: PodVec(vec![0.05, 0.05, 0.025]),
        body_of_particle: PodVec(vec![0, 0, FREE_PARTICLE]),
        bodies: PodVec(vec![BodyState {
            position: [0.05, 1.0, 0.0],
            orientation: [0.0, 0.0, 0.0, 1.0],
            linear_momentum: [0.0, -2.0, 0.0],
            angular_momentum: [0.0; 3],
        }]),
        // Fields added after the golden file was written: it must keep
        // loading, with them empty.
        body_velocities: PodVec(Vec::new()),
        body_angular_velocities: PodVec(Vec::new()),
    }
}

/// One sample of every kind, with its golden file name.
pub fn all() -> Vec<(&'static str, AnyAsset)> {
    vec![
        (
            "particle_body.pellet",
            AnyAsset::ParticleBody(particle_body()),
        ),
        (
            "overlap_table.pellet",
            AnyAsset::OverlapTable(overlap_table()),
        ),
        ("baked_scene.pellet", AnyAsset::BakedScene(baked_scene())),
        ("manifest.pellet", AnyAsset::Manifest(manifest())),
        ("sim_state.pellet", AnyAsset::SimState(sim_state())),
    ]
}

/// Encodes any sample.
pub fn encode(asset: &AnyAsset) -> Vec<u8> {
    use pellet_formats::container::encode;
    match asset {
        AnyAsset::ParticleBody(a) => encode(a),
        AnyAsset::OverlapTable(a) => encode(a),
        AnyAsset::BakedScene(a) => encode(a),
        AnyAsset::Manifest(a) => encode(a),
        AnyAsset::SimState(a) => encode(a),
    }
    .expect("samples are valid")
}

pub fn golden_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}
