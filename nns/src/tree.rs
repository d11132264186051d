//! The workload tree: boxes of cells with their point counts and expected
//! neighbour counts (from the overlap table), split until each fits the
//! device budget. The leaves (the "front") are the blocks the GPU searches.

use super::NnsError;
use super::grid::CellGrid;

/// Bytes the GPU stores per point of a block: position and index (16),
/// cell (4), count (4), offset (4).
pub const POINT_BYTES: u64 = 28;
/// Bytes per stored neighbour index.
pub const NEIGHBOUR_BYTES: u64 = 4;
/// Bytes per cell of a block (its start).
pub const CELL_BYTES: u64 = 4;
/// Room for pairs within a hair of eps that the GPU hands back to the CPU
/// to decide exactly, for a block of `points` points: one per 4 points,
/// between 1024 and 2^20 (a block with more, such as a lattice searched at
/// exactly its spacing, is split like an overflowing block).
pub fn border_pairs(points: u64) -> u64 {
    (points / 4).clamp(1024, 1 << 20)
}

/// A box of cells `lo..hi` searched as one unit.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Block {
    /// First cell, per axis.
    pub lo: [u32; 3],
    /// One past the last cell, per axis.
    pub hi: [u32; 3],
    /// Points in the box.
    pub points: u64,
    /// Points whose whole search sphere lies in the box (the GPU's share).
    pub inner_points: u64,
    /// Expected neighbours of the inner points, summed.
    pub expected: f64,
    /// Estimated device footprint, bytes.
    pub estimated_bytes: u64,
}

impl Block {
    /// Cells in the box.
    pub fn cells(&self) -> u64 {
        (0..3).map(|k| u64::from(self.hi[k] - self.lo[k])).product()
    }

    /// The inner cells: the box less a one-cell layer on every side that
    /// does not lie on the grid's own boundary.
    pub fn inner(&self, dims: [u32; 3]) -> ([u32; 3], [u32; 3]) {
        let lo = std::array::from_fn(|k| self.lo[k] + u32::from(self.lo[k] > 0));
        let hi = std::array::from_fn(|k| (self.hi[k] - u32::from(self.hi[k] < dims[k])).max(lo[k]));
        (lo, hi)
    }
}

/// Inclusive 3-D prefix sums of `value(cell)` over a grid of `dims` cells,
/// with a zero layer in front on each axis: entry `(x, y, z)` of the
/// `(nx + 1) x (ny + 1) x (nz + 1)` table sums cells `0..x, 0..y, 0..z`.
fn prefix_sums<T>(dims: [u32; 3], value: impl Fn(usize) -> T) -> Vec<T>
where
    T: Copy + Default + std::ops::Add<Output = T> + std::ops::Sub<Output = T>,
{
    let [nx, ny, nz] = dims.map(|d| d as usize);
    let (sx, sy) = (nx + 1, ny + 1);
    let at = |x: usize, y: usize, z: usize| x + sx * (y + sy * z);
    let mut table = vec![T::default(); sx * sy * (nz + 1)];
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                table[at(x + 1, y + 1, z + 1)] = value(x + nx * (y + ny * z))
                    + table[at(x, y + 1, z + 1)]
                    + table[at(x + 1, y, z + 1)]
                    + table[at(x + 1, y + 1, z)]
                    - table[at(x, y, z + 1)]
                    - table[at(x, y + 1, z)]
                    - table[at(x + 1, y, z)]
                    + table[at(x, y, z)];
            }
        }
    }
    table
}

/// 3-D prefix sums of per-cell point counts and expected totals, for O(1)
/// box sums.
#[derive(Debug)]
pub struct Workload {
    dims: [u32; 3],
    counts: Vec<i64>,
    expected: Vec<f64>,
}

impl Workload {
    /// `expected[c]`: expected neighbours of one point of cell `c`.
    pub fn new(grid: &CellGrid, expected: &[f64]) -> Self {
        let points = |c: usize| i64::from(grid.starts[c + 1] - grid.starts[c]);
        Self {
            dims: grid.dims,
            counts: prefix_sums(grid.dims, points),
            expected: prefix_sums(grid.dims, |c| points(c) as f64 * expected[c]),
        }
    }

    fn sum<T>(&self, table: &[T], lo: [u32; 3], hi: [u32; 3]) -> T
    where
        T: Copy + std::ops::Add<Output = T> + std::ops::Sub<Output = T>,
    {
        let (sx, sy) = (self.dims[0] as usize + 1, self.dims[1] as usize + 1);
        let at = |x: u32, y: u32, z: u32| x as usize + sx * (y as usize + sy * z as usize);
        let [x0, y0, z0] = lo;
        let [x1, y1, z1] = hi;
        table[at(x1, y1, z1)]
            - table[at(x0, y1, z1)]
            - table[at(x1, y0, z1)]
            - table[at(x1, y1, z0)]
            + table[at(x0, y0, z1)]
            + table[at(x0, y1, z0)]
            + table[at(x1, y0, z0)]
            - table[at(x0, y0, z0)]
    }

