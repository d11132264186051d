//! The neighbour test and the CPU search: the reference every other path
//! must match, the boundary particles of GPU blocks, and the CPU-only mode.

use super::Neighbours;
use super::grid::CellGrid;
use super::kernel::{self, BoxIndex, HalfShell};
use super::simd;

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
    let mut sink = kernel::Sink::default();
    kernel::full_shell::<kernel::Portable>(grid, s, cell, eps2, &mut sink);
    out.extend_from_slice(&sink.into_vec());
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

/// The lists of every point of the cells `cells` (linear indices), each
/// point testing the 27 cells around it (vectorised: [`crate::simd`]).
pub fn search_cells(grid: &CellGrid, cells: &[usize], eps2: f64) -> Lists {
    simd::search_cells(grid, cells, eps2)
}

/// The lists of every point of the box of cells `lo..hi`, in the box's
/// order ([`BoxIndex`]), by the half-shell traversal on up to `threads`
/// threads: pairs inside the box are tested once and written into both
/// lists; pairs with points outside the box are tested from this side only.
/// The result does not depend on `threads`.
pub fn search_box(grid: &CellGrid, lo: [u32; 3], hi: [u32; 3], eps2: f64, threads: usize) -> Lists {
    let bx = BoxIndex::new(grid, lo, hi);
    if bx.is_empty() {
        return Lists::default();
    }
    let parts = half_shells(grid, &bx, eps2, threads);
    kernel::box_lists(&bx, &bx.ids(grid), &parts)
}

/// Every point's neighbours in the whole grid, as CSR in input order: the
/// half-shell traversal on `threads` threads, each pair tested once and
/// written into both lists. The result does not depend on `threads`.
pub fn search_all(grid: &CellGrid, eps2: f64, threads: usize) -> Neighbours {
    let bx = BoxIndex::new(grid, [0; 3], grid.dims);
    if bx.is_empty() {
        return Neighbours {
            offsets: vec![0],
            indices: Vec::new(),
        };
    }
    let parts = half_shells(grid, &bx, eps2, threads);
    kernel::input_order_lists(&bx, &grid.ids[..grid.len()], &parts)
}

/// The half-shell passes over box `bx`: runs of whole layers with about
/// equal points, one per thread.
fn half_shells(grid: &CellGrid, bx: &BoxIndex, eps2: f64, threads: usize) -> Vec<HalfShell> {
    let (lo, hi) = (bx.lo, bx.hi);
    let threads = threads.max(1);
    let n = bx.len();
    let mut cuts = vec![lo[2]];
    for t in 1..threads {
        let want = n * t / threads;
        let z = (lo[2]..hi[2])
            .find(|&z| bx.layer_base(z + 1) >= want)
            .map_or(hi[2], |z| z + 1);
        if z > *cuts.last().expect("cuts start with lo.z") && z < hi[2] {
            cuts.push(z);
        }
    }
    cuts.push(hi[2]);
    std::thread::scope(|scope| {
        let handles: Vec<_> = cuts
            .windows(2)
            .map(|w| {
                let (z0, z1) = (w[0], w[1]);
                scope.spawn(move || simd::half_shell(grid, bx, z0, z1, eps2))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("search threads do not panic"))
            .collect()
    })
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
