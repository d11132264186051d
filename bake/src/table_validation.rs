//! Rerunnable validation of the expected-neighbour model: on particle
//! distributions of a million particles or more, compare the model's
//! expected neighbours per grid cell with the exact mean count of neighbours
//! within eps of the particles in that cell (Pearson correlation and RMSE,
//! over occupied cells). `bake validate-table` runs it; docs/neighbour-model.md
//! records the results.

use pellet_formats::assets::OverlapTable;
use pellet_formats::estimate::fit::{CellFeatures, FittedEstimate, refined_expected};
use pellet_formats::estimate::{CellCounts, RatioOutOfRange, calibration_factor};
use serde::Serialize;

use crate::progress::Progress;

pub use pellet_formats::distribution::Distribution;

/// The comparison for one distribution at one ratio.
#[derive(Debug, Clone, Serialize)]
pub struct ValidationRow {
    /// Which distribution: a generated one's name, or a point file's stem.
    pub distribution: String,
    /// Particles.
    pub particles: usize,
    /// Ratio eps / l.
    pub ratio: f64,
    /// Occupied cells compared.
    pub cells: usize,
    /// Mean exact neighbours per particle.
    pub mean_neighbours: f64,
    /// Pearson correlation of estimated and exact per-cell means (the paper's
    /// model: counts on the cells themselves).
    pub correlation: f64,
    /// Root mean square error per cell, neighbours.
    pub rmse: f64,
    /// RMSE over the mean neighbour count.
    pub relative_rmse: f64,
    /// Sub-cells per cell side used by the refined estimate (`floor(2 / ratio)`,
    /// the finest the table's range allows; 1 means no refinement).
    pub refine: u32,
    /// Correlation of the refined estimate: counts on sub-cells, the table at
    /// `ratio * refine`, averaged over each cell's particles.
    pub refined_correlation: f64,
    /// RMSE of the refined estimate.
    pub refined_rmse: f64,
    /// Correlation of estimated and exact neighbour totals per cell (each
    /// cell's particles times their mean): the quantity a block's memory sums.
    pub total_correlation: f64,
    /// RMSE of the per-cell totals, neighbours.
    pub total_rmse: f64,
    /// Packing correction (`calibration_factor`) fitted on every 64th occupied
    /// cell's exact totals.
    pub calibration: f64,
    /// RMSE of the per-particle means after the correction, over the cells not
    /// used to fit it.
    pub calibrated_rmse: f64,
    /// Correlation of the fitted estimate (`estimate::fit`: the model on raw
    /// and smoothed counts, occupancy and the refined model, weights fitted
    /// on every 64th occupied cell), over the cells not used to fit it.
    pub fitted_correlation: f64,
    /// RMSE of the fitted estimate over the held-out cells, neighbours.
    pub fitted_rmse: f64,
    /// The fit: feature names, weights, intercept.
    pub fit: Option<FittedEstimate>,
    /// Spread (standard deviation) of the exact per-particle mean over the
    /// held-out cells, neighbours: what a correlation measures against.
    pub truth_std: f64,
    /// Correlation over the held-out cells of an oracle no count-based
    /// estimate can beat in kind: the fitted estimate combined (least
    /// squares on the same sample) with the *exact* mean neighbours of the
    /// occupied cells around each cell. It knows the medium around a cell
    /// perfectly, and not where the cell's own particles sit.
    pub oracle_correlation: f64,
    /// RMSE of that oracle, neighbours.
    pub oracle_rmse: f64,
    /// Largest particle count in one cell.
    pub max_cell_count: u32,
    /// Seconds for the exact count.
    pub exact_seconds: f64,
}

/// A grid of cell length 1 over the particles, sorted by cell.
struct Grid {
    dims: [usize; 3],
    counts: Vec<u32>,
    start: Vec<usize>,
    sorted: Vec<[f64; 3]>,
}

