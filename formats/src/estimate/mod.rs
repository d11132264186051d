//! The expected-neighbour model of Kim et al. (HPG 2014) over a baked
//! [`OverlapTable`]: interpolation at any ratio, expansion of the
//! symmetry-reduced offsets, expected neighbours per grid cell, and the memory
//! footprint of a block of cells. [`fit`] refines it with a few per-cell
//! features fitted on exactly counted cells.

pub mod fit;

use thiserror::Error;

use crate::assets::OverlapTable;

/// A ratio outside the table's range: the model never extrapolates.
#[derive(Debug, Clone, PartialEq, Error)]
#[error(
    "ratio eps/l = {ratio} is outside the table's range {min}..={max}; bake a table that covers it"
)]
pub struct RatioOutOfRange {
    /// Requested ratio.
    pub ratio: f64,
    /// Smallest tabulated ratio.
    pub min: f32,
    /// Largest tabulated ratio.
    pub max: f32,
}

/// The canonical (symmetry-reduced) form of a cell offset: absolute values, sorted.
pub fn canonical_offset(d: [i32; 3]) -> [i8; 3] {
    let mut a = d.map(|x| x.unsigned_abs().min(127) as i8);
    a.sort_unstable();
    a
}

/// The table at one ratio, expanded to every offset in `{-reach..reach}^3`.
#[derive(Debug, Clone, PartialEq)]
pub struct OverlapAt {
    /// The ratio eps / l.
    pub ratio: f64,
    /// Largest offset per axis.
    pub reach: i32,
    /// `E` in cell volumes, indexed by [`OverlapAt::index`].
    pub values: Vec<f64>,
    /// Standard error of each value.
    pub stderr: Vec<f64>,
}

impl OverlapAt {
    /// Side of the offset cube, `2 * reach + 1`.
    pub fn side(&self) -> i32 {
        2 * self.reach + 1
    }

    /// Index of offset `d` (each component in `-reach..=reach`).
    pub fn index(&self, d: [i32; 3]) -> usize {
        let s = self.side();
        let r = self.reach;
        (((d[2] + r) * s + (d[1] + r)) * s + (d[0] + r)) as usize
    }

    /// `E(Cq, Cq + d)` in cell volumes; 0 beyond the reach.
    pub fn value(&self, d: [i32; 3]) -> f64 {
        if d.iter().any(|x| x.abs() > self.reach) {
            0.0
        } else {
            self.values[self.index(d)]
        }
    }
}

impl OverlapTable {
    /// Largest offset component stored.
    pub fn reach(&self) -> i32 {
        self.offsets
            .iter()
            .flat_map(|o| o.iter())
            .map(|&x| i32::from(x))
            .max()
            .unwrap_or(0)
    }

    /// The table interpolated at `ratio` and expanded to every offset. The
    /// spline (cubic Hermite with finite-difference slopes, exact at the
    /// tabulated ratios) runs through `E / r^3`, which varies slowly where `E`
    /// itself grows like the sphere's volume. Standard errors are
    /// interpolated linearly.
    pub fn at(&self, ratio: f64) -> Result<OverlapAt, RatioOutOfRange> {
        let ratios: Vec<f64> = self.ratios.iter().map(|&r| f64::from(r)).collect();
        let (min, max) = (ratios[0], ratios[ratios.len() - 1]);
        if !(ratio >= min && ratio <= max) {
            return Err(RatioOutOfRange {
                ratio,
                min: self.ratios[0],
                max: self.ratios[self.ratios.len() - 1],
            });
        }
        let n = ratios.len();
        let k = if n == 1 {
            0
        } else {
            ratios.partition_point(|&r| r <= ratio).clamp(1, n - 1) - 1
        };
        let m = self.offsets.len();
        let entry = |r: usize, o: usize| f64::from(self.values[r * m + o]) / ratios[r].powi(3);
        let err = |r: usize, o: usize| f64::from(self.stderr[r * m + o]);
        let canonical: Vec<(f64, f64)> = (0..m)
            .map(|o| {
                if n == 1 {
                    return (f64::from(self.values[o]), err(0, o));
                }
                let (x0, x1) = (ratios[k], ratios[k + 1]);
                let h = x1 - x0;
                let t = (ratio - x0) / h;
                let slope = |i: usize| {
                    let (a, b) = (i.saturating_sub(1), (i + 1).min(n - 1));
                    (entry(b, o) - entry(a, o)) / (ratios[b] - ratios[a])
                };
                let (y0, y1, s0, s1) = (entry(k, o), entry(k + 1, o), slope(k), slope(k + 1));
                let (t2, t3) = (t * t, t * t * t);
                let value = (2.0 * t3 - 3.0 * t2 + 1.0) * y0
                    + (t3 - 2.0 * t2 + t) * h * s0
                    + (-2.0 * t3 + 3.0 * t2) * y1
                    + (t3 - t2) * h * s1;
                let e = (1.0 - t) * err(k, o) + t * err(k + 1, o);
                ((value * ratio.powi(3)).max(0.0), e)
            })
            .collect();
        let reach = self.reach();
        let side = 2 * reach + 1;
        let mut at = OverlapAt {
            ratio,
            reach,
            values: vec![0.0; (side * side * side) as usize],
            stderr: vec![0.0; (side * side * side) as usize],
        };
        for dz in -reach..=reach {
            for dy in -reach..=reach {
                for dx in -reach..=reach {
                    let c = canonical_offset([dx, dy, dz]);
                    if let Some(o) = self.offsets.iter().position(|x| *x == c) {
                        let i = at.index([dx, dy, dz]);
                        at.values[i] = canonical[o].0;
                        at.stderr[i] = canonical[o].1;
                    }
                }
            }
        }
        Ok(at)
    }
}

