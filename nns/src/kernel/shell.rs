//! A box of cells ([`BoxIndex`]) and the half-shell pass over its layers
//! ([`half_shell`]), which tests each pair once for both points.

use super::cells::Candidates;
use super::{Lanes, Sink, query, scan};
use crate::grid::CellGrid;

/// A box of cells `lo..hi` and where its points sit: rows of cells along x
/// are contiguous in the sorted order, and the box numbers its points row
/// after row (y, then z), so each layer of the box is a contiguous range of
/// local indices.
#[derive(Debug)]
pub struct BoxIndex {
    /// First cell, per axis.
    pub lo: [u32; 3],
    /// One past the last cell, per axis.
    pub hi: [u32; 3],
    /// Per row `(y - lo.y) + ny (z - lo.z)`: sorted index of its first point.
    row_start: Vec<u32>,
    /// Per row, and one more: local index of its first point.
    row_base: Vec<u32>,
}

impl BoxIndex {
    /// The rows of box `lo..hi` of `grid`.
    pub fn new(grid: &CellGrid, lo: [u32; 3], hi: [u32; 3]) -> Self {
        let rows = (hi[1] - lo[1]) as usize * (hi[2] - lo[2]) as usize;
        let mut row_start = Vec::with_capacity(rows);
        let mut row_base = Vec::with_capacity(rows + 1);
        let mut at = 0u32;
        for z in lo[2]..hi[2] {
            for y in lo[1]..hi[1] {
                let from = grid.starts[grid.index([lo[0], y, z])];
                let to = grid.starts[grid.index([hi[0] - 1, y, z]) + 1];
                row_start.push(from);
                row_base.push(at);
                at += to - from;
            }
        }
        row_base.push(at);
        Self {
            lo,
            hi,
            row_start,
            row_base,
        }
    }

    /// Points in the box.
    pub fn len(&self) -> usize {
        *self.row_base.last().expect("one base more than rows") as usize
    }

    /// Whether the box holds no points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn rows_per_layer(&self) -> usize {
        (self.hi[1] - self.lo[1]) as usize
    }

    /// Local index of the first point of box layer `z` (`lo.z..=hi.z`).
    pub fn layer_base(&self, z: u32) -> usize {
        self.row_base[(z - self.lo[2]) as usize * self.rows_per_layer()] as usize
    }

    fn row(&self, y: u32, z: u32) -> usize {
        (y - self.lo[1]) as usize + self.rows_per_layer() * (z - self.lo[2]) as usize
    }

    /// Input indices of the box's points, in local order.
    pub fn ids(&self, grid: &CellGrid) -> Vec<u32> {
        let mut ids = Vec::with_capacity(self.len());
        for (r, &from) in self.row_start.iter().enumerate() {
            let len = (self.row_base[r + 1] - self.row_base[r]) as usize;
            ids.extend_from_slice(&grid.ids[from as usize..from as usize + len]);
        }
        ids
    }

    fn contains_row(&self, y: u32, z: u32) -> bool {
        y >= self.lo[1] && y < self.hi[1] && z >= self.lo[2] && z < self.hi[2]
    }
}

/// An index into one thread's pair buffer (at most `u32::MAX` entries: 16
/// GiB of pairs, more than a thread's share of memory ever holds).
pub(super) fn entry_index(len: usize) -> u32 {
    u32::try_from(len).expect("fewer than 2^32 pairs per search thread")
}

/// What one thread's half-shell pass over box layers `z0..z1` found.
#[derive(Debug, Default)]
pub struct HalfShell {
    /// The box layers searched, `z0..z1`.
    pub layers: (u32, u32),
    /// Local index of the first point of the layers.
    pub first: usize,
    /// Point `i` of the layers found `own[own_at[i]..own_at[i + 1]]`
    /// outside the box (one entry more than points).
    pub own_at: Vec<u32>,
    /// Those neighbours' input indices, point after point.
    pub own: Vec<u32>,
    /// Point `i`'s neighbours later in the box (each pair found once, for
    /// both lists) are `edges[edge_at[i]..edge_at[i + 1]]`.
    pub edge_at: Vec<u32>,
    /// Those partners' local indices, point after point: first those in
    /// the point's own layer, up to `edge_mid[i]`, then those in the next.
    pub edges: Vec<u32>,
    /// Where each point's partners in the next layer begin.
    pub edge_mid: Vec<u32>,
}

