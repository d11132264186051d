//! What the `bake` commands print: one-line summaries, CSV, Markdown tables
//! and JSON, written to any [`Write`] so the binary stays a parser and
//! dispatcher and the formats can be tested without running it.

use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use pellet_formats::assets::{FREE_PARTICLE, OverlapTable, ParticleBody, SimState};
use pellet_formats::estimate::OverlapAt;

use crate::scene_bake::SceneBakeReport;
use crate::table_validation::ValidationRow;

/// `value` as pretty JSON and a newline.
pub fn write_json<T: Serialize + ?Sized>(out: &mut impl Write, value: &T) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

/// `bake mesh`'s summary line: the files, the particles, the grid, the mass,
/// the layers peeled, whether the mesh was watertight and the time taken.
pub fn mesh_summary(input: &Path, output: &Path, body: &ParticleBody, elapsed: Duration) -> String {
    let r = &body.report;
    let [nx, ny, nz] = body.grid_dims;
    let closed = if r.open_edges == 0 && r.non_manifold_edges == 0 {
        "watertight".to_owned()
    } else {
        format!(
            "NOT watertight: {} open and {} non-manifold edges, {} voxels where the axes disagreed",
            r.open_edges, r.non_manifold_edges, r.disagreements
        )
    };
    format!(
        "{} -> {}: {} particles of radius {} m on {nx}x{ny}x{nz} voxels, mass {:.4} kg, {} layers peeled (x, y, z: {:?}), {closed}, {:.2} s on the {}",
        input.display(),
        output.display(),
        body.positions.len(),
        body.particle_radius(),
        body.mass,
        r.layers.iter().max().copied().unwrap_or(0),
        r.layers,
        elapsed.as_secs_f64(),
        if r.backend.starts_with("gpu") {
            "GPU"
        } else {
            "CPU"
        },
    )
}

/// `bake scene`'s report: one line per body (baked or unchanged), then the
/// folder's line.
pub fn write_scene_report(out: &mut impl Write, report: &SceneBakeReport) -> io::Result<()> {
    for b in &report.bodies {
        writeln!(
            out,
            "{:<8} {} -> {}.pellet ({} particles)",
            if b.baked { "baked" } else { "unchanged" },
            b.mesh,
            b.object.get(..16).unwrap_or(&b.object),
            b.particles
        )?;
    }
    writeln!(
        out,
        "{} -> {}: {} objects, {} bytes, manifest.pellet",
        report.scene,
        report.folder.display(),
        report.objects,
        report.bytes
    )
}

/// `bake watch`'s line after each bake.
pub fn watch_line(
    scene: &Path,
    output: &Path,
    report: &SceneBakeReport,
    elapsed: Duration,
) -> String {
    let baked = report.bodies.iter().filter(|b| b.baked).count();
    format!(
        "baked {} -> {}: {} bodies ({baked} re-baked), {} objects, {:.2} s",
        scene.display(),
        output.display(),
        report.bodies.len(),
        report.objects,
        elapsed.as_secs_f64()
    )
}

/// `bake table`'s summary line; `ratio_min` and `ratio_max` as asked for.
pub fn table_summary(
    output: &Path,
    table: &OverlapTable,
    ratio_min: f64,
    ratio_max: f64,
    elapsed: Duration,
) -> String {
    let worst = table.stderr.iter().copied().fold(0.0f32, f32::max);
    format!(
        "{}: {} ratios {}..{}, {} canonical offsets, {} samples each ({}), largest standard error {worst:.2e} cell volumes, {:.2} s",
        output.display(),
        table.ratios.len(),
        ratio_min,
        ratio_max,
        table.offsets.len(),
        table.samples,
        table.method.name(),
        elapsed.as_secs_f64()
    )
}