    /// Points in cells `lo..hi`.
    pub fn points(&self, lo: [u32; 3], hi: [u32; 3]) -> u64 {
        if (0..3).any(|k| lo[k] >= hi[k]) {
            return 0;
        }
        self.sum(&self.counts, lo, hi).max(0) as u64
    }

    /// Expected neighbours of the points in cells `lo..hi`.
    pub fn expected(&self, lo: [u32; 3], hi: [u32; 3]) -> f64 {
        if (0..3).any(|k| lo[k] >= hi[k]) {
            return 0.0;
        }
        self.sum(&self.expected, lo, hi).max(0.0)
    }
}

/// How the device memory of a block is estimated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Footprint {
    /// Safety margin per inner point, neighbours: the paper's
    /// `4.8 x RMSE` of the estimate.
    pub aux_neighbours: f64,
    /// Largest buffer the device binds, bytes.
    pub max_binding: u64,
}

impl Footprint {
    /// Neighbour slots to allocate for a block's inner points.
    pub fn capacity(&self, inner_points: u64, expected: f64) -> u64 {
        (expected + self.aux_neighbours * inner_points as f64).ceil() as u64
    }

    /// The block for box `lo..hi`, with its counts and estimate.
    pub fn block(&self, work: &Workload, dims: [u32; 3], lo: [u32; 3], hi: [u32; 3]) -> Block {
        let mut b = Block {
            lo,
            hi,
            points: work.points(lo, hi),
            inner_points: 0,
            expected: 0.0,
            estimated_bytes: 0,
        };
        let (ilo, ihi) = b.inner(dims);
        b.inner_points = work.points(ilo, ihi);
        b.expected = work.expected(ilo, ihi);
        let out = self.capacity(b.inner_points, b.expected) * NEIGHBOUR_BYTES;
        b.estimated_bytes = b.points * POINT_BYTES
            + (b.cells() + 1) * CELL_BYTES
            + out
            + border_pairs(b.points) * 8
            + 256;
        b
    }

    /// Whether `b` fits `budget` bytes, every buffer within the binding limit.
    pub fn fits(&self, b: &Block, budget: u64) -> bool {
        let out = self.capacity(b.inner_points, b.expected) * NEIGHBOUR_BYTES;
        b.estimated_bytes <= budget
            && b.points * 16 <= self.max_binding
            && out <= self.max_binding
            && (b.cells() + 1) * CELL_BYTES <= self.max_binding
    }
}

/// Splits `b` in two across its longest side; `None` for a single cell.
pub fn split(
    b: &Block,
    work: &Workload,
    dims: [u32; 3],
    model: &Footprint,
) -> Option<(Block, Block)> {
    let k = (0..3).max_by_key(|&k| b.hi[k] - b.lo[k])?;
    if b.hi[k] - b.lo[k] < 2 {
        return None;
    }
    let mid = b.lo[k] + (b.hi[k] - b.lo[k]) / 2;
    let mut hi = b.hi;
    hi[k] = mid;
    let mut lo = b.lo;
    lo[k] = mid;
    Some((
        model.block(work, dims, b.lo, hi),
        model.block(work, dims, lo, b.hi),
    ))
}

/// The front of the workload tree: starting from the whole grid, every box
/// that does not fit `budget` is split in two across its longest side,
/// until each fits. Empty boxes are dropped.
pub fn plan_auto(
    work: &Workload,
    dims: [u32; 3],
    model: &Footprint,
    budget: u64,
) -> Result<Vec<Block>, NnsError> {
    let mut front = Vec::new();
    let mut stack = vec![model.block(work, dims, [0; 3], dims)];
    while let Some(b) = stack.pop() {
        if b.points == 0 {
            continue;
        }
        if model.fits(&b, budget) {
            front.push(b);
            continue;
        }
        match split(&b, work, dims, model) {
            Some((a, c)) => {
                stack.push(c);
                stack.push(a);
            }
            None => {
                return Err(NnsError::CellTooLarge {
                    points: b.points,
                    bytes: b.estimated_bytes,
                    budget,
                });
            }
        }
    }
    Ok(front)
}

/// Blocks of `side`^3 cells tiling the grid (the paper's fixed blocks).
pub fn plan_fixed(
    work: &Workload,
    dims: [u32; 3],
    model: &Footprint,
    budget: u64,
    side: u32,
) -> Result<Vec<Block>, NnsError> {
    let side = side.max(1);
    let mut blocks = Vec::new();
    for z in (0..dims[2]).step_by(side as usize) {
        for y in (0..dims[1]).step_by(side as usize) {
            for x in (0..dims[0]).step_by(side as usize) {
                let lo = [x, y, z];
                let hi = std::array::from_fn(|k| (lo[k] + side).min(dims[k]));
                let b = model.block(work, dims, lo, hi);
                if b.points == 0 {
                    continue;
                }
                if !model.fits(&b, budget) {
                    return Err(NnsError::FixedBlockTooLarge {
                        side,
                        at: lo,
                        bytes: b.estimated_bytes,
                        budget,
                    });
                }
                blocks.push(b);
            }
        }
    }
    Ok(blocks)
}
