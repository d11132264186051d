//! `bake mesh` on the Stanford bunny, end to end (load, voxelize, pack,
//! write), on the GPU (depth peeling; lavapipe without a GPU) and with the
//! CPU reference, against trimesh's `voxelized(pitch).fill()` at the same
//! pitch, with the intersection over union of the two occupancies.

use std::path::Path;
use std::process::Command;

use pellet_bake::bake_mesh::{MeshBakeSettings, Voxelizer, bake_mesh};
use pellet_bake::progress::Progress;
use pellet_bake::voxel::Resolution;
use pellet_bake::voxel::gpu::GpuVoxelizer;
use pellet_formats::assets::FillMode;
use pellet_gpu::{BackendChoice, Gpu};

use crate::harness::{Row, Timing, time};

const BUNNY: &str = "assets/meshes/bunny.glb";

/// What trimesh reported.
struct TrimeshResult {
    timing: Timing,
    filled: u64,
    iou: Option<f64>,
}

fn trimesh(pitch: f32, runs: usize, points: Option<&Path>) -> Option<TrimeshResult> {
    let mut cmd = Command::new("python3");
    cmd.args([
        "bench/peers/trimesh_voxelize.py",
        "--mesh",
        BUNNY,
        "--pitch",
        &pitch.to_string(),
        "--runs",
        &runs.to_string(),
    ]);
    if let Some(p) = points {
        cmd.arg("--points").arg(p);
    }
    let out = cmd.output().ok()?;
    if !out.status.success() {
        eprintln!(
            "bench: trimesh peer failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return None;
    }
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let median = json["median_s"].as_f64()?;
    Some(TrimeshResult {
        timing: Timing {
            median_s: median,
            min_s: median,
            max_s: median,
            samples: json["samples"].as_u64().unwrap_or(1) as usize,
        },
        filled: json["filled"].as_u64().unwrap_or(0),
        iou: json["iou"].as_f64(),
    })
}

/// Rows for each resolution.
pub fn run(resolutions: &[u32], samples: usize) -> Vec<Row> {
    let dir = std::env::temp_dir().join(format!("pellet-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let out = dir.join("bunny.pellet");
    let gpu = match Gpu::new(BackendChoice::Auto) {
        Ok(g) => Some(GpuVoxelizer::new(g)),
        Err(e) => {
            eprintln!("bench: no GPU adapter, GPU rows skipped: {e}");
            None
        }
    };
    let mut rows = Vec::new();
    for &cells in resolutions {
        let settings = MeshBakeSettings {
            resolution: Resolution::Cells(cells),
            fill: FillMode::Solid,
            density: 1000.0,
            scale: 1.0,
        };
        let samples = if cells >= 512 { 3 } else { samples };
        let run_once = |v: Voxelizer<'_>| {
            let baked = bake_mesh(Path::new(BUNNY), &settings, v, &Progress::hidden())
                .expect("bunny bakes");
            pellet_formats::io::write_asset(&out, &baked.body).expect("write");
            baked
        };
        eprintln!("bench: bake mesh bunny {cells}^3");
        let cpu_time = time(samples, || run_once(Voxelizer::Cpu));
        let cpu_baked = run_once(Voxelizer::Cpu);
        let body = &cpu_baked.body;
        // Pellet's particle centres (mesh frame) for the IoU, at moderate sizes.
        let points = (body.positions.len() <= 5_000_000).then(|| {
            let path = dir.join("points.csv");
            let c = body.centre_of_mass;
            let text: String = body
                .positions
                .iter()
                .map(|p| format!("{},{},{}\n", p[0] + c[0], p[1] + c[1], p[2] + c[2]))
                .collect();
            std::fs::write(&path, text).expect("write points");
            path
        });
        let peer = if cells <= 256 {
            trimesh(body.voxel_size, samples.min(5), points.as_deref())
        } else {
            None
        };
        let [nx, ny, nz] = body.grid_dims;
        let workload = format!(
            "bunny, {cells} cells on the longest axis ({nx}x{ny}x{nz}), {} particles",
            body.positions.len()
        );
        let peer_notes = match &peer {
            Some(p) => format!(
                "trimesh filled {} voxels{}",
                p.filled,
                p.iou
                    .map_or(String::new(), |iou| format!(", IoU with Pellet {iou:.4}"))
            ),
            None if cells > 256 => "trimesh not run above 256 (minutes per run)".into(),
            None => "trimesh not available (pip install trimesh scipy)".into(),
        };
        if let Some(v) = &gpu {
            let gpu_time = time(samples, || run_once(Voxelizer::Gpu(v)));
            let gpu_baked = run_once(Voxelizer::Gpu(v));
            let differ = gpu_baked.grid.count_differences(&cpu_baked.grid);
            rows.push(Row {
                group: "bake mesh",
                name: format!("bunny {cells}³, GPU depth peeling"),
                workload: workload.clone(),
                pellet: gpu_time,
                peer: "trimesh voxelized().fill()".into(),
                peer_timing: peer.as_ref().map(|p| p.timing.clone()),
                notes: format!(
                    "{peer_notes}; GPU vs CPU reference: {differ} of {} voxels differ; layers peeled {:?}",
                    gpu_baked.spec.len(),
                    gpu_baked.body.report.layers
                ),
            });
        }
        rows.push(Row {
            group: "bake mesh",
            name: format!("bunny {cells}³, CPU reference"),
            workload,
            pellet: cpu_time,
            peer: "trimesh voxelized().fill()".into(),
            peer_timing: peer.map(|p| p.timing),
            notes: peer_notes,
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
    rows
}