impl Grid {
    fn new(points: &[[f64; 3]]) -> Self {
        let mut hi = [0.0f64; 3];
        for p in points {
            for k in 0..3 {
                hi[k] = hi[k].max(p[k]);
            }
        }
        let dims = hi.map(|h| h.floor() as usize + 1);
        let cell = |p: &[f64; 3]| {
            let c: [usize; 3] = std::array::from_fn(|k| (p[k].floor() as usize).min(dims[k] - 1));
            c[0] + dims[0] * (c[1] + dims[1] * c[2])
        };
        let mut counts = vec![0u32; dims[0] * dims[1] * dims[2]];
        for p in points {
            counts[cell(p)] += 1;
        }
        let mut start = vec![0usize; counts.len() + 1];
        for (i, &c) in counts.iter().enumerate() {
            start[i + 1] = start[i] + c as usize;
        }
        let mut fill = start.clone();
        let mut sorted = vec![[0.0; 3]; points.len()];
        for p in points {
            let c = cell(p);
            sorted[fill[c]] = *p;
            fill[c] += 1;
        }
        Self {
            dims,
            counts,
            start,
            sorted,
        }
    }

    /// Mean number of other particles within `eps` of the particles of each cell.
    fn exact_means(&self, eps: f64) -> Vec<f64> {
        let reach = eps.ceil() as i64;
        let [nx, ny, nz] = self.dims.map(|d| d as i64);
        let eps2 = eps * eps;
        let cells: Vec<usize> = (0..self.counts.len())
            .filter(|&c| self.counts[c] > 0)
            .collect();
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, 16);
        let chunk = cells.len().div_ceil(threads).max(1);
        let parts: Vec<Vec<(usize, f64)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = cells
                .chunks(chunk)
                .map(|mine| {
                    scope.spawn(move || {
                        mine.iter()
                            .map(|&q| {
                                let (x, y, z) =
                                    ((q as i64) % nx, (q as i64 / nx) % ny, q as i64 / (nx * ny));
                                let mut total = 0u64;
                                for p in &self.sorted[self.start[q]..self.start[q + 1]] {
                                    for dz in -reach..=reach {
                                        let zz = z + dz;
                                        if zz < 0 || zz >= nz {
                                            continue;
                                        }
                                        for dy in -reach..=reach {
                                            let yy = y + dy;
                                            if yy < 0 || yy >= ny {
                                                continue;
                                            }
                                            for dx in -reach..=reach {
                                                let xx = x + dx;
                                                if xx < 0 || xx >= nx {
                                                    continue;
                                                }
                                                let j = (xx + nx * (yy + ny * zz)) as usize;
                                                for o in
                                                    &self.sorted[self.start[j]..self.start[j + 1]]
                                                {
                                                    let d2 = (o[0] - p[0]).powi(2)
                                                        + (o[1] - p[1]).powi(2)
                                                        + (o[2] - p[2]).powi(2);
                                                    if d2 <= eps2 {
                                                        total += 1;
                                                    }
                                                }
                                            }
                                        }
                                    }
                                    total -= 1; // itself
                                }
                                (q, total as f64 / f64::from(self.counts[q]))
                            })
                            .collect()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("counting threads do not panic"))
                .collect()
        });
        let mut means = vec![0.0; self.counts.len()];
        for (q, m) in parts.into_iter().flatten() {
            means[q] = m;
        }
        means
    }
}

/// Compares model and exact counts for `distribution` at each ratio.
pub fn validate(
    table: &OverlapTable,
    distribution: Distribution,
    particles: usize,
    ratios: &[f64],
    seed: u64,
) -> Result<Vec<ValidationRow>, RatioOutOfRange> {
    let points = distribution.generate(particles, seed);
    validate_points(table, distribution.name(), &points, ratios)
}

/// Compares model and exact counts on `points`, given in cell units (cell
/// length 1, so `eps` is the ratio), at each ratio.
pub fn validate_points(
    table: &OverlapTable,
    name: &str,
    points: &[[f64; 3]],
    ratios: &[f64],
) -> Result<Vec<ValidationRow>, RatioOutOfRange> {
    validate_points_with_progress(table, name, points, ratios, &Progress::hidden())
}

