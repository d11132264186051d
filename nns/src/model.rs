//! Expected neighbours per cell for block sizing: the overlap-table model,
//! optionally fitted on a sample of cells counted exactly
//! (`pellet_formats::estimate::fit`), and the safety margin from the
//! measured error.

use pellet_formats::assets::OverlapTable;
use pellet_formats::estimate::fit::{CellFeatures, FittedEstimate};
use pellet_formats::estimate::{CellCounts, OverlapAt, expected_neighbours};

use super::cpu::neighbours_of;
use super::grid::CellGrid;

/// How expected neighbours are estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EstimateMode {
    /// The paper's model: the overlap table on cell counts.
    Table,
    /// The table model refined by raw and smoothed counts, occupancy and
    /// sub-cell counts, with weights fitted on every 64th occupied cell
    /// (at most 1/64 of the search, done on CPU threads before planning).
    #[default]
    Fitted,
}

/// The per-cell estimate and how it was made.
#[derive(Debug, Clone)]
pub struct CellEstimate {
    /// Expected neighbours of one point of each cell.
    pub expected: Vec<f64>,
    /// The fit, when one was made.
    pub fit: Option<FittedEstimate>,
    /// RMSE of the estimate per cell mean, measured on the sample (None for
    /// the table model, whose error is not measured).
    pub measured_rmse: Option<f64>,
}

/// The table at `ratio`, clamped into its range, and the volume scale from
/// the clamped ratio (the estimate only sizes blocks; overflows are split
/// and redone).
fn lookup(table: &OverlapTable, ratio: f64) -> Option<(OverlapAt, f64)> {
    let first = f64::from(table.ratios.first().copied()?);
    let last = f64::from(table.ratios.last().copied()?);
    let clamped = ratio.clamp(first, last);
    let at = table.at(clamped).ok()?;
    Some((at, (ratio / clamped).powi(3)))
}

/// Expected neighbours per cell of `grid` for search radius `radius`.
pub fn estimate(
    grid: &CellGrid,
    table: &OverlapTable,
    radius: f32,
    mode: EstimateMode,
    threads: usize,
) -> CellEstimate {
    let ratio = f64::from(radius) / grid.cell;
    let counts = grid.counts();
    let cells = CellCounts {
        dims: grid.dims,
        counts: &counts,
    };
    let Some((at, scale)) = lookup(table, ratio) else {
        return CellEstimate {
            expected: vec![0.0; counts.len()],
            fit: None,
            measured_rmse: None,
        };
    };
    if mode == EstimateMode::Table {
        let expected = expected_neighbours(&cells, &at);
        return CellEstimate {
            expected: expected.iter().map(|e| e * scale).collect(),
            fit: None,
            measured_rmse: None,
        };
    }
    // Raw and smoothed counts only: sub-cell counts (`refined_expected`)
    // would sharpen the per-cell estimate on uniform points, but cost more
    // than the search they size (the table at twice the ratio reaches 125
    // cells, on 8 times as many cells); blocks sum many cells, so the
    // smoothed counts' bias correction is what matters.
    let features = CellFeatures::new(&cells, &at, None);
    let sample = measure_sample(grid, radius, threads);
    match FittedEstimate::fit(&features, &sample) {
        Ok(fit) => {
            let expected = fit.predict_all(&features);
            CellEstimate {
                expected,
                measured_rmse: Some(fit.sample_rmse),
                fit: Some(fit),
            }
        }
        // Too few cells to fit: the table model.
        Err(_) => CellEstimate {
            expected: features.columns[0].iter().map(|e| e * scale).collect(),
            fit: None,
            measured_rmse: None,
        },
    }
}

/// Every 64th occupied cell (more often on small grids, so that about 2048
/// cells are sampled where there are that many) with the exact mean number
/// of neighbours of its points, counted on `threads` CPU threads.
fn measure_sample(grid: &CellGrid, radius: f32, threads: usize) -> Vec<(usize, f64)> {
    let occupied: Vec<usize> = (0..grid.cell_count())
        .filter(|&c| grid.starts[c + 1] > grid.starts[c])
        .collect();
    let step = (occupied.len() / 2048).clamp(1, 64);
    let chosen: Vec<usize> = occupied.into_iter().step_by(step).collect();
    let eps2 = f64::from(radius) * f64::from(radius);
    let chunk = chosen.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = chosen
            .chunks(chunk)
            .map(|mine| {
                scope.spawn(move || {
                    let mut out = Vec::with_capacity(mine.len());
                    let mut scratch = Vec::new();
                    for &c in mine {
                        let coords = grid.coords(c);
                        let (from, to) = (grid.starts[c] as usize, grid.starts[c + 1] as usize);
                        let mut total = 0usize;
                        for s in from..to {
                            scratch.clear();
                            neighbours_of(grid, s, coords, eps2, &mut scratch);
                            total += scratch.len();
                        }
                        out.push((c, total as f64 / (to - from) as f64));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("sample threads do not panic"))
            .collect()
    })
}
