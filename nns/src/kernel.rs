//! The CPU search: the exact distance test over runs of sorted points,
//! [`LANES`] candidates at a time, and the half-shell traversal of a box of
//! cells that tests each pair once and writes it into both points' lists.
//!
//! Functions marked `#[inline(always)]` here are compiled once per
//! instruction set by [`crate::simd`] (AVX-512, AVX2, portable), which the
//! compiler vectorises; every build computes the same f64 sums in the same
//! order (no fused multiply-add), so every build finds the same pairs.

use super::grid::CellGrid;
use super::simd::{advise_huge_pages, huge_vec, huge_zeroed};

/// Candidates tested per step: one AVX-512 vector of f32 (four AVX2
/// vectors of f64).
pub const LANES: usize = 16;

/// A point's coordinates widened to f64, exactly.
#[inline(always)]
pub fn query(grid: &CellGrid, s: usize) -> [f64; 3] {
    [
        f64::from(grid.xs[s]),
        f64::from(grid.ys[s]),
        f64::from(grid.zs[s]),
    ]
}

/// Output that grows in steps of up to [`SINK_ROOM`] entries: a vector
/// build may store a whole register and keep only the entries it counts.
#[derive(Debug, Default)]
pub struct Sink {
    buf: Vec<u32>,
    len: usize,
}

/// Entries a vector build may write past the end of a [`Sink`] at once.
pub const SINK_ROOM: usize = 16;

/// Entries a [`Sink`] clears at a time within its reserved room (64 KiB).
const SINK_STEP: usize = 16 * 1024;

impl Sink {
    /// An empty sink with room for about `n` entries: reserved, not
    /// written (the buffer is cleared [`SINK_STEP`] entries at a time as it
    /// fills, while those are about to be written anyway).
    pub fn with_capacity(n: usize) -> Self {
        let mut buf = Vec::with_capacity(n + SINK_ROOM);
        advise_huge_pages(buf.spare_capacity_mut());
        Self { buf, len: 0 }
    }

    /// Entries kept.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes room for `n` more entries and the [`SINK_ROOM`] slots of a
    /// store after them (called before a loop, so the loop calls nothing).
    #[inline(always)]
    pub fn reserve(&mut self, n: usize) {
        if self.buf.len() < self.len + n + SINK_ROOM {
            self.grow(n);
        }
    }

    /// The whole buffer and the count of entries kept: a loop appends
    /// through [`Lanes::append`] with the count in a local (a register, not
    /// a store and a reload per step) and hands it back with
    /// [`Sink::set_len`].
    #[inline(always)]
    pub fn parts(&mut self) -> (&mut [u32], usize) {
        (&mut self.buf, self.len)
    }

    /// Keeps the first `len` entries of the buffer [`Sink::parts`] gave
    /// (panics past the buffer).
    #[inline(always)]
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.buf.len());
        self.len = len;
    }

    /// Appends one entry (reserved before: panics otherwise).
    #[inline(always)]
    pub fn push(&mut self, v: u32) {
        self.buf[self.len] = v;
        self.len += 1;
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: usize) {
        let need = self.len + n + SINK_ROOM;
        let size = if need <= self.buf.capacity() {
            // Within the reserved room: clear one more step of it.
            (self.buf.len() + SINK_STEP)
                .max(need)
                .min(self.buf.capacity())
        } else {
            (self.buf.len() * 2).max(need)
        };
        self.buf.resize(size, 0);
    }

    /// The kept entries.
    pub fn into_vec(mut self) -> Vec<u32> {
        self.buf.truncate(self.len);
        self.buf
    }
}

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

/// Candidates gathered from several runs of sorted points into one
/// contiguous, padded list, so each query scans them in whole vectors.
/// Copies move [`LANES`] entries at a time (the buffers keep room for the
/// overrun, which the padding then covers).
#[derive(Debug, Default)]
struct Candidates {
    xs: Vec<f32>,
    ys: Vec<f32>,
    zs: Vec<f32>,
    ids: Vec<u32>,
    locals: Vec<u32>,
    len: usize,
}

