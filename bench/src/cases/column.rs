//! The small column against LIGGGHTS 3.8 (`bench/peers/liggghts_column.in`):
//! 4 224 spheres of diameter 5 mm (12 across x, 8 across z, 44 high) on a
//! jittered lattice behind a gate at x = 0.066 m, in a box 0.3 x 0.25 x
//! 0.044 m. The column settles for 10 000 steps (0.1 s), the gate opens and
//! it collapses for 22 500 more (32 500 in all, dt = 10^-5 s). Both codes
//! load the same particles: the bench writes them as a CSV for Pellet and as
//! a LIGGGHTS data file. Contact parameters as the pack (kn = 10^4 N/m,
//! kt = 2/7 kn, e = 0.5, mu = 0.5). LIGGGHTS times both of its runs.
//!
//! Small scenes show what a step costs besides the contacts: thread
//! hand-offs, serial stages, rebuilds; and a collapse rebuilds the
//! neighbour list far more often than a resting pack.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use pellet_gpu::Gpu;

use super::sim::{liggghts_deck, pellet};
use crate::harness::{Row, Timing};

/// Spheres across x, across z and up y.
const COLUMN: [u32; 3] = [12, 8, 44];
/// Sphere diameter, m.
const DIAMETER: f64 = 0.005;
/// Lattice spacing, m: 0.5 mm gaps, so jittered spheres never overlap.
const SPACING: f64 = 0.0055;
/// Largest jitter per axis, m (uniform in +-JITTER).
const JITTER: f64 = 0.0002;