/// Particle counts on a grid of cubic cells, x fastest.
#[derive(Debug, Clone, Copy)]
pub struct CellCounts<'a> {
    /// Cells along x, y, z.
    pub dims: [u32; 3],
    /// Particles per cell.
    pub counts: &'a [u32],
}

/// Expected number of *other* particles within eps of a particle in each
/// cell: `sum_j n(Cj) E(Cq, Cj) / V(Cj)`, with the particle itself removed
/// from its own cell's count. Cells outside the grid are empty.
pub fn expected_neighbours(grid: &CellCounts<'_>, at: &OverlapAt) -> Vec<f64> {
    let counts: Vec<f64> = grid.counts.iter().map(|&n| f64::from(n)).collect();
    expected_from_densities(grid, &[&counts], at)
        .pop()
        .unwrap_or_default()
}

/// [`expected_neighbours`] with the particle count of cell `c` replaced by
/// `densities[k][c]` (particles per cell, e.g. a smoothed count), for several
/// densities at once: one pass over the grid on all cores, one output per
/// density. Computed for the occupied cells of `grid` only; empty cells get 0.
pub fn expected_from_densities(
    grid: &CellCounts<'_>,
    densities: &[&[f64]],
    at: &OverlapAt,
) -> Vec<Vec<f64>> {
    let [nx, ny, nz] = grid.dims.map(|d| d as i64);
    let r = i64::from(at.reach);
    let k = densities.len();
    let slab = (nx * ny) as usize;
    let mut out: Vec<Vec<f64>> = (0..k).map(|_| vec![0.0; grid.counts.len()]).collect();
    if slab == 0 {
        return out;
    }
    // Each thread fills whole z-slabs of every output.
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, 16);
    let slabs_per = (nz as usize).div_ceil(threads).max(1);
    let mut parts: Vec<Vec<&mut [f64]>> = Vec::new();
    {
        let mut rests: Vec<&mut [f64]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
        while rests.first().is_some_and(|r| !r.is_empty()) {
            let mut part = Vec::with_capacity(k);
            for rest in &mut rests {
                let take = (slabs_per * slab).min(rest.len());
                let (head, tail) = std::mem::take(rest).split_at_mut(take);
                *rest = tail;
                part.push(head);
            }
            parts.push(part);
        }
    }
    let self_overlap = at.value([0, 0, 0]);
    let side = 2 * r + 1;
    let values = &at.values;
    std::thread::scope(|scope| {
        for (i, mut part) in parts.into_iter().enumerate() {
            let z0 = (i * slabs_per) as i64;
            scope.spawn(move || {
                let mut sums = vec![0.0; k];
                let z1 = (z0 + slabs_per as i64).min(nz);
                for z in z0..z1 {
                    for y in 0..ny {
                        for x in 0..nx {
                            let q = (x + nx * (y + ny * z)) as usize;
                            if grid.counts[q] == 0 {
                                continue;
                            }
                            sums.fill(-self_overlap); // the particle itself
                            let (x0, x1) = ((x - r).max(0), (x + r).min(nx - 1));
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
                                    // Cells x0..=x1 of this row, and their table entries.
                                    let row = (nx * (yy + ny * zz)) as usize;
                                    let first =
                                        (((dz + r) * side + dy + r) * side + x0 - x + r) as usize;
                                    let cells = row + x0 as usize..=row + x1 as usize;
                                    let e = &values[first..=first + (x1 - x0) as usize];
                                    for (s, d) in sums.iter_mut().zip(densities) {
                                        // x + 0.0 == x: empty cells need no test.
                                        for (n, e) in d[cells.clone()].iter().zip(e) {
                                            *s += n * e;
                                        }
                                    }
                                }
                            }
                            let local = q - (z0 as usize) * slab;
                            for (o, s) in part.iter_mut().zip(&sums) {
                                o[local] = s.max(0.0);
                            }
                        }
                    }
                }
            });
        }
    });
    out
}