impl Candidates {
    fn clear(&mut self) {
        self.len = 0;
    }

    fn len(&self) -> usize {
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
    fn push_run(&mut self, grid: &CellGrid, from: usize, to: usize, local: Option<usize>) {
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
    fn view(&mut self) -> (Points<'_>, &[u32]) {
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
) -> super::cpu::Lists {
    let mut lists = super::cpu::Lists::default();
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
fn entry_index(len: usize) -> u32 {
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
    fn last_layer(&self, bx: &BoxIndex) -> usize {
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

/// Calls `found(t, l)` for each pair that a point `l` of `part`'s last
/// layer (`last_layer_only`) or of the whole part recorded with a later
/// point `t` of the box, in increasing `l`.
fn each_edge(
    bx: &BoxIndex,
    part: &HalfShell,
    last_layer_only: bool,
    mut found: impl FnMut(usize, usize),
) {
    let from = if last_layer_only {
        bx.layer_base(part.layers.1 - 1) - part.first
    } else {
        0
    };
    for i in from..part.len() {
        for &t in part.edges_of(i) {
            found(t as usize, part.first + i);
        }
    }
}

/// Each point's list length, in box order: what it found outside the box,
/// what it found later in the box, and how many earlier points (of its
/// part, or of the last layer of the part before) found it. `parts` cover
/// the box's layers one after another, each at least one layer; each part
/// is counted by its own thread.
pub fn list_lengths(bx: &BoxIndex, parts: &[HalfShell]) -> Vec<u32> {
    let mut counts = huge_zeroed::<u32>(bx.len());
    std::thread::scope(|scope| {
        let mut rest: &mut [u32] = &mut counts;
        for (k, part) in parts.iter().enumerate() {
            let (mine, tail) = std::mem::take(&mut rest).split_at_mut(part.len());
            rest = tail;
            let before = k.checked_sub(1).map(|j| &parts[j]);
            scope.spawn(move || {
                for (i, c) in mine.iter_mut().enumerate() {
                    *c = part.found(i) as u32;
                }
                let first = part.first;
                // Partners in the same layer are in this part, and so are
                // those in the next layer, but from the part's last layer;
                // the last layer of the part before reaches this part's first.
                // Before the last layer, every partner counts: one flat pass
                // over those pairs (no loop per point, whose varying length
                // the branch predictor would miss).
                let last = part.last_layer(bx);
                for &t in &part.edges[..part.edge_at[last] as usize] {
                    mine[t as usize - first] += 1;
                }
                for i in last..part.len() {
                    for &t in part.same_layer_edges(i) {
                        mine[t as usize - first] += 1;
                    }
                }
                if let Some(b) = before {
                    for i in b.last_layer(bx)..b.len() {
                        for &t in b.next_layer_edges(i) {
                            mine[t as usize - first] += 1;
                        }
                    }
                }
            });
        }
    });
    counts
}

/// Writes the list of box point `l` after its earlier finders: the later
/// points it found, then those outside the box. `ids[local]` is a box
/// point's input index.
#[inline(always)]
fn write_found(part: &HalfShell, i: usize, ids: &[u32], out: &mut [u32]) {
    let edges = part.edges_of(i);
    let own = part.own_of(i);
    let (fwd, rest) = out.split_at_mut(edges.len());
    for (o, &t) in fwd.iter_mut().zip(edges) {
        *o = ids[t as usize];
    }
    rest[..own.len()].copy_from_slice(own);
}

/// The box's lists in box order (CSR with the points' input indices): each
/// point's list is the earlier points of the box that found it, in box
/// order, then the later points it found, then those outside the box. The
/// result does not depend on how the layers were cut into parts; each
/// part's lists are written by its own thread.
pub fn box_lists(bx: &BoxIndex, ids: &[u32], parts: &[HalfShell]) -> super::cpu::Lists {
    let counts = list_lengths(bx, parts);
    let mut offsets = Vec::with_capacity(counts.len() + 1);
    let mut at = 0usize;
    offsets.push(0);
    for &c in &counts {
        at += c as usize;
        offsets.push(at);
    }
    let mut indices = vec![0u32; at];
    std::thread::scope(|scope| {
        let mut rest: &mut [u32] = &mut indices;
        for (k, part) in parts.iter().enumerate() {
            let (first, end) = (part.first, part.end());
            let (mine, tail) =
                std::mem::take(&mut rest).split_at_mut(offsets[end] - offsets[first]);
            rest = tail;
            let offsets = &offsets[first..=end];
            let counts = &counts[first..end];
            let before = k.checked_sub(1).map(|j| &parts[j]);
            scope.spawn(move || {
                let base = offsets[0];
                let mut cursor: Vec<usize> = offsets[..offsets.len() - 1]
                    .iter()
                    .map(|&o| o - base)
                    .collect();
                // The earlier points that found each point, in box order.
                let mut back = |t: usize, l: usize| {
                    if t >= first && t < end {
                        let c = &mut cursor[t - first];
                        mine[*c] = ids[l];
                        *c += 1;
                    }
                };
                if let Some(b) = before {
                    each_edge(bx, b, true, &mut back);
                }
                each_edge(bx, part, false, &mut back);
                // Then what each point found itself.
                for i in 0..part.len() {
                    let at = cursor[i];
                    let to = offsets[i + 1] - base;
                    debug_assert!(to - at <= counts[i] as usize);
                    write_found(part, i, ids, &mut mine[at..to]);
                }
            });
        }
    });
    super::cpu::Lists {
        ids: ids.to_vec(),
        counts,
        indices,
    }
}

/// The lists of every point of the grid, from the half-shell passes over
/// the whole grid (box order is the sorted order, `ids` the grid's), as
/// CSR in input order: each point's list as in [`box_lists`]. Each part's
/// thread completes its points layer by layer (the earlier finders of a
/// layer's points lie in that layer and the one before, so a small buffer
/// per layer transposes them) and writes each list once, whole, at its
/// place in the output.
pub fn input_order_lists(bx: &BoxIndex, ids: &[u32], parts: &[HalfShell]) -> super::Neighbours {
    let n = bx.len();
    let counts = list_lengths(bx, parts);
    let threads = parts.len().max(1);
    let chunk = n.div_ceil(threads).max(1);
    // Counts in input order: scattered by every thread at once (each index
    // is written once; relaxed atomic stores are plain stores on x86).
    let by_input: Vec<std::sync::atomic::AtomicU32> = {
        let mut v = Vec::with_capacity(n);
        advise_huge_pages(v.spare_capacity_mut());
        v.resize_with(n, || std::sync::atomic::AtomicU32::new(0));
        v
    };
    std::thread::scope(|scope| {
        for (mine, ids) in counts.chunks(chunk).zip(ids.chunks(chunk)) {
            let by_input = &by_input;
            scope.spawn(move || {
                for (&c, &id) in mine.iter().zip(ids) {
                    by_input[id as usize].store(c, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    // Their prefix sum, in parallel: each thread's total, then its run of
    // offsets from the totals before it.
    let load =
        |c: &std::sync::atomic::AtomicU32| u64::from(c.load(std::sync::atomic::Ordering::Relaxed));
    let totals: Vec<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = by_input
            .chunks(chunk)
            .map(|mine| scope.spawn(move || mine.iter().map(load).sum::<u64>()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("prefix threads do not panic"))
            .collect()
    });
    let at: u64 = totals.iter().sum();
    let mut offsets = huge_vec(n + 1, 0u64);
    offsets[n] = at;
    std::thread::scope(|scope| {
        let mut base = 0;
        for ((mine, out), total) in by_input
            .chunks(chunk)
            .zip(offsets.chunks_mut(chunk))
            .zip(&totals)
        {
            let from = base;
            base += total;
            scope.spawn(move || {
                let mut at = from;
                for (c, o) in mine.iter().zip(out) {
                    *o = at;
                    at += load(c);
                }
            });
        }
    });
    drop(by_input);
    // Each point's slot, in box order: random reads, but independent ones
    // in tight loops on every thread (the fill below then reads them in
    // order).
    let mut slots = huge_vec(n, 0u64);
    std::thread::scope(|scope| {
        for (mine, ids) in slots.chunks_mut(chunk).zip(ids.chunks(chunk)) {
            let offsets = &offsets;
            scope.spawn(move || {
                for (s, &id) in mine.iter_mut().zip(ids) {
                    *s = offsets[id as usize];
                }
            });
        }
    });
    let mut indices = huge_zeroed::<u32>(at as usize);
    {
        let out = super::simd::DisjointLists::new(&mut indices);
        std::thread::scope(|scope| {
            for (k, part) in parts.iter().enumerate() {
                let before = k.checked_sub(1).map(|j| &parts[j]);
                let (out, slots, counts) = (&out, &slots, &counts);
                scope.spawn(move || {
                    let mut back = WindowBack::default();
                    let (mut z, mut lo) = (part.layers.0, 0);
                    while lo < part.len() {
                        // A window of whole layers, at least WINDOW_PAIRS pairs.
                        let mut hi = lo;
                        while hi < part.len()
                            && ((part.edge_at[hi] - part.edge_at[lo]) as usize) < WINDOW_PAIRS
                        {
                            z += 1;
                            hi = bx.layer_base(z) - part.first;
                        }
                        back.transpose(bx, before, part, (lo, hi), ids, counts);
                        for i in lo..hi {
                            let l = part.first + i;
                            // The slot of a list a few points ahead.
                            if let Some(&ahead) = slots.get(l + PREFETCH_AHEAD) {
                                out.prefetch(ahead as usize);
                                out.prefetch(ahead as usize + 15);
                            }
                            let written = out.write_list(
                                slots[l] as usize,
                                back.of(i - lo),
                                part.edges_of(i),
                                ids,
                                part.own_of(i),
                            );
                            assert_eq!(written, counts[l] as usize, "list length of point {l}");
                        }
                        lo = hi;
                    }
                });
            }
        });
    }
    super::Neighbours { offsets, indices }
}

/// How many points ahead the output slot of a list is prefetched (the
/// slots follow the input order, so each is a cache miss).
const PREFETCH_AHEAD: usize = 64;

/// The earlier finders of a window of one part's points (whole layers,
/// in box order), transposed from the pairs found by the layer before the
/// window and by the window's own points. The buffers are kept from one
/// window to the next.
#[derive(Debug, Default)]
struct WindowBack {
    /// Window point `i`'s finders are `found[at[i]..at[i + 1]]`.
    at: Vec<usize>,
    /// The finders.
    found: Vec<u32>,
    /// Where each window point's next finder goes.
    cursor: Vec<u32>,
    /// Each pair's finder, pair by pair.
    finder: Vec<u32>,
}

/// Pairs found by a window of [`WindowBack`] at least (whole layers): its
/// buffers take 8 bytes per pair (32 MiB), so that memory stays bounded
/// on any input while each window's passes stay long and flat. (Small in
/// this crate's tests, so that their searches cross many windows.)
const WINDOW_PAIRS: usize = if cfg!(test) { 256 } else { 4 << 20 };

/// The last layer of the window of `part` that ends at point `hi` (an
/// index in the part, at the end of a layer).
fn window_last_layer(bx: &BoxIndex, part: &HalfShell, hi: usize) -> u32 {
    (part.layers.0..part.layers.1)
        .rev()
        .find(|&z| bx.layer_base(z) - part.first < hi)
        .expect("a window holds a point")
}

/// Entries [`WindowBack::transpose`] writes at once when it labels each
/// pair with its finder.
const LABEL: usize = 16;

impl WindowBack {
    /// The finders of `part`'s points `lo..hi` (indices in the part, whole
    /// layers; `before` is the part before).
    fn transpose(
        &mut self,
        bx: &BoxIndex,
        before: Option<&HalfShell>,
        part: &HalfShell,
        (lo, hi): (usize, usize),
        ids: &[u32],
        counts: &[u32],
    ) {
        let (len, first) = (hi - lo, part.first + lo);
        // Each point's finders: its list length less what it found.
        self.at.clear();
        self.at.push(0);
        let mut sum = 0;
        for i in lo..hi {
            sum += counts[part.first + i] as usize - part.found(i);
            self.at.push(sum);
        }
        if self.found.len() < sum {
            self.found.resize(sum, 0);
        }
        self.cursor.clear();
        self.cursor
            .extend(self.at[..len].iter().map(|&a| entry_index(a)));
        // Finders in the layer before the window (in this part, or the
        // last layer of the part before), in box order: the pairs they
        // found in the next layer.
        let layer_before = if lo > 0 {
            let z = (part.layers.0..part.layers.1)
                .find(|&z| bx.layer_base(z + 1) - part.first == lo)
                .expect("windows are whole layers");
            Some((part, bx.layer_base(z) - part.first, lo))
        } else {
            before.map(|b| (b, b.last_layer(bx), b.len()))
        };
        let (cursor, found) = (&mut self.cursor, &mut self.found);
        if let Some((src, l0, l1)) = layer_before {
            for l in l0..l1 {
                for &t in src.next_layer_edges(l) {
                    let c = &mut cursor[t as usize - first];
                    found[*c as usize] = ids[src.first + l];
                    *c += 1;
                }
            }
        }
        // Then the window's own pairs: before its last layer all of them,
        // in one flat pass (each pair labelled with its finder first,
        // sixteen labels at a time: no loop per point, whose varying length
        // the branch predictor would miss); in the last layer those within
        // it.
        let last = bx.layer_base(window_last_layer(bx, part, hi)) - part.first;
        let (base, end) = (part.edge_at[lo] as usize, part.edge_at[last] as usize);
        if self.finder.len() < end - base + LABEL {
            self.finder.resize(end - base + LABEL, 0);
        }
        for l in lo..last {
            let from = part.edge_at[l] as usize - base;
            let to = part.edge_at[l + 1] as usize - base;
            let id = ids[part.first + l];
            let mut e = from;
            loop {
                self.finder[e..e + LABEL].fill(id);
                e += LABEL;
                if e >= to {
                    break;
                }
            }
        }
        for (&t, &id) in part.edges[base..end].iter().zip(&self.finder) {
            let c = &mut cursor[t as usize - first];
            found[*c as usize] = id;
            *c += 1;
        }
        for l in last..hi {
            for &t in part.same_layer_edges(l) {
                let c = &mut cursor[t as usize - first];
                found[*c as usize] = ids[part.first + l];
                *c += 1;
            }
        }
    }

    /// The finders of the window's point `i`, in box order.
    fn of(&self, i: usize) -> &[u32] {
        &self.found[self.at[i]..self.at[i + 1]]
    }
}

#[cfg(test)]
mod tests {
    use super::super::cpu::{Lists, brute_force, search_all, search_box};
    use super::super::grid::CellGrid;

    fn points(n: usize, seed: u64) -> Vec<[f32; 3]> {
        let mut state = seed;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 24) as f32
        };
        (0..n)
            .map(|_| [next() * 4.0, next() * 3.0, next() * 5.0])
            .collect()
    }

    /// Per input index, the sorted list from `lists`.
    fn by_id(lists: &Lists, n: usize) -> Vec<Option<Vec<u32>>> {
        let mut out = vec![None; n];
        let mut at = 0;
        for (&id, &c) in lists.ids.iter().zip(&lists.counts) {
            let mut l = lists.indices[at..at + c as usize].to_vec();
            l.sort_unstable();
            out[id as usize] = Some(l);
            at += c as usize;
        }
        out
    }

    /// Pairs of points a few f32 steps either side of `radius` apart, along
    /// random directions, scattered through a box `spread` wide.
    fn borderline(radius: f32, spread: f32) -> Vec<[f32; 3]> {
        let centres = points(1500, 3);
        let dirs = points(1500, 5);
        let mut pts = Vec::new();
        for (k, (a, d)) in centres.iter().zip(&dirs).enumerate() {
            let a = a.map(|v| v * spread);
            let d = d.map(|v| v - 2.0);
            let len = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt().max(1e-3);
            let step = 1.0 + ((k % 9) as f32 - 4.0) * f32::EPSILON;
            pts.push(a);
            pts.push(std::array::from_fn(|i| a[i] + d[i] / len * radius * step));
        }
        pts
    }

    #[test]
    fn pairs_within_rounding_of_eps_are_decided_as_the_f64_sum_decides() {
        // An ordinary radius (the f32 test with borderline candidates
        // decided in f64) and radii whose squares leave the f32 test's
        // range (every candidate in f64).
        for (radius, spread) in [(0.45, 1.0), (3e-16, 1e-15), (2e15, 3e15)] {
            let pts = borderline(radius, spread);
            let eps2 = f64::from(radius) * f64::from(radius);
            let truth = brute_force(&pts, radius);
            let found: usize = truth.iter().map(Vec::len).sum();
            assert!(found > 0, "radius {radius}: some pairs");
            let grid = CellGrid::new(&pts, radius, 1 << 20, 2).expect("a grid");
            let all = search_all(&grid, eps2, 2);
            for (i, t) in truth.iter().enumerate() {
                let mut got = all.of(i).to_vec();
                got.sort_unstable();
                assert_eq!(&got, t, "radius {radius}, point {i}");
            }
        }
    }

    #[test]
    fn half_shell_boxes_match_brute_force_on_any_thread_count() {
        let pts = points(3000, 7);
        let radius = 0.45;
        let eps2 = f64::from(radius) * f64::from(radius);
        let truth = brute_force(&pts, radius);
        let grid = CellGrid::new(&pts, radius, 1 << 20, 2).expect("a grid");
        let whole = search_box(&grid, [0; 3], grid.dims, eps2, 1);
        for threads in [2, 3, 5] {
            let again = search_box(&grid, [0; 3], grid.dims, eps2, threads);
            assert_eq!(again.ids, whole.ids);
            assert_eq!(again.counts, whole.counts);
            assert_eq!(again.indices, whole.indices, "{threads} threads");
        }
        for (i, l) in by_id(&whole, pts.len()).into_iter().enumerate() {
            assert_eq!(l.as_ref(), Some(&truth[i]), "point {i}");
        }
        // Straight into input order, on any thread count.
        let all = search_all(&grid, eps2, 1);
        for threads in [2, 3] {
            assert_eq!(search_all(&grid, eps2, threads), all, "{threads} threads");
        }
        for (i, t) in truth.iter().enumerate() {
            let mut got = all.of(i).to_vec();
            got.sort_unstable();
            assert_eq!(&got, t, "point {i}");
        }
        // A box in the middle and one on a corner: the lists of their points.
        let d = grid.dims;
        for (lo, hi) in [
            ([1, 1, 2], [d[0] - 2, d[1] - 1, d[2] - 3]),
            ([0, 0, 0], [3, 2, 4]),
        ] {
            let part = search_box(&grid, lo, hi, eps2, 2);
            let got = by_id(&part, pts.len());
            let mut seen = 0;
            for (i, l) in got.into_iter().enumerate() {
                if let Some(l) = l {
                    assert_eq!(l, truth[i], "point {i} of box {lo:?}..{hi:?}");
                    seen += 1;
                }
            }
            let cells: usize = (0..3).map(|k| (hi[k] - lo[k]) as usize).product();
            assert!(seen > 0 && cells > 0);
        }
    }
}
