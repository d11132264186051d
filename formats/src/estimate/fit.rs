//! The expected-neighbour model fitted on exactly counted cells.
//!
//! The table model ([`super::expected_neighbours`]) assumes the particles of a
//! cell are placed independently and uniformly inside it. Two things break
//! that on real scenes:
//! - *packing*: grains exclude each other and sit in shells, so a cell holds
//!   8 to 27 grains depending on how layers cross it while its grains have the
//!   same neighbours, and the contact shell makes near counts higher than
//!   uniform placement predicts;
//! - *position inside the cell*: at small `eps / l` a particle's neighbours
//!   depend on where particles sit inside cells, which counts on cells of
//!   side `l` average away.
//!
//! [`CellFeatures`] computes, per occupied cell, the table model on the raw
//! counts and on smoothed counts, the occupied fraction of the cell's
//! neighbourhood and, when sub-cell counts are given, the model on sub-cells;
//! [`FittedEstimate`] is the least-squares combination of them fitted on a
//! sample of cells whose neighbours were counted exactly (the first block an
//! out-of-core search finishes, or every 64th cell counted on the CPU). With a
//! few thousand cells in the sample, five weights cannot overfit; the
//! validation judges the fit on the cells it did not see
//! (docs/neighbour-model.md).

use thiserror::Error;

use super::{CellCounts, OverlapAt, expected_from_densities, expected_neighbours};

/// Why a fit was not possible.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum FitError {
    /// Fewer sample cells than the fit needs.
    #[error("{got} sample cells are too few to fit the estimate (need at least {need})")]
    TooFewCells {
        /// Cells given.
        got: usize,
        /// Cells needed.
        need: usize,
    },
    /// A sample value is not a finite number, or a cell is out of range.
    #[error("sample cell {cell} is not a valid measurement")]
    BadSample {
        /// The cell's index.
        cell: usize,
    },
}

/// Per-cell inputs of the fitted estimate, for the occupied cells of a grid
/// (empty cells hold 0). Each column is in neighbours per particle except
/// `occupancy` (a fraction).
#[derive(Debug, Clone)]
pub struct CellFeatures {
    /// Column names, in order.
    pub names: Vec<&'static str>,
    /// One vector per feature, indexed by cell.
    pub columns: Vec<Vec<f64>>,
}

impl CellFeatures {
    /// Features of every occupied cell of `grid` at the table lookup `at`:
    /// - `model`: the table model on the raw counts;
    /// - `local`: the model with each count replaced by the mean count of the
    ///   occupied cells of its 3x3x3 neighbourhood (removes the layer-crossing
    ///   noise of packed grains, keeps free surfaces sharp);
    /// - `box`: the same with empty cells included in the mean (sees surfaces);
    /// - `occupancy`: the occupied fraction of the 27 cells around;
    /// - `refined`, when `refined` is given: the model on sub-cells averaged
    ///   over each cell's particles ([`refined_expected`]).
    pub fn new(grid: &CellCounts<'_>, at: &OverlapAt, refined: Option<Vec<f64>>) -> Self {
        let (local, boxed, occupancy) = neighbourhood_means(grid);
        let raw: Vec<f64> = grid.counts.iter().map(|&n| f64::from(n)).collect();
        let mut names = vec!["model", "local", "box", "occupancy"];
        let mut columns = expected_from_densities(grid, &[&raw, &local, &boxed], at);
        columns.push(occupancy);
        if let Some(r) = refined {
            assert_eq!(r.len(), grid.counts.len(), "one refined value per cell");
            names.push("refined");
            columns.push(r);
        }
        Self { names, columns }
    }

    /// Number of cells.
    pub fn cells(&self) -> usize {
        self.columns.first().map_or(0, Vec::len)
    }

    fn row(&self, cell: usize) -> impl Iterator<Item = f64> + '_ {
        self.columns.iter().map(move |c| c[cell])
    }
}