/// `bake validate-table`'s Markdown table, one row per distribution and ratio.
pub fn write_validation_markdown(out: &mut impl Write, rows: &[ValidationRow]) -> io::Result<()> {
    writeln!(
        out,
        "| distribution | particles | eps/l | occupied cells | max per cell | mean neighbours | correlation | RMSE | RMSE / mean | refined (sub-cells) | refined correlation | refined RMSE | total correlation | total RMSE | correction | corrected RMSE | fitted correlation | fitted RMSE | truth std | oracle correlation | oracle RMSE |"
    )?;
    writeln!(
        out,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )?;
    for r in rows {
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.2} | {:.4} | {:.3} | {:.2} % | {}³ | {:.4} | {:.3} | {:.4} | {:.2} | {:.4} | {:.3} | {:.4} | {:.3} | {:.3} | {:.4} | {:.3} |",
            r.distribution,
            r.particles,
            r.ratio,
            r.cells,
            r.max_cell_count,
            r.mean_neighbours,
            r.correlation,
            r.rmse,
            100.0 * r.relative_rmse,
            r.refine,
            r.refined_correlation,
            r.refined_rmse,
            r.total_correlation,
            r.total_rmse,
            r.calibration,
            r.calibrated_rmse,
            r.fitted_correlation,
            r.fitted_rmse,
            r.truth_std,
            r.oracle_correlation,
            r.oracle_rmse
        )?;
    }
    Ok(())
}

/// `bake inspect --ratio`: a table at one ratio as CSV
/// `dx,dy,dz,value,stderr`, every offset, x fastest.
pub fn write_overlap_csv(out: &mut impl Write, at: &OverlapAt) -> io::Result<()> {
    writeln!(out, "dx,dy,dz,value,stderr")?;
    let reach = at.reach;
    for dz in -reach..=reach {
        for dy in -reach..=reach {
            for dx in -reach..=reach {
                let i = at.index([dx, dy, dz]);
                writeln!(out, "{dx},{dy},{dz},{},{}", at.values[i], at.stderr[i])?;
            }
        }
    }
    Ok(())
}

/// The header of [`write_body_rows`]' CSV.
pub const BODIES_CSV_HEADER: &str = "id,x,y,z,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz";

/// `bake inspect --bodies`: a saved state's rigid bodies as CSV rows (no
/// header), numbered from `first_id`; returns the next id, so that several
/// files continue one numbering. A velocity the state lacks is `NaN`.
pub fn write_body_rows(
    out: &mut impl Write,
    state: &SimState,
    first_id: usize,
) -> io::Result<usize> {
    let mut id = first_id;
    for (b, body) in state.bodies.iter().enumerate() {
        let (p, q) = (body.position, body.orientation);
        let v = state
            .body_velocities
            .get(b)
            .copied()
            .unwrap_or([f32::NAN; 3]);
        let w = state
            .body_angular_velocities
            .get(b)
            .copied()
            .unwrap_or([f32::NAN; 3]);
        writeln!(
            out,
            "{id},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            p[0], p[1], p[2], q[3], q[0], q[1], q[2], v[0], v[1], v[2], w[0], w[1], w[2]
        )?;
        id += 1;
    }
    Ok(id)
}

/// The header of [`write_particle_rows`]' CSV.
pub const PARTICLES_CSV_HEADER: &str = "id,x,y,z,vx,vy,vz,radius,body";

/// `bake inspect --particles`: a saved state's particles as CSV rows (no
/// header), numbered from `first_id`, body -1 for free particles; returns
/// the next id.
pub fn write_particle_rows(
    out: &mut impl Write,
    state: &SimState,
    first_id: usize,
) -> io::Result<usize> {
    let mut id = first_id;
    for k in 0..state.positions.len() {
        let (p, v) = (state.positions[k], state.velocities[k]);
        let body = state.body_of_particle[k];
        let body = if body == FREE_PARTICLE {
            -1
        } else {
            i64::from(body)
        };
        writeln!(
            out,
            "{id},{},{},{},{},{},{},{},{body}",
            p[0], p[1], p[2], v[0], v[1], v[2], state.radii[k]
        )?;
        id += 1;
    }
    Ok(id)
}