/// Sphere centres, m: lattice order (x fastest, then z, then y), each
/// offset by a SplitMix64 jitter of fixed seed, so every run and both codes
/// see the same column.
pub fn column_particles() -> Vec<[f64; 3]> {
    let mut state = 0x5EED_C0DE_u64;
    let mut uniform = move || {
        // SplitMix64 (Steele, Lea and Flood 2014), top 53 bits to [0, 1).
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut out = Vec::with_capacity(COLUMN.iter().product::<u32>() as usize);
    for y in 0..COLUMN[2] {
        for z in 0..COLUMN[1] {
            for x in 0..COLUMN[0] {
                let c = [x, y, z].map(|i| (f64::from(i) + 0.5) * SPACING);
                out.push(c.map(|v| v + JITTER * (2.0 * uniform() - 1.0)));
            }
        }
    }
    out
}

/// The benchmark's material (as `liggghts_column.in`).
pub const HOOKE_MATERIAL: &str =
    "density = 2500\nstiffness = 10000\nrestitution = 0.5\nfriction = 0.5";

/// The Pellet scene with the default material's fields `material`; its
/// particles come from `column.csv` beside it.
fn scene_toml_with(gate_open_s: f64, material: &str, periodic_z: bool) -> String {
    format!(
        "name = \"column\"\ndescription = \"4224 spheres of 5 mm collapse when a gate opens\"\n\
         [simulation]\nparticle_radius = {r}\ngravity = [0, -9.81, 0]\ntime_step = 1e-5\n\
         [domain]\nmin = [0, 0, 0]\nmax = [0.3, 0.25, 0.044]\nperiodic = [false, false, {periodic_z}]\n\
         [materials.default]\n{material}\n\
         [[particles]]\nfile = \"column.csv\"\n\
         [[walls]]\nname = \"gate\"\npoint = [0.066, 0, 0]\nnormal = [-1, 0, 0]\nremove_at = {gate_open_s}\n",
        r = DIAMETER / 2.0
    )
}

/// Writes the scene, its CSV and the LIGGGHTS data file into `dir`;
/// returns (scene path, data file path).
fn write_inputs(
    dir: &Path,
    settle: u32,
) -> std::io::Result<(std::path::PathBuf, std::path::PathBuf)> {
    write_inputs_with(dir, settle, HOOKE_MATERIAL, false)
}

/// [`write_inputs`] with the default material's fields `material`.
pub fn write_inputs_with(
    dir: &Path,
    settle: u32,
    material: &str,
    periodic_z: bool,
) -> std::io::Result<(std::path::PathBuf, std::path::PathBuf)> {
    let particles = column_particles();
    let mut csv = String::from("x,y,z,radius\n");
    let mut data = format!(
        "LIGGGHTS data file: Pellet's small column\n\n{} atoms\n1 atom types\n\n\
         0 0.3 xlo xhi\n0 0.25 ylo yhi\n0 0.044 zlo zhi\n\nAtoms\n\n",
        particles.len()
    );
    for (i, p) in particles.iter().enumerate() {
        // 17 significant digits: both codes read the same binary values.
        let _ = writeln!(
            csv,
            "{:.17e},{:.17e},{:.17e},{}",
            p[0],
            p[1],
            p[2],
            DIAMETER / 2.0
        );
        let _ = writeln!(
            data,
            "{} 1 {DIAMETER} 2500 {:.17e} {:.17e} {:.17e}",
            i + 1,
            p[0],
            p[1],
            p[2]
        );
    }
    let scene = dir.join("column.toml");
    let data_file = dir.join("column.data");
    std::fs::write(dir.join("column.csv"), csv)?;
    std::fs::write(&data_file, data)?;
    std::fs::write(
        &scene,
        scene_toml_with(f64::from(settle) * 1e-5, material, periodic_z),
    )?;
    Ok((scene, data_file))
}

/// Rows for the small column: the CPU backend on 1 and all threads against
/// LIGGGHTS on 1 and 2 ranks; the GPU path's settle phase in the notes.
pub fn run(rows: &mut Vec<Row>, dir: &Path, gpu: Option<&Arc<Gpu>>, samples: usize, quick: bool) {
    let (settle, collapse) = if quick { (500, 500) } else { (10_000, 22_500) };
    let steps = settle + collapse;
    let (scene, data) = match write_inputs(dir, settle) {
        Ok(paths) => paths,
        Err(e) => {
            eprintln!(
                "bench: cannot write the column inputs in {}: {e}",
                dir.display()
            );
            return;
        }
    };
    let particles = COLUMN.iter().product::<u32>() as f64;
    let workload = format!(
        "{particles} spheres (d = 5 mm) behind a gate: {settle} steps settling, {collapse} collapsing"
    );
    let threads = rayon::current_num_threads();
    // The GPU path is slow on software Vulkan: its settle phase only, a tenth of it.
    let gpu_steps = (settle / 10).max(1);
    let gpu_timing = gpu.and_then(|g| {
        eprintln!("bench: sim column, GPU path, {gpu_steps} steps");
        pellet(&scene, Some(g), 0, gpu_steps, samples).ok()
    });
    let mut peers: std::collections::BTreeMap<u32, Option<Timing>> = Default::default();
    for (backend, backend_threads, ranks) in [
        ("CPU backend, 1 thread", 1usize, &[1u32][..]),
        ("CPU backend", threads, &[1, 2][..]),
    ] {
        if backend_threads == threads && backend.contains("1 thread") && threads == 1 {
            continue;
        }
        eprintln!("bench: sim column, {backend}");
        let result = rayon::ThreadPoolBuilder::new()
            .num_threads(backend_threads)
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|pool| pool.install(|| pellet(&scene, None, 0, steps, samples)));
        let (timing, info) = match result {
            Ok(r) => r,
            Err(e) => {
                eprintln!("bench: sim column {backend} failed: {e}");
                continue;
            }
        };
        let rate = particles * f64::from(steps) / timing.median_s;
        for &procs in ranks {
            let peer = peers
                .entry(procs)
                .or_insert_with(|| {
                    eprintln!("bench: LIGGGHTS column on {procs} rank(s)");
                    liggghts_deck(
                        "column",
                        &data.to_string_lossy(),
                        settle,
                        collapse,
                        procs,
                        samples,
                    )
                })
                .clone();
            let mut notes = format!(
                "Pellet {:.2} M particle-steps/s ({:.3} ms/step) on {backend_threads} thread{}",
                rate / 1e6,
                timing.median_s * 1e3 / f64::from(steps),
                if backend_threads > 1 { "s" } else { "" }
            );
            if let Some(p) = &peer {
                notes += &format!(
                    "; LIGGGHTS {:.2} M/s on {procs} rank(s)",
                    particles * f64::from(steps) / p.median_s / 1e6
                );
            }
            notes += &format!(
                "; {:.1} neighbour-list builds per 1000 steps",
                info.rebuilds_per_1000
            );
            if let (Some((g, _)), Some(device)) = (&gpu_timing, gpu) {
                notes += &format!(
                    "; GPU path ({}) {:.3} ms/step over the first {gpu_steps} steps",
                    device.report.name,
                    g.median_s * 1e3 / f64::from(gpu_steps)
                );
            }
            rows.push(Row {
                group: "particle simulation",
                name: format!(
                    "small column, {backend} vs LIGGGHTS ({procs} rank{})",
                    if procs > 1 { "s" } else { "" }
                ),
                workload: workload.clone(),
                pellet: timing.clone(),
                peer: format!(
                    "LIGGGHTS 3.8 hooke/history, {procs} MPI rank{}, same particles (read_data)",
                    if procs > 1 { "s" } else { "" }
                ),
                peer_timing: peer,
                notes,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_particles_never_overlap_and_stay_behind_the_gate() {
        let p = column_particles();
        assert_eq!(p.len(), 4224);
        let r = DIAMETER / 2.0;
        for (i, a) in p.iter().enumerate() {
            assert!(a[0] - r > 0.0 && a[0] + r < 0.066, "{a:?}");
            assert!(a[1] - r > 0.0 && a[1] + r < 0.25, "{a:?}");
            assert!(a[2] - r > 0.0 && a[2] + r < 0.044, "{a:?}");
            for b in &p[i + 1..] {
                let d2: f64 = (0..3).map(|k| (a[k] - b[k]).powi(2)).sum();
                assert!(d2 > DIAMETER * DIAMETER, "{a:?} {b:?}");
            }
        }
        assert_eq!(p, column_particles(), "deterministic");
    }
}
