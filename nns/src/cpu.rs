//! The neighbour test and the CPU search: the reference every other path
//! must match, the boundary particles of GPU blocks, and the CPU-only mode.

use super::grid::{CellGrid, id_of};

/// Whether `a` and `b` are neighbours: `|a - b|^2 <= eps2`, with the
/// squared distance summed in f64 from the f32 coordinates (x, then y, then
/// z). This is the definition every path implements exactly.
#[inline]
pub fn within(a: &[f32; 4], b: &[f32; 4], eps2: f64) -> bool {
    let dx = f64::from(a[0]) - f64::from(b[0]);
    let dy = f64::from(a[1]) - f64::from(b[1]);
    let dz = f64::from(a[2]) - f64::from(b[2]);
    dx * dx + dy * dy + dz * dz <= eps2
}

/// Appends the input indices of the neighbours of sorted point `s` (in
/// cell `cell`) to `out`; the point itself is not its own neighbour.
pub fn neighbours_of(grid: &CellGrid, s: usize, cell: [u32; 3], eps2: f64, out: &mut Vec<u32>) {
    let p = &grid.sorted[s];
    let [nx, ny, nz] = grid.dims;
    let lo = cell.map(|c| c.saturating_sub(1));
    let hi = [
        (cell[0] + 1).min(nx - 1),
        (cell[1] + 1).min(ny - 1),
        (cell[2] + 1).min(nz - 1),
    ];
    for z in lo[2]..=hi[2] {
        for y in lo[1]..=hi[1] {
            // One contiguous run of sorted points per row of cells.
            let from = grid.starts[grid.index([lo[0], y, z])] as usize;
            let to = grid.starts[grid.index([hi[0], y, z]) + 1] as usize;
            for (j, q) in grid.sorted[from..to].iter().enumerate() {
                if from + j != s && within(p, q, eps2) {
                    out.push(id_of(q));
                }
            }
        }
    }
}

/// Neighbour lists of a set of sorted points, in the order given.
#[derive(Debug, Default)]
pub struct Lists {
    /// Input indices of the points.
    pub ids: Vec<u32>,
    /// Neighbours per point.
    pub counts: Vec<u32>,
    /// The lists, one after another.
    pub indices: Vec<u32>,
}

impl Lists {
    /// Appends the neighbours of sorted point `s` in cell `cell`.
    pub fn push(&mut self, grid: &CellGrid, s: usize, cell: [u32; 3], eps2: f64) {
        let before = self.indices.len();
        neighbours_of(grid, s, cell, eps2, &mut self.indices);
        self.ids.push(id_of(&grid.sorted[s]));
        self.counts.push((self.indices.len() - before) as u32);
    }
}

/// The lists of every point of the cells `cells` (linear indices).
pub fn search_cells(grid: &CellGrid, cells: &[usize], eps2: f64) -> Lists {
    let mut lists = Lists::default();
    for &c in cells {
        let coords = grid.coords(c);
        for s in grid.starts[c] as usize..grid.starts[c + 1] as usize {
            lists.push(grid, s, coords, eps2);
        }
    }
    lists
}

/// All pairs by brute force, O(n^2): the test reference. Returns, per input
/// point, its sorted neighbour list.
pub fn brute_force(points: &[[f32; 3]], radius: f32) -> Vec<Vec<u32>> {
    let eps2 = f64::from(radius) * f64::from(radius);
    let p: Vec<[f32; 4]> = points.iter().map(|q| [q[0], q[1], q[2], 0.0]).collect();
    (0..p.len())
        .map(|i| {
            (0..p.len())
                .filter(|&j| j != i && within(&p[i], &p[j], eps2))
                .map(|j| j as u32)
                .collect()
        })
        .collect()
}
