//! Candidates gathered per cell into one padded list, and the full lists
//! of a set of cells searched that way.

use super::{LANES, Lanes, Points, Sink, query, scan};
use crate::grid::CellGrid;

/// Candidates gathered from several runs of sorted points into one
/// contiguous, padded list, so each query scans them in whole vectors.
/// Copies move [`LANES`] entries at a time (the buffers keep room for the
/// overrun, which the padding then covers).
#[derive(Debug, Default)]
pub(super) struct Candidates {
    xs: Vec<f32>,
    ys: Vec<f32>,
    zs: Vec<f32>,
    ids: Vec<u32>,
    locals: Vec<u32>,
    len: usize,
}

impl Candidates {
    pub(super) fn clear(&mut self) {
        self.len = 0;
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, size: usize) {
        let size = size.max(256).next_power_of_two();
        self.xs.resize(size, 0.0);
        self.ys.resize(size, 0.0);
        self.zs.resize(size, 0.0);
        self.ids.resize(size, 0);
        self.locals.resize(size, 0);
    }

    /// Appends sorted points `from..to` of `grid` with what the scan of
    /// these candidates writes: their input indices (`local` is `None`), or
    /// their box indices, the first being `local`.
    #[inline(always)]
    pub(super) fn push_run(
        &mut self,
        grid: &CellGrid,
        from: usize,
        to: usize,
        local: Option<usize>,
    ) {
        let n = to - from;
        if self.ids.len() < self.len + n + 2 * LANES {
            self.grow(self.len + n + 2 * LANES);
        }
        let mut k = 0;
        while k < n {
            let (d, s) = (self.len + k, from + k);
            self.xs[d..d + LANES].copy_from_slice(&grid.xs[s..s + LANES]);
            self.ys[d..d + LANES].copy_from_slice(&grid.ys[s..s + LANES]);
            self.zs[d..d + LANES].copy_from_slice(&grid.zs[s..s + LANES]);
            match local {
                None => self.ids[d..d + LANES].copy_from_slice(&grid.ids[s..s + LANES]),
                Some(local) => {
                    let l = (local + k) as u32;
                    for (j, v) in self.locals[d..d + LANES].iter_mut().enumerate() {
                        *v = l + j as u32;
                    }
                }
            }
            k += LANES;
        }
        self.len += n;
    }

    /// The padded view: `LANES` far-away points after the last.
    #[inline(always)]
    pub(super) fn view(&mut self) -> (Points<'_>, &[u32]) {
        let n = self.len;
        if self.ids.len() < n + 2 * LANES {
            self.grow(n + 2 * LANES);
        }
        for v in [&mut self.xs, &mut self.ys, &mut self.zs] {
            v[n..n + LANES].copy_from_slice(&[f32::INFINITY; LANES]);
        }
        (
            Points {
                xs: &self.xs,
                ys: &self.ys,
                zs: &self.zs,
                ids: &self.ids,
            },
            &self.locals,
        )
    }
}

/// The full lists of every point of `cells` (linear indices, in the order
/// given): per cell, the points of the 27 cells around it are gathered into
/// one padded list, and each point of the cell scans it (skipping itself).
#[inline(always)]
pub fn full_cells<L: Lanes>(
    grid: &CellGrid,
    cells: impl Iterator<Item = usize>,
    eps2: f64,
) -> crate::cpu::Lists {
    let mut lists = crate::cpu::Lists::default();
    let mut out = Sink::default();
    let mut cands = Candidates::default();
    let [nx, ny, nz] = grid.dims;
    for c in cells {
        let (c_from, c_to) = (grid.starts[c] as usize, grid.starts[c + 1] as usize);
        if c_from == c_to {
            continue;
        }
        let [x, y, z] = grid.coords(c);
        let (xa, xb) = (x.saturating_sub(1), (x + 1).min(nx - 1));
        cands.clear();
        let mut own_at = 0;
        for zz in z.saturating_sub(1)..=(z + 1).min(nz - 1) {
            for yy in y.saturating_sub(1)..=(y + 1).min(ny - 1) {
                let from = grid.starts[grid.index([xa, yy, zz])] as usize;
                let to = grid.starts[grid.index([xb, yy, zz]) + 1] as usize;
                if (yy, zz) == (y, z) {
                    own_at = cands.len() + c_from - from;
                }
                cands.push_run(grid, from, to, None);
            }
        }
        let n = cands.len();
        let (points, _) = cands.view();
        for (k, s) in (c_from..c_to).enumerate() {
            let p = query(grid, s);
            let before = out.len();
            scan::<L>(points, points.ids, 0, n, own_at + k, p, eps2, &mut out);
            lists.ids.push(grid.ids[s]);
            lists.counts.push((out.len() - before) as u32);
        }
    }
    lists.indices = out.into_vec();
    lists
}
