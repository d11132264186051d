//! The neighbour-overlap table and the expected-neighbour estimator: the
//! default table bake (64 ratios x 1 M samples) with both samplers, and the
//! estimator's cost over the grid of a 10 M-particle scene. The paper has no
//! public code to run beside it; its table took 1 M Monte Carlo samples.

use pellet_bake::table::{TableSettings, bake_table};
use pellet_formats::assets::SamplingMethod;
use pellet_formats::estimate::{CellCounts, expected_neighbours};
use pellet_formats::scene::Rng;

use crate::harness::{Row, time};

/// Rows for the table bake and the estimator.
pub fn run(samples: usize, quick: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    let table_samples = if quick { 100_000 } else { 1_000_000 };
    let mut sobol = None;
    for method in [SamplingMethod::MonteCarlo, SamplingMethod::Sobol] {
        let settings = TableSettings {
            samples: table_samples,
            method,
            ..Default::default()
        };
        eprintln!("bench: bake table ({})", method.name());
        let timing = time(samples.min(5), || {
            bake_table(&settings).expect("default table")
        });
        let table = bake_table(&settings).expect("default table");
        let worst = table.stderr.iter().copied().fold(0.0f32, f32::max);
        rows.push(Row {
            group: "neighbour model",
            name: format!("bake table, {}", method.name()),
            workload: format!("64 ratios 0.1..2 x {table_samples} samples x 10 canonical offsets"),
            pellet: timing,
            peer: "Kim et al. 2014 (no public code)".into(),
            peer_timing: None,
            notes: format!("largest standard error {worst:.1e} cell volumes; target < 5 s"),
        });
        sobol = Some(table);
    }
    let table = sobol.expect("baked above");
    // A 10 M-particle scene: 10 particles per cell on average over 100^3 cells.
    let side = if quick { 50u32 } else { 100 };
    let mut rng = Rng::new(7);
    let counts: Vec<u32> = (0..side * side * side)
        .map(|_| (rng.next_u64() % 21) as u32)
        .collect();
    let particles: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    for ratio in [1.0, 2.0] {
        let at = table.at(ratio).expect("in range");
        let grid = CellCounts {
            dims: [side; 3],
            counts: &counts,
        };
        eprintln!("bench: expected neighbours at eps/l = {ratio}");
        let timing = time(samples.min(7), || expected_neighbours(&grid, &at));
        let per_cell_ns = timing.median_s / f64::from(side * side * side) * 1e9;
        rows.push(Row {
            group: "neighbour model",
            name: format!("expected neighbours, eps/l = {ratio}"),
            workload: format!("{particles} particles on {side}³ cells"),
            pellet: timing,
            peer: "Kim et al. 2014 (no public code)".into(),
            peer_timing: None,
            notes: format!(
                "{per_cell_ns:.0} ns per cell on {} threads; target: 10 M particles well under 1 s",
                std::thread::available_parallelism().map_or(1, usize::from)
            ),
        });
    }
    // The fitted estimate's inputs (`estimate::fit`): the model on raw and
    // two smoothed counts in one pass, plus neighbourhood occupancy.
    let at = table.at(1.0).expect("in range");
    let grid = CellCounts {
        dims: [side; 3],
        counts: &counts,
    };
    eprintln!("bench: fitted-estimate features at eps/l = 1");
    let timing = time(samples.min(7), || {
        pellet_formats::estimate::fit::CellFeatures::new(&grid, &at, None)
    });
    let per_cell_ns = timing.median_s / f64::from(side * side * side) * 1e9;
    rows.push(Row {
        group: "neighbour model",
        name: "fitted-estimate features, eps/l = 1".into(),
        workload: format!("{particles} particles on {side}³ cells"),
        pellet: timing,
        peer: "Kim et al. 2014 (no public code)".into(),
        peer_timing: None,
        notes: format!(
            "{per_cell_ns:.0} ns per cell: three model passes fused, neighbourhood means and occupancy; the fit itself is a 5x5 solve on the sample"
        ),
    });
    rows
}