/// Mean counts over the 3x3x3 neighbourhood of each occupied cell: over the
/// occupied cells only, over all 27 (cells outside the grid are empty), and
/// the occupied fraction.
fn neighbourhood_means(grid: &CellCounts<'_>) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let [nx, ny, nz] = grid.dims.map(|d| d as i64);
    let n = grid.counts.len();
    let (mut local, mut boxed, mut occupancy) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let q = (x + nx * (y + ny * z)) as usize;
                if grid.counts[q] == 0 {
                    continue;
                }
                let (mut sum, mut occupied) = (0.0, 0.0);
                for (dx, dy, dz) in (0..27).map(|i| (i % 3 - 1, (i / 3) % 3 - 1, i / 9 - 1)) {
                    let (xx, yy, zz) = (x + dx, y + dy, z + dz);
                    if xx < 0 || yy < 0 || zz < 0 || xx >= nx || yy >= ny || zz >= nz {
                        continue;
                    }
                    let c = grid.counts[(xx + nx * (yy + ny * zz)) as usize];
                    if c > 0 {
                        sum += f64::from(c);
                        occupied += 1.0;
                    }
                }
                local[q] = sum / occupied;
                boxed[q] = sum / 27.0;
                occupancy[q] = occupied / 27.0;
            }
        }
    }
    (local, boxed, occupancy)
}

/// The table model on sub-cells of side `l / refine`, averaged over the
/// particles of each cell of side `l`: `fine` holds the sub-cell counts (its
/// sub-cell `(x, y, z)` lies in cell `(x, y, z) / refine`, clamped to
/// `coarse_dims`), `at_fine` the table at `ratio * refine`. Returns one value
/// per coarse cell (0 for empty cells).
pub fn refined_expected(
    fine: &CellCounts<'_>,
    refine: u32,
    coarse_dims: [u32; 3],
    at_fine: &OverlapAt,
) -> Vec<f64> {
    let estimated = expected_neighbours(fine, at_fine);
    let [cx, cy, cz] = coarse_dims.map(|d| d as usize);
    let (mut sums, mut counts) = (vec![0.0; cx * cy * cz], vec![0u64; cx * cy * cz]);
    let [fx, fy, _] = fine.dims.map(|d| d as usize);
    let k = refine.max(1) as usize;
    for (f, &n) in fine.counts.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let (x, y, z) = (f % fx, (f / fx) % fy, f / (fx * fy));
        let c = (x / k).min(cx - 1) + cx * ((y / k).min(cy - 1) + cy * (z / k).min(cz - 1));
        sums[c] += f64::from(n) * estimated[f];
        counts[c] += u64::from(n);
    }
    sums.iter()
        .zip(&counts)
        .map(|(s, &n)| if n > 0 { s / n as f64 } else { 0.0 })
        .collect()
}

/// A least-squares combination of [`CellFeatures`]:
/// `expected = intercept + sum_i weights[i] * feature_i`, clamped at 0.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FittedEstimate {
    /// Feature names, in the order of `weights`.
    pub names: Vec<&'static str>,
    /// One weight per feature.
    pub weights: Vec<f64>,
    /// Constant term, neighbours per particle.
    pub intercept: f64,
    /// Root mean square residual on the sample, neighbours per particle.
    pub sample_rmse: f64,
    /// Cells in the sample.
    pub sample_cells: usize,
}

impl FittedEstimate {
    /// Ridge strength on standardised features: small enough not to bias a
    /// well-posed fit, large enough to keep collinear features (the refined
    /// model equals the raw one when nothing is refined) from blowing up.
    const RIDGE: f64 = 1e-6;

    /// Fits the weights on `sample`: `(cell, measured mean neighbours per
    /// particle of that cell)`. Needs at least 4 cells per weight.
    pub fn fit(features: &CellFeatures, sample: &[(usize, f64)]) -> Result<Self, FitError> {
        let k = features.columns.len();
        let need = 4 * (k + 1);
        if sample.len() < need {
            return Err(FitError::TooFewCells {
                got: sample.len(),
                need,
            });
        }
        if let Some(&(cell, _)) = sample
            .iter()
            .find(|(c, y)| *c >= features.cells() || !y.is_finite())
        {
            return Err(FitError::BadSample { cell });
        }
        let n = sample.len() as f64;
        // Standardise each feature over the sample.
        let mut mean = vec![0.0; k];
        let mut y_mean = 0.0;
        for &(c, y) in sample {
            for (m, v) in mean.iter_mut().zip(features.row(c)) {
                *m += v / n;
            }
            y_mean += y / n;
        }
        let mut scale = vec![0.0; k];
        for &(c, _) in sample {
            for ((s, v), m) in scale.iter_mut().zip(features.row(c)).zip(&mean) {
                *s += (v - m) * (v - m) / n;
            }
        }
        let scale: Vec<f64> = scale
            .iter()
            .map(|v| if v.sqrt() > 1e-12 { v.sqrt() } else { 0.0 })
            .collect();
        // Normal equations of the standardised problem (centred: no intercept).
        let mut a = vec![vec![0.0; k]; k];
        let mut b = vec![0.0; k];
        for &(c, y) in sample {
            let z: Vec<f64> = features
                .row(c)
                .zip(&mean)
                .zip(&scale)
                .map(|((v, m), s)| if *s > 0.0 { (v - m) / s } else { 0.0 })
                .collect();
            for i in 0..k {
                b[i] += z[i] * (y - y_mean) / n;
                for j in 0..k {
                    a[i][j] += z[i] * z[j] / n;
                }
            }
        }
        for (i, row) in a.iter_mut().enumerate() {
            row[i] += if scale[i] > 0.0 { Self::RIDGE } else { 1.0 };
        }
        let beta = solve_symmetric(a, b);
        let weights: Vec<f64> = beta
            .iter()
            .zip(&scale)
            .map(|(b, s)| if *s > 0.0 { b / s } else { 0.0 })
            .collect();
        let intercept = y_mean - weights.iter().zip(&mean).map(|(w, m)| w * m).sum::<f64>();
        let mut fitted = Self {
            names: features.names.clone(),
            weights,
            intercept,
            sample_rmse: 0.0,
            sample_cells: sample.len(),
        };
        fitted.sample_rmse = (sample
            .iter()
            .map(|&(c, y)| (fitted.predict(features, c) - y).powi(2))
            .sum::<f64>()
            / n)
            .sqrt();
        Ok(fitted)
    }