/// [`validate_points`], naming each step on `progress`: the distribution,
/// the ratio (`k of n`) and the step (model, exact counts, fit).
pub fn validate_points_with_progress(
    table: &OverlapTable,
    name: &str,
    points: &[[f64; 3]],
    ratios: &[f64],
    progress: &Progress,
) -> Result<Vec<ValidationRow>, RatioOutOfRange> {
    if points.is_empty() {
        return Ok(Vec::new());
    }
    let particles = points.len();
    // Shift by whole cells into the first octant (the grid starts at the
    // origin), keeping the cell boundaries where they were.
    let lo = points.iter().fold([0.0f64; 3], |lo, p| {
        std::array::from_fn(|k| lo[k].min(p[k].floor()))
    });
    let shifted: Vec<[f64; 3]> = points
        .iter()
        .map(|p| std::array::from_fn(|k| p[k] - lo[k]))
        .collect();
    let points = &shifted;
    progress.stage(format!("{name}: {particles} particles: binning into cells"));
    let grid = Grid::new(points);
    let counts = CellCounts {
        dims: grid.dims.map(|d| d as u32),
        counts: &grid.counts,
    };
    let mut rows = Vec::new();
    for (k, &ratio) in ratios.iter().enumerate() {
        let step = |what: &str| {
            progress.stage(format!(
                "{name}: {particles} particles, eps/l {ratio} ({} of {}): {what}",
                k + 1,
                ratios.len()
            ));
        };
        step("model estimate");
        let at = table.at(ratio)?;
        let refine = ((2.0 / ratio).floor() as u32).max(1);
        let refined = if refine == 1 {
            None
        } else {
            Some(refined_estimate(table, points, &grid, ratio, refine)?)
        };
        let features = CellFeatures::new(&counts, &at, refined);
        let estimated = features.columns[0].clone();
        let refined = features.columns.get(4).unwrap_or(&estimated).clone();
        step("exact counts");
        let start = std::time::Instant::now();
        let exact = grid.exact_means(ratio);
        let exact_seconds = start.elapsed().as_secs_f64();
        let occupied: Vec<usize> = (0..grid.counts.len())
            .filter(|&c| grid.counts[c] > 0)
            .collect();
        let mean_neighbours = occupied
            .iter()
            .map(|&c| exact[c] * f64::from(grid.counts[c]))
            .sum::<f64>()
            / particles as f64;
        let (correlation, rmse) = compare(&occupied, &estimated, &exact);
        let (refined_correlation, refined_rmse) = compare(&occupied, &refined, &exact);
        let total = |per_particle: &[f64]| -> Vec<f64> {
            per_particle
                .iter()
                .zip(&grid.counts)
                .map(|(m, &n)| m * f64::from(n))
                .collect()
        };
        let (estimated_total, exact_total) = (total(&estimated), total(&exact));
        let (total_correlation, total_rmse) = compare(&occupied, &estimated_total, &exact_total);
        // Fit on every 64th occupied cell, judge on the others.
        let calibration = calibration_factor(
            occupied
                .iter()
                .step_by(64)
                .map(|&c| (estimated_total[c], exact_total[c])),
        );
        let held_out: Vec<usize> = occupied
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 64 != 0)
            .map(|(_, &c)| c)
            .collect();
        let calibrated: Vec<f64> = estimated.iter().map(|e| e * calibration).collect();
        let (_, calibrated_rmse) = compare(&held_out, &calibrated, &exact);
        let sample: Vec<(usize, f64)> = occupied
            .iter()
            .step_by(64)
            .map(|&c| (c, exact[c]))
            .collect();
        step("fitting");
        let fit = FittedEstimate::fit(&features, &sample).ok();
        let fitted = fit.as_ref().map(|f| f.predict_all(&features));
        let (fitted_correlation, fitted_rmse) = match &fitted {
            Some(p) => compare(&held_out, p, &exact),
            None => (f64::NAN, f64::NAN),
        };
        step("oracle");
        let truth_mean =
            held_out.iter().map(|&c| exact[c]).sum::<f64>() / held_out.len().max(1) as f64;
        let truth_std = (held_out
            .iter()
            .map(|&c| (exact[c] - truth_mean).powi(2))
            .sum::<f64>()
            / held_out.len().max(1) as f64)
            .sqrt();
        let around = neighbour_truth(&grid.dims, &grid.counts, &exact);
        // The fit's fourth column marks occupied cells (constant columns get
        // no weight).
        let occupied_mark: Vec<f64> = grid
            .counts
            .iter()
            .map(|&n| f64::from(u8::from(n > 0)))
            .collect();
        let oracle = CellFeatures {
            names: vec!["fitted", "exact around", "none", "occupied"],
            columns: vec![
                fitted.clone().unwrap_or_else(|| estimated.clone()),
                around,
                vec![0.0; grid.counts.len()],
                occupied_mark,
            ],
        };
        let (oracle_correlation, oracle_rmse) = match FittedEstimate::fit(&oracle, &sample) {
            Ok(f) => compare(&held_out, &f.predict_all(&oracle), &exact),
            Err(_) => (f64::NAN, f64::NAN),
        };
        rows.push(ValidationRow {
            distribution: name.to_string(),
            particles,
            ratio,
            cells: occupied.len(),
            mean_neighbours,
            correlation,
            rmse,
            relative_rmse: rmse / mean_neighbours.max(f64::MIN_POSITIVE),
            refine,
            refined_correlation,
            refined_rmse,
            total_correlation,
            total_rmse,
            calibration,
            calibrated_rmse,
            fitted_correlation,
            fitted_rmse,
            fit,
            truth_std,
            oracle_correlation,
            oracle_rmse,
            max_cell_count: grid.counts.iter().copied().max().unwrap_or(0),
            exact_seconds,
        });
    }
    Ok(rows)
}