/// The half-shell pass over the points of box layers `z0..z1`: each point
/// tests the later points of its own cell and of the 13 cells after it (in
/// x, then y, then z order) that lie in the box, recording each pair once
/// for both points; and every point of the cells around it that lies
/// outside the box, recording those for itself only (the other side finds
/// them from its own box). Two sparse cells side by side along x share one
/// gathered list of candidates ([`SPAN_POINTS`]): a superset of each
/// point's cells, in the same order, so the lists found are the same.
#[inline(always)]
pub fn half_shell<L: Lanes>(
    grid: &CellGrid,
    bx: &BoxIndex,
    z0: u32,
    z1: u32,
    eps2: f64,
) -> HalfShell {
    let first = bx.layer_base(z0);
    let end = bx.layer_base(z1);
    // Generous: untouched capacity costs no memory (the pages are never
    // written), and growing would copy.
    let mut own = Sink::with_capacity(if bx.lo == [0; 3] && bx.hi == grid.dims {
        0
    } else {
        (end - first) * 4
    });
    let mut edges = Sink::with_capacity((end - first) * 16);
    let mut out = HalfShell {
        layers: (z0, z1),
        first,
        own_at: Vec::with_capacity(end - first + 1),
        own: Vec::new(),
        edge_at: Vec::with_capacity(end - first + 1),
        edges: Vec::new(),
        edge_mid: Vec::with_capacity(end - first),
    };
    out.own_at.push(0);
    out.edge_at.push(0);
    let [nx, ny, nz] = grid.dims;
    let (lo, hi) = (bx.lo, bx.hi);
    // Per cell: the box's later points (its own points first) and the
    // points outside the box, each gathered into one padded list.
    let mut pairs = Candidates::default();
    let mut outside = Candidates::default();
    for z in z0..z1 {
        for y in lo[1]..hi[1] {
            let mut x_next = lo[0];
            while x_next < hi[0] {
                // A span of one cell, or two sparse ones, along x: x..x_end.
                let x = x_next;
                let start = |x: u32| grid.starts[grid.index([x, y, z])] as usize;
                let x_end = if x + 1 < hi[0] && start(x + 2) - start(x) <= SPAN_POINTS {
                    x + 2
                } else {
                    x + 1
                };
                x_next = x_end;
                let (c_from, c_to) = (start(x), start(x_end));
                if c_from == c_to {
                    continue;
                }
                pairs.clear();
                outside.clear();
                let touches_outside = (x == lo[0] && lo[0] > 0)
                    || (x_end == hi[0] && hi[0] < nx)
                    || reaches_out(y, lo[1], hi[1], ny)
                    || reaches_out(z, lo[2], hi[2], nz);
                let xa = x.saturating_sub(1);
                let xb = x_end.min(nx - 1);
                // This layer's candidates, then the next layer's.
                let mut n_same = 0;
                for dz in 0i32..=1 {
                    if dz == 1 {
                        n_same = pairs.len();
                    }
                    for dy in -1i32..=1 {
                        let (yy, zz) = (y as i32 + dy, z as i32 + dz);
                        if yy < 0 || yy >= ny as i32 || zz >= nz as i32 || (dz, dy) < (0, 0) {
                            continue;
                        }
                        let (yy, zz) = (yy as u32, zz as u32);
                        if !bx.contains_row(yy, zz) {
                            continue;
                        }
                        // The span's points come first: the row starts at x.
                        let ia = if dz == 0 && dy == 0 { x } else { xa.max(lo[0]) };
                        let ib = xb.min(hi[0] - 1);
                        let from = grid.starts[grid.index([ia, yy, zz])] as usize;
                        let to = grid.starts[grid.index([ib, yy, zz]) + 1] as usize;
                        let r = bx.row(yy, zz);
                        let local = bx.row_base[r] as usize + from - bx.row_start[r] as usize;
                        pairs.push_run(grid, from, to, Some(local));
                    }
                }
                // Points outside the box, in all 26 directions (none when
                // the cells around lie in the box or off the grid).
                for dz in -1i32..=1 {
                    if !touches_outside {
                        break;
                    }
                    let zz = z as i32 + dz;
                    if zz < 0 || zz >= nz as i32 {
                        continue;
                    }
                    for dy in -1i32..=1 {
                        let yy = y as i32 + dy;
                        if yy < 0 || yy >= ny as i32 {
                            continue;
                        }
                        let (yy, zz) = (yy as u32, zz as u32);
                        let span = |a: u32, b: u32| {
                            (
                                grid.starts[grid.index([a, yy, zz])] as usize,
                                grid.starts[grid.index([b, yy, zz]) + 1] as usize,
                            )
                        };
                        if !bx.contains_row(yy, zz) {
                            let (from, to) = span(xa, xb);
                            outside.push_run(grid, from, to, None);
                            continue;
                        }
                        if xa < lo[0] {
                            let (from, to) = span(xa, xa);
                            outside.push_run(grid, from, to, None);
                        }
                        if xb >= hi[0] {
                            let (from, to) = span(xb, xb);
                            outside.push_run(grid, from, to, None);
                        }
                    }
                }
                let (n_pairs, n_outside) = (pairs.len(), outside.len());
                let (pair_points, locals) = pairs.view();
                let (outside_points, _) = outside.view();
                for (k, s) in (c_from..c_to).enumerate() {
                    let p = query(grid, s);
                    // The candidates after s: its cell's later points and on.
                    scan::<L>(
                        pair_points,
                        locals,
                        k + 1,
                        n_same,
                        usize::MAX,
                        p,
                        eps2,
                        &mut edges,
                    );
                    out.edge_mid.push(entry_index(edges.len()));
                    scan::<L>(
                        pair_points,
                        locals,
                        n_same,
                        n_pairs,
                        usize::MAX,
                        p,
                        eps2,
                        &mut edges,
                    );
                    if n_outside > 0 {
                        scan::<L>(
                            outside_points,
                            outside_points.ids,
                            0,
                            n_outside,
                            usize::MAX,
                            p,
                            eps2,
                            &mut own,
                        );
                    }
                    out.own_at.push(entry_index(own.len()));
                    out.edge_at.push(entry_index(edges.len()));
                }
            }
        }
    }
    out.own = own.into_vec();
    out.edges = edges.into_vec();
    out
}

