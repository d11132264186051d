//! The [`Lanes`] distance test of [`LANES`] candidates at a time, its
//! portable build, and the scans of runs of candidates built on it.

use super::{LANES, SINK_ROOM, Sink, query};
use crate::grid::CellGrid;

/// Coordinates and input indices of candidate points, with at least
/// [`LANES`] entries of padding after the last (far away, never
/// neighbours), so a vector of [`LANES`] may be loaded from any of them.
#[derive(Debug, Clone, Copy)]
pub struct Points<'a> {
    /// x per point.
    pub xs: &'a [f32],
    /// y per point.
    pub ys: &'a [f32],
    /// z per point.
    pub zs: &'a [f32],
    /// Input index per point.
    pub ids: &'a [u32],
}

impl<'a> Points<'a> {
    /// The sorted points of `grid`.
    pub fn of(grid: &'a CellGrid) -> Self {
        Self {
            xs: &grid.xs,
            ys: &grid.ys,
            zs: &grid.zs,
            ids: &grid.ids,
        }
    }
}

/// The distance test of [`LANES`] candidates at once, built per
/// instruction set ([`crate::simd`]). A candidate is a neighbour of query
/// `p` when the squared distance, summed in f64 from the f32 coordinates
/// (x, then y, then z), is at most `eps2`: exactly [`crate::cpu::within`].
pub trait Lanes {
    /// Bit `l` set when candidate `at + l` is a neighbour of `p`.
    fn mask(c: Points<'_>, at: usize, p: [f64; 3], eps2: f64) -> u32;

    /// Writes the entries of `values` (one step of [`LANES`]) whose bit is
    /// set in `m`, in order, to the start of `room` ([`SINK_ROOM`]
    /// entries: a vector build may store a whole register), and returns
    /// how many they are.
    #[inline(always)]
    fn append(values: &[u32], mut m: u32, room: &mut [u32]) -> usize {
        let mut k = 0;
        while m != 0 {
            room[k] = values[m.trailing_zeros() as usize];
            k += 1;
            m &= m - 1;
        }
        k
    }
}

/// Appends to `out`, in increasing order, `values[t]` of each neighbour `t`
/// of `p` among candidates `from..to` other than `skip` (`usize::MAX`:
/// none). The steps start at the one holding `from`, with the lanes before
/// it masked off, so the points of a cell run the same steps (a predictable
/// loop).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn scan<L: Lanes>(
    c: Points<'_>,
    values: &[u32],
    from: usize,
    to: usize,
    skip: usize,
    p: [f64; 3],
    eps2: f64,
    out: &mut Sink,
) {
    out.reserve(to.saturating_sub(from) + LANES);
    let (buf, mut len) = out.parts();
    let mut at = from - from % LANES;
    while at < to {
        let m = L::mask(c, at, p, eps2)
            & keep(to - at)
            & !keep(from.saturating_sub(at))
            & !unit(skip.wrapping_sub(at));
        len += L::append(&values[at..at + LANES], m, &mut buf[len..len + SINK_ROOM]);
        at += LANES;
    }
    out.set_len(len);
}

/// Bit `d` when `d` is a lane of a step, else nothing.
#[inline(always)]
pub fn unit(d: usize) -> u32 {
    if d < LANES { 1 << d } else { 0 }
}

/// The lanes of a step that lie before `to`, `left = to - at` ahead.
#[inline(always)]
pub fn keep(left: usize) -> u32 {
    (1u32 << left.min(LANES)) - 1
}

/// The portable test, one lane after another.
#[derive(Debug)]
pub struct Portable;

impl Lanes for Portable {
    #[inline(always)]
    fn mask(c: Points<'_>, at: usize, p: [f64; 3], eps2: f64) -> u32 {
        let x = &c.xs[at..at + LANES];
        let y = &c.ys[at..at + LANES];
        let z = &c.zs[at..at + LANES];
        let mut m = 0u32;
        for l in 0..LANES {
            let dx = p[0] - f64::from(x[l]);
            let dy = p[1] - f64::from(y[l]);
            let dz = p[2] - f64::from(z[l]);
            m |= u32::from(dx * dx + dy * dy + dz * dz <= eps2) << l;
        }
        m
    }
}

/// Appends the input indices of every neighbour of sorted point `s` (in
/// cell `cell`) to `out`, testing all 27 cells around it (the full shell;
/// for single points, sampled cells and block faces).
#[inline(always)]
pub fn full_shell<L: Lanes>(grid: &CellGrid, s: usize, cell: [u32; 3], eps2: f64, out: &mut Sink) {
    let p = query(grid, s);
    let points = Points::of(grid);
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
            scan::<L>(points, grid.ids.as_slice(), from, to, s, p, eps2, out);
        }
    }
}