    /// Expected neighbours per particle of `cell` (0 for an empty cell).
    pub fn predict(&self, features: &CellFeatures, cell: usize) -> f64 {
        if features.columns[3][cell] == 0.0 {
            return 0.0; // an empty cell: its own occupancy is 0
        }
        let v = self.intercept
            + features
                .row(cell)
                .zip(&self.weights)
                .map(|(x, w)| x * w)
                .sum::<f64>();
        v.max(0.0)
    }

    /// [`Self::predict`] for every cell.
    pub fn predict_all(&self, features: &CellFeatures) -> Vec<f64> {
        (0..features.cells())
            .map(|c| self.predict(features, c))
            .collect()
    }
}

/// Solves `a x = b` for a symmetric positive-definite `a` (Cholesky).
fn solve_symmetric(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let k = b.len();
    for j in 0..k {
        let d = a[j][j] - (0..j).map(|p| a[j][p] * a[j][p]).sum::<f64>();
        a[j][j] = d.max(1e-300).sqrt();
        for i in j + 1..k {
            let s = a[i][j] - (0..j).map(|p| a[i][p] * a[j][p]).sum::<f64>();
            a[i][j] = s / a[j][j];
        }
    }
    for i in 0..k {
        b[i] = (b[i] - (0..i).map(|p| a[i][p] * b[p]).sum::<f64>()) / a[i][i];
    }
    for i in (0..k).rev() {
        b[i] = (b[i] - (i + 1..k).map(|p| a[p][i] * b[p]).sum::<f64>()) / a[i][i];
    }
    b
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The model one cell and one density at a time, serially: the
    /// reference the fused, threaded pass must equal bit for bit.
    fn expected_from_density(
        grid: &CellCounts<'_>,
        density: impl Fn(usize) -> f64,
        at: &OverlapAt,
    ) -> Vec<f64> {
        let [nx, ny, nz] = grid.dims.map(|d| d as i64);
        let r = i64::from(at.reach);
        let mut out = vec![0.0; grid.counts.len()];
        for z in 0..nz {
            for y in 0..ny {
                for x in 0..nx {
                    let q = (x + nx * (y + ny * z)) as usize;
                    if grid.counts[q] == 0 {
                        continue;
                    }
                    let mut sum = -at.value([0, 0, 0]); // the particle itself
                    for dz in -r..=r {
                        let zz = z + dz;
                        if zz < 0 || zz >= nz {
                            continue;
                        }
                        for dy in -r..=r {
                            let yy = y + dy;
                            if yy < 0 || yy >= ny {
                                continue;
                            }
                            let row = nx * (yy + ny * zz);
                            for dx in -r..=r {
                                let xx = x + dx;
                                if xx < 0 || xx >= nx {
                                    continue;
                                }
                                let n = density((xx + row) as usize);
                                if n > 0.0 {
                                    sum +=
                                        n * at.values[at.index([dx as i32, dy as i32, dz as i32])];
                                }
                            }
                        }
                    }
                    out[q] = sum.max(0.0);
                }
            }
        }
        out
    }

    fn lookup(values: [f64; 27]) -> OverlapAt {
        OverlapAt {
            ratio: 1.0,
            reach: 1,
            values: values.to_vec(),
            stderr: vec![0.0; 27],
        }
    }

    #[test]
    fn the_fused_pass_equals_one_density_at_a_time() {
        let dims = [7u32, 5, 9];
        let counts: Vec<u32> = (0..315u32)
            .map(|i| i.wrapping_mul(2654435761) % 5)
            .collect();
        let grid = CellCounts {
            dims,
            counts: &counts,
        };
        let mut v = [0.02; 27];
        v[13] = 0.4;
        let at = lookup(v);
        let raw: Vec<f64> = counts.iter().map(|&n| f64::from(n)).collect();
        let half: Vec<f64> = raw.iter().map(|n| n / 2.0).collect();
        let fused = expected_from_densities(&grid, &[&raw, &half], &at);
        assert_eq!(fused[0], expected_from_density(&grid, |c| raw[c], &at));
        assert_eq!(fused[0], expected_neighbours(&grid, &at));
        assert_eq!(fused[1], expected_from_density(&grid, |c| half[c], &at));
    }

    #[test]
    fn cholesky_solves() {
        let a = vec![vec![4.0, 2.0], vec![2.0, 3.0]];
        let x = solve_symmetric(a, vec![2.0, 1.0]);
        assert!((4.0 * x[0] + 2.0 * x[1] - 2.0).abs() < 1e-12);
        assert!((2.0 * x[0] + 3.0 * x[1] - 1.0).abs() < 1e-12);
    }

    #[test]
    fn the_fit_recovers_a_linear_truth() {
        // A 6x6x6 grid with varied counts; the truth is an exact linear
        // combination of two features, which the fit must recover.
        let dims = [6u32; 3];
        let counts: Vec<u32> = (0..216u32).map(|i| 1 + (i * 7919) % 13).collect();
        let mut v = [0.01; 27];
        v[13] = 0.3;
        let at = lookup(v);
        let grid = CellCounts {
            dims,
            counts: &counts,
        };
        let f = CellFeatures::new(&grid, &at, None);
        let truth = |c: usize| 0.8 * f.columns[0][c] + 0.3 * f.columns[1][c] + 2.0;
        let sample: Vec<(usize, f64)> = (0..216).map(|c| (c, truth(c))).collect();
        let fit = FittedEstimate::fit(&f, &sample).unwrap();
        assert!(fit.sample_rmse < 1e-4, "{fit:?}");
        for c in 0..216 {
            assert!((fit.predict(&f, c) - truth(c)).abs() < 1e-3);
        }
    }

    #[test]
    fn collinear_features_and_bad_samples() {
        let counts = vec![3u32; 125];
        let grid = CellCounts {
            dims: [5; 3],
            counts: &counts,
        };
        let at = lookup([0.05; 27]);
        // The refined column equals the model column: still a finite fit.
        let model = expected_from_density(&grid, |c| f64::from(counts[c]), &at);
        let f = CellFeatures::new(&grid, &at, Some(model));
        let sample: Vec<(usize, f64)> = (0..125).map(|c| (c, 1.0 + (c % 3) as f64)).collect();
        let fit = FittedEstimate::fit(&f, &sample).unwrap();
        assert!(fit.weights.iter().all(|w| w.is_finite()));
        assert!(matches!(
            FittedEstimate::fit(&f, &sample[..5]),
            Err(FitError::TooFewCells { got: 5, .. })
        ));
        let mut bad = sample.clone();
        bad[7].1 = f64::NAN;
        assert_eq!(
            FittedEstimate::fit(&f, &bad),
            Err(FitError::BadSample { cell: 7 })
        );
    }

    #[test]
    fn refined_averages_over_particles() {
        // One coarse cell split in 2x2x2 sub-cells; the refined value is the
        // particle-weighted mean of the sub-cell estimates.
        let fine_counts = vec![1u32, 3, 0, 0, 0, 0, 0, 0];
        let fine = CellCounts {
            dims: [2, 2, 2],
            counts: &fine_counts,
        };
        let mut v = [0.0; 27];
        v[13] = 0.5; // self
        v[14] = 0.25; // +x
        v[12] = 0.25; // -x
        let at = lookup(v);
        let r = refined_expected(&fine, 2, [1, 1, 1], &at);
        // Sub-cell 0: 1*0.5 - 0.5 + 3*0.25 = 0.75; sub-cell 1: 3*0.5 - 0.5 + 0.25 = 1.25.
        assert!((r[0] - (0.75 + 3.0 * 1.25) / 4.0).abs() < 1e-12, "{r:?}");
    }
}