/// The memory model of a block of cells: `S_B = n_B S_p + S_n sum(expected) + S_aux`,
/// `S_aux = aux_factor * rmse * n_B * S_n` (the paper: 4.8 x RMSE).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FootprintModel {
    /// Bytes per particle (`S_p`).
    pub particle_bytes: f64,
    /// Bytes per stored neighbour (`S_n`).
    pub neighbour_bytes: f64,
    /// RMSE of the expected-neighbour estimate, neighbours per particle.
    pub rmse: f64,
    /// Safety factor on the RMSE. Default 4.8.
    pub aux_factor: f64,
}

impl FootprintModel {
    /// The paper's safety factor.
    pub const PAPER_AUX_FACTOR: f64 = 4.8;

    /// Bytes needed by a block of `particles` whose expected neighbours sum to
    /// `expected_sum`.
    pub fn block_bytes(&self, particles: u64, expected_sum: f64) -> f64 {
        let n = particles as f64;
        n * self.particle_bytes
            + self.neighbour_bytes * expected_sum
            + self.aux_factor * self.rmse * n * self.neighbour_bytes
    }
}

/// The packing correction: the ratio of measured to estimated neighbour
/// totals over a sample of cells, e.g. the first block searched, or a few
/// hundred cells counted exactly. Multiply later estimates by it.
///
/// The model assumes particles placed independently; packed grains exclude
/// each other, so interior cells hold fewer near neighbours than it predicts
/// (about 10 % at `eps / l = 1` in a settled pile). Each pair is
/// `(estimated, measured)`. Returns 1 when the sample estimates nothing.
pub fn calibration_factor(pairs: impl IntoIterator<Item = (f64, f64)>) -> f64 {
    let (estimated, measured) = pairs
        .into_iter()
        .fold((0.0, 0.0), |(e, m), (x, y)| (e + x, m + y));
    if estimated > 0.0 && measured.is_finite() {
        measured / estimated
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_is_the_ratio_of_totals() {
        assert_eq!(calibration_factor([(10.0, 9.0), (30.0, 27.0)]), 0.9);
        assert_eq!(calibration_factor([(0.0, 3.0)]), 1.0);
        assert_eq!(calibration_factor(std::iter::empty()), 1.0);
    }

    #[test]
    fn canonical_offsets_sort_absolute_values() {
        assert_eq!(canonical_offset([-2, 0, 1]), [0, 1, 2]);
        assert_eq!(canonical_offset([1, -1, -1]), [1, 1, 1]);
    }

    #[test]
    fn footprint_follows_the_paper() {
        let m = FootprintModel {
            particle_bytes: 32.0,
            neighbour_bytes: 4.0,
            rmse: 3.7,
            aux_factor: FootprintModel::PAPER_AUX_FACTOR,
        };
        // 1000 particles, 30 neighbours each.
        let bytes = m.block_bytes(1000, 30_000.0);
        assert!((bytes - (32_000.0 + 120_000.0 + 4.8 * 3.7 * 1000.0 * 4.0)).abs() < 1e-6);
    }
}