/// Per occupied cell, the exact per-particle mean neighbours of the occupied
/// cells of its 3x3x3 neighbourhood, itself left out, weighted by their
/// counts (the cell's own value where it has no occupied neighbour).
fn neighbour_truth(dims: &[usize; 3], counts: &[u32], exact: &[f64]) -> Vec<f64> {
    let [nx, ny, nz] = dims.map(|d| d as i64);
    let mut out = vec![0.0; counts.len()];
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let q = (x + nx * (y + ny * z)) as usize;
                if counts[q] == 0 {
                    continue;
                }
                let (mut sum, mut weight) = (0.0, 0.0);
                for i in 0..27 {
                    let (dx, dy, dz) = (i % 3 - 1, (i / 3) % 3 - 1, i / 9 - 1);
                    let (xx, yy, zz) = (x + dx, y + dy, z + dz);
                    if (dx, dy, dz) == (0, 0, 0)
                        || xx < 0
                        || yy < 0
                        || zz < 0
                        || xx >= nx
                        || yy >= ny
                        || zz >= nz
                    {
                        continue;
                    }
                    let c = (xx + nx * (yy + ny * zz)) as usize;
                    let w = f64::from(counts[c]);
                    sum += w * exact[c];
                    weight += w;
                }
                out[q] = if weight > 0.0 { sum / weight } else { exact[q] };
            }
        }
    }
    out
}

/// Pearson correlation and RMSE of `estimated` against `exact` over `cells`.
fn compare(cells: &[usize], estimated: &[f64], exact: &[f64]) -> (f64, f64) {
    let n = cells.len() as f64;
    let (mut se, mut sx, mut sy, mut sxx, mut syy, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for &c in cells {
        let (x, y) = (estimated[c], exact[c]);
        se += (x - y) * (x - y);
        sx += x;
        sy += y;
        sxx += x * x;
        syy += y * y;
        sxy += x * y;
    }
    let cov = sxy / n - (sx / n) * (sy / n);
    let correlation =
        cov / ((sxx / n - (sx / n).powi(2)).sqrt() * (syy / n - (sy / n).powi(2)).sqrt());
    (correlation, (se / n).sqrt())
}

/// The model on sub-cells of side `1 / refine` (table at `ratio * refine`),
/// averaged over the particles of each cell.
fn refined_estimate(
    table: &OverlapTable,
    points: &[[f64; 3]],
    grid: &Grid,
    ratio: f64,
    refine: u32,
) -> Result<Vec<f64>, RatioOutOfRange> {
    let k = f64::from(refine);
    let scaled: Vec<[f64; 3]> = points.iter().map(|p| p.map(|x| x * k)).collect();
    let fine = Grid::new(&scaled);
    let at = table.at(ratio * k)?;
    Ok(refined_expected(
        &CellCounts {
            dims: fine.dims.map(|d| d as u32),
            counts: &fine.counts,
        },
        refine,
        grid.dims.map(|d| d as u32),
        &at,
    ))
}