/// `bake inspect --points`: a body's particle centres in the mesh's own
/// frame, one `x,y,z` line each, metres.
pub fn write_body_points(out: &mut impl Write, body: &ParticleBody) -> io::Result<()> {
    let c = body.centre_of_mass;
    for p in body.positions.iter() {
        writeln!(out, "{},{},{}", p[0] + c[0], p[1] + c[1], p[2] + c[2])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene_bake::BodyLine;
    use pellet_formats::assets::BodyState;

    fn text(write: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut out = Vec::new();
        write(&mut out).expect("writing to memory");
        String::from_utf8(out).expect("utf-8")
    }

    fn scene_report() -> SceneBakeReport {
        SceneBakeReport {
            scene: "bunnies".into(),
            folder: "baked/bunnies".into(),
            bodies: vec![
                BodyLine {
                    mesh: "bunny.glb".into(),
                    object: "0123456789abcdef0123".into(),
                    particles: 42,
                    baked: true,
                },
                BodyLine {
                    mesh: "box.glb".into(),
                    object: "fedcba9876543210fedc".into(),
                    particles: 8,
                    baked: false,
                },
            ],
            scene_object: "00".into(),
            objects: 4,
            bytes: 1234,
        }
    }

    #[test]
    fn scene_reports_name_each_body_then_the_folder() {
        let s = text(|o| write_scene_report(o, &scene_report()));
        assert_eq!(
            s,
            "baked    bunny.glb -> 0123456789abcdef.pellet (42 particles)\n\
             unchanged box.glb -> fedcba9876543210.pellet (8 particles)\n\
             bunnies -> baked/bunnies: 4 objects, 1234 bytes, manifest.pellet\n"
        );
        let line = watch_line(
            Path::new("s.toml"),
            Path::new("out"),
            &scene_report(),
            Duration::from_millis(1500),
        );
        assert_eq!(
            line,
            "baked s.toml -> out: 2 bodies (1 re-baked), 4 objects, 1.50 s"
        );
    }

    #[test]
    fn overlap_csv_lists_every_offset_x_fastest() {
        let side = 3usize;
        let at = OverlapAt {
            ratio: 1.0,
            reach: 1,
            values: (0..side.pow(3)).map(|i| i as f64).collect(),
            stderr: vec![0.5; side.pow(3)],
        };
        let s = text(|o| write_overlap_csv(o, &at));
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 1 + 27);
        assert_eq!(lines[0], "dx,dy,dz,value,stderr");
        assert_eq!(lines[1], "-1,-1,-1,0,0.5");
        assert_eq!(lines[2], "0,-1,-1,1,0.5");
        assert_eq!(lines[27], "1,1,1,26,0.5");
    }

    #[test]
    fn state_rows_continue_one_numbering_and_mark_free_particles() {
        let state = SimState {
            positions: vec![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]].into(),
            velocities: vec![[0.0; 3], [0.5, 0.0, 0.0]].into(),
            angular_velocities: vec![[0.0; 3]; 2].into(),
            radii: vec![0.1, 0.2].into(),
            body_of_particle: vec![FREE_PARTICLE, 0].into(),
            bodies: vec![BodyState {
                position: [1.0, 0.0, 0.0],
                orientation: [0.0, 0.0, 0.0, 1.0],
                ..BodyState::default()
            }]
            .into(),
            ..SimState::default()
        };
        let s = text(|o| {
            let next = write_particle_rows(o, &state, 0)?;
            assert_eq!(next, 2);
            assert_eq!(write_particle_rows(o, &state, next)?, 4);
            Ok(())
        });
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            lines,
            [
                "0,1,2,3,0,0,0,0.1,-1",
                "1,4,5,6,0.5,0,0,0.2,0",
                "2,1,2,3,0,0,0,0.1,-1",
                "3,4,5,6,0.5,0,0,0.2,0"
            ]
        );
        assert_eq!(PARTICLES_CSV_HEADER.split(',').count(), 9);
        let s = text(|o| write_body_rows(o, &state, 7).map(|_| ()));
        assert_eq!(s, "7,1,0,0,1,0,0,0,NaN,NaN,NaN,NaN,NaN,NaN\n");
        assert_eq!(BODIES_CSV_HEADER.split(',').count(), 14);
    }

    #[test]
    fn validation_markdown_has_a_header_a_rule_and_a_row_each() {
        let s = text(|o| write_validation_markdown(o, &[]));
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 2);
        let columns = lines[0].matches('|').count();
        assert_eq!(lines[1].matches('|').count(), columns);
    }
}