/// Two neighbouring cells along x holding at most this many points are
/// searched together by [`half_shell`]: their points share one gathered
/// list of candidates (the cells around both), which costs a third more
/// distance tests per point but half the lists. Sparse cells gain (at nine
/// neighbours per point a cell holds about two, and gathering the list
/// costs more than its tests); dense ones would lose.
const SPAN_POINTS: usize = 8;

/// Whether cell `c` of a box `lo..hi` along one axis of `n` cells has a
/// neighbouring cell outside the box but on the grid.
#[inline(always)]
fn reaches_out(c: u32, lo: u32, hi: u32, n: u32) -> bool {
    (c == lo && lo > 0) || (c + 1 == hi && hi < n)
}

impl HalfShell {
    /// Points of the layers this pass searched.
    pub fn len(&self) -> usize {
        self.own_at.len() - 1
    }

    /// Whether the layers held no points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Point `i`'s partners later in the box.
    #[inline(always)]
    pub fn edges_of(&self, i: usize) -> &[u32] {
        &self.edges[self.edge_at[i] as usize..self.edge_at[i + 1] as usize]
    }

    /// Point `i`'s partners in its own layer.
    #[inline(always)]
    pub fn same_layer_edges(&self, i: usize) -> &[u32] {
        &self.edges[self.edge_at[i] as usize..self.edge_mid[i] as usize]
    }

    /// Point `i`'s partners in the next layer.
    #[inline(always)]
    pub fn next_layer_edges(&self, i: usize) -> &[u32] {
        &self.edges[self.edge_mid[i] as usize..self.edge_at[i + 1] as usize]
    }

    /// Index (in the part) of the first point of the part's last layer.
    pub(super) fn last_layer(&self, bx: &BoxIndex) -> usize {
        bx.layer_base(self.layers.1 - 1) - self.first
    }

    /// Point `i`'s neighbours outside the box.
    #[inline(always)]
    pub fn own_of(&self, i: usize) -> &[u32] {
        &self.own[self.own_at[i] as usize..self.own_at[i + 1] as usize]
    }

    /// How many neighbours point `i` found itself.
    #[inline(always)]
    pub fn found(&self, i: usize) -> usize {
        (self.own_at[i + 1] - self.own_at[i] + self.edge_at[i + 1] - self.edge_at[i]) as usize
    }

    /// One past the local index of the last point searched.
    pub fn end(&self) -> usize {
        self.first + self.len()
    }
}
