//! Writes the starting point of the settled-pile validation distribution: a
//! loose conical heap of glass beads on a jittered lattice (no overlaps, a
//! small gap between neighbours), and a scene that lets the simulation settle
//! it under gravity.
//!
//! Usage: cargo run --release -p pellet-bake --example loose_pile -- OUT_DIR [PARTICLES]
//! writes `OUT_DIR/loose_pile.csv` and `OUT_DIR/settle_pile.toml`; then
//! `player run OUT_DIR/settle_pile.toml --headless --backend cpu --save settled.pellet`
//! (see `scripts/settle_pile.sh`).

use std::io::Write;

/// Bead radius, m.
const RADIUS: f64 = 0.002;
/// Lattice spacing, m: 2 % more than a diameter, so grains start apart and
/// settle by a few tens of micrometres per layer.
const SPACING: f64 = 2.04 * RADIUS;
/// Slope of the cone's side (height over run): 24 degrees, below the angle of
/// repose of friction 0.5 (26.6 degrees), so the heap compacts instead of flowing.
const SLOPE: f64 = 0.45;
/// Domain side in x and z, m.
const SIDE: f64 = 1.2;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(out) = args.next() else {
        eprintln!("usage: loose_pile OUT_DIR [PARTICLES]");
        std::process::exit(2);
    };
    let n: usize = match args.next().map(|s| s.parse()) {
        None => 1_000_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("loose_pile: PARTICLES must be a positive integer");
            std::process::exit(2);
        }
    };
    let out = std::path::PathBuf::from(out);
    std::fs::create_dir_all(&out)?;

    // SplitMix64, so the pile is the same on every machine.
    let mut state = 0x5eed_u64;
    let mut uniform = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let gap = SPACING - 2.0 * RADIUS;
    // Cone volume pi R^2 H / 3 with H = SLOPE R holds n cells of SPACING^3.
    let mut radius =
        (n as f64 * SPACING.powi(3) * 3.0 / (std::f64::consts::PI * SLOPE)).cbrt() * 1.02;
    let points = loop {
        let cells = (2.0 * radius / SPACING) as i64 + 1;
        let layers = (SLOPE * radius / SPACING) as i64 + 1;
        let centre = SIDE / 2.0;
        let mut points = Vec::new();
        for k in 0..layers {
            for j in 0..cells {
                for i in 0..cells {
                    let mut p = [
                        centre - radius + (i as f64 + 0.5) * SPACING,
                        RADIUS + gap / 2.0 + k as f64 * SPACING,
                        centre - radius + (j as f64 + 0.5) * SPACING,
                    ];
                    let run = ((p[0] - centre).powi(2) + (p[2] - centre).powi(2)).sqrt();
                    if p[1] > SLOPE * (radius - run) {
                        continue;
                    }
                    for x in &mut p {
                        *x += 0.8 * gap * (uniform() - 0.5) / 2.0;
                    }
                    points.push(p);
                }
            }
        }
        if points.len() >= n {
            // Keep the lowest n: the heap loses its tip, never its base.
            points.sort_by(|a, b| a[1].total_cmp(&b[1]));
            points.truncate(n);
            break points;
        }
        radius *= 1.02;
    };
    assert!(2.0 * radius < SIDE, "the pile must fit the domain");

    let mut csv = std::io::BufWriter::new(std::fs::File::create(out.join("loose_pile.csv"))?);
    writeln!(csv, "x,y,z")?;
    for p in &points {
        writeln!(csv, "{:.7},{:.7},{:.7}", p[0], p[1], p[2])?;
    }
    csv.flush()?;
    let height = SLOPE * radius + SPACING;
    std::fs::write(
        out.join("settle_pile.toml"),
        format!(
            r#"# A loose conical heap of {n} glass beads settles under gravity
# (written by bake/examples/loose_pile.rs).
name = "settle_pile"
description = "a loose heap of beads compacts under gravity"

[simulation]
particle_radius = {RADIUS}
gravity = [0, -9.81, 0]
time_step = "auto"

[domain]
min = [0.0, 0.0, 0.0]
max = [{SIDE}, {top:.3}, {SIDE}]

[materials.default]
density = 2500
stiffness = 2000      # N/m: 1.4 % overlap under the heap's own weight
restitution = 0.1     # heavily damped, to come to rest quickly
friction = 0.5

[[particles]]
file = "loose_pile.csv"
"#,
            top = height * 1.5
        ),
    )?;
    println!(
        "{}: {} beads in a cone of radius {radius:.3} m and height {height:.3} m",
        out.display(),
        points.len()
    );
    Ok(())
}
