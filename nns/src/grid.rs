//! The uniform grid of the neighbour search: cells at least `eps` wide, so
//! every neighbour of a point lies in its own cell or one of the 26 around
//! it; points counting-sorted by cell (x fastest, then y, then z) into
//! structure-of-arrays coordinates, so the distance tests read them as
//! vectors.

use super::NnsError;
use super::simd::{huge_vec, huge_zeroed};

/// Points sorted into cells, as structure-of-arrays.
#[derive(Debug, Clone)]
pub struct CellGrid {
    /// Corner of cell (0, 0, 0), metres.
    pub origin: [f64; 3],
    /// Cell edge, metres (at least the search radius).
    pub cell: f64,
    /// Cells along x, y, z.
    pub dims: [u32; 3],
    /// `starts[c]..starts[c + 1]` are the sorted points of cell `c`; one
    /// entry more than there are cells.
    pub starts: Vec<u32>,
    /// x of the points in cell order, followed by [`PAD`] infinities (so a
    /// vector of [`PAD`] lanes may be loaded from any point).
    pub xs: Vec<f32>,
    /// y, as `xs`.
    pub ys: Vec<f32>,
    /// z, as `xs`.
    pub zs: Vec<f32>,
    /// Input index of each sorted point, followed by [`PAD`] zeros.
    pub ids: Vec<u32>,
}

/// Lower and upper corners of a set of points.
type Bounds = ([f64; 3], [f64; 3]);

/// Padding after the sorted coordinates: the widest vector the distance
/// tests load past the last point. The padding is infinitely far away, so
/// it is never a neighbour.
pub const PAD: usize = 16;

/// Points a block of the sort holds on average ([`CellGrid::new`]): its
/// records (16 bytes each) and their cells fit in a core's L2 cache.
const BLOCK_POINTS: usize = 32 * 1024;

/// log2 of the cells per block of the sort: a power of two near
/// `BLOCK_POINTS` points' worth of cells, at least one cell.
fn block_shift(cells: usize, points: usize) -> u32 {
    let per_block = (cells as u128 * BLOCK_POINTS as u128 / points.max(1) as u128).max(1);
    (per_block as u64).ilog2()
}

/// One chunk's points grouped by block of the sort: block `b`'s are
/// `records[at[b]..at[b + 1]]` (x, y, z bits and input index), in cells
/// `cells[at[b]..at[b + 1]]`.
struct Run {
    at: Vec<usize>,
    records: Vec<[u32; 4]>,
    cells: Vec<u32>,
}

impl CellGrid {
    /// Sorts `points` into cells of at least `radius`, on `threads` threads
    /// (the result does not depend on the count: points keep their input
    /// order within a cell). When the bounding box would need more than
    /// `max_cells` cells, the cells grow (a sparse cloud costs no more
    /// memory than a dense one).
    pub fn new(
        points: &[[f32; 3]],
        radius: f32,
        max_cells: u64,
        threads: usize,
    ) -> Result<Self, NnsError> {
        if points.len() >= u32::MAX as usize {
            return Err(NnsError::TooManyPoints {
                points: points.len() as u64,
                max: u64::from(u32::MAX - 1),
            });
        }
        let threads = threads.max(1);
        let n_points = points.len();
        let chunk = n_points.div_ceil(threads).max(1);
        // Bounds, per chunk of points on its own thread.
        let bounds: Vec<Result<Bounds, u64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = points
                .chunks(chunk)
                .enumerate()
                .map(|(t, mine)| {
                    scope.spawn(move || {
                        let mut lo = [f64::INFINITY; 3];
                        let mut hi = [f64::NEG_INFINITY; 3];
                        for (i, p) in mine.iter().enumerate() {
                            for k in 0..3 {
                                if !p[k].is_finite() {
                                    return Err((t * chunk + i) as u64);
                                }
                                lo[k] = lo[k].min(f64::from(p[k]));
                                hi[k] = hi[k].max(f64::from(p[k]));
                            }
                        }
                        Ok((lo, hi))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("bounds threads do not panic"))
                .collect()
        });
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for b in bounds {
            let (l, h) = b.map_err(|index| NnsError::NonFinitePoint { index })?;
            for k in 0..3 {
                lo[k] = lo[k].min(l[k]);
                hi[k] = hi[k].max(h[k]);
            }
        }
        if points.is_empty() {
            lo = [0.0; 3];
            hi = [0.0; 3];
        }
        // A hair wider than eps, so rounding never puts two points within
        // eps of each other two cells apart.
        let mut cell = f64::from(radius) * (1.0 + 1e-6);
        let cells_for = |cell: f64| -> [u64; 3] {
            std::array::from_fn(|k| ((hi[k] - lo[k]) / cell).floor() as u64 + 1)
        };
        let max_cells = max_cells.max(1);
        loop {
            let d = cells_for(cell);
            if d.iter().all(|&x| x < u64::from(u32::MAX)) && d[0] * d[1] * d[2] <= max_cells {
                break;
            }
            cell *= 1.25;
        }
        let dims = cells_for(cell).map(|d| d as u32);
        let total = dims.iter().map(|&d| d as usize).product::<usize>();
        let index_of = |p: &[f32; 3]| -> u32 {
            let c: [usize; 3] = std::array::from_fn(|k| {
                (((f64::from(p[k]) - lo[k]) / cell) as usize).min(dims[k] as usize - 1)
            });
            (c[0] + dims[0] as usize * (c[1] + dims[1] as usize * c[2])) as u32
        };
        // A stable parallel sort in two passes, each touching memory in
        // runs that stay in cache: the points are first split by block (a
        // range of about `BLOCK_POINTS` points' worth of consecutive cells),
        // each thread moving its own chunk of input points into per-block
        // runs in input order; then each block is counting-sorted by cell
        // into its place in the sorted arrays. (One pass of random writes
        // over the whole arrays is as fast while they fit in the last-level
        // cache, and several times slower past it.)
        let n = points.len();
        let chunk = n.div_ceil(threads).max(1);
        let shift = block_shift(total, n);
        let blocks = (total >> shift) + 1;
        // Pass 1, per chunk: each point's cell, and points per block.
        let (cells, per_block): (Vec<Vec<u32>>, Vec<Vec<u32>>) = std::thread::scope(|scope| {
            let handles: Vec<_> = points
                .chunks(chunk)
                .map(|mine| {
                    scope.spawn(move || {
                        let mut cells = Vec::with_capacity(mine.len());
                        let mut per_block = vec![0u32; blocks];
                        for p in mine {
                            let c = index_of(p);
                            cells.push(c);
                            per_block[(c >> shift) as usize] += 1;
                        }
                        (cells, per_block)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("cell threads do not panic"))
                .unzip()
        });
        // Where each block starts in the sorted arrays, and in each
        // chunk's runs.
        let mut block_start = Vec::with_capacity(blocks + 1);
        let mut at = 0usize;
        for b in 0..blocks {
            block_start.push(at);
            at += per_block.iter().map(|c| c[b] as usize).sum::<usize>();
        }
        block_start.push(at);
        // Pass 2, per chunk: its points as records `[x, y, z, input]` with
        // their cells, grouped by block, in input order within a block.
        let runs: Vec<Run> = std::thread::scope(|scope| {
            let handles: Vec<_> = points
                .chunks(chunk)
                .zip(&cells)
                .zip(&per_block)
                .enumerate()
                .map(|(t, ((mine, cells), per_block))| {
                    scope.spawn(move || {
                        let mut at = Vec::with_capacity(blocks + 1);
                        let mut sum = 0;
                        for &c in per_block {
                            at.push(sum);
                            sum += c as usize;
                        }
                        at.push(sum);
                        let mut cursor = at.clone();
                        let mut records = huge_zeroed::<[u32; 4]>(mine.len());
                        let mut record_cells = huge_zeroed::<u32>(mine.len());
                        for (k, (p, &c)) in mine.iter().zip(cells).enumerate() {
                            let slot = &mut cursor[(c >> shift) as usize];
                            records[*slot] = [
                                p[0].to_bits(),
                                p[1].to_bits(),
                                p[2].to_bits(),
                                (t * chunk + k) as u32,
                            ];
                            record_cells[*slot] = c;
                            *slot += 1;
                        }
                        Run {
                            at,
                            records,
                            cells: record_cells,
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("sort threads do not panic"))
                .collect()
        });
        drop((cells, per_block));
        // Pass 3, per run of blocks with about equal points: each block's
        // cells counted, their starts, and the block's points in cell order
        // (chunk after chunk, so input order within a cell).
        let mut starts = vec![0u32; total + 1];
        starts[total] = n as u32;
        let mut xs = huge_vec(n + PAD, f32::INFINITY);
        let mut ys = huge_vec(n + PAD, f32::INFINITY);
        let mut zs = huge_vec(n + PAD, f32::INFINITY);
        let mut ids = huge_zeroed::<u32>(n + PAD);
        {
            let mut cuts = vec![0usize];
            for t in 1..threads {
                let want = n * t / threads;
                let b = block_start.partition_point(|&s| s < want).min(blocks);
                cuts.push(b.max(*cuts.last().expect("cuts start with 0")));
            }
            cuts.push(blocks);
            let mut rest = (
                &mut starts[..total],
                &mut xs[..n],
                &mut ys[..n],
                &mut zs[..n],
                &mut ids[..n],
            );
            let mut jobs = Vec::new();
            for w in cuts.windows(2) {
                let (b0, b1) = (w[0], w[1]);
                let cells = (b1 << shift).min(total) - (b0 << shift).min(total);
                let len = block_start[b1] - block_start[b0];
                let (st, sr) = std::mem::take(&mut rest.0).split_at_mut(cells);
                let (x, xr) = std::mem::take(&mut rest.1).split_at_mut(len);
                let (y, yr) = std::mem::take(&mut rest.2).split_at_mut(len);
                let (z, zr) = std::mem::take(&mut rest.3).split_at_mut(len);
                let (i, ir) = std::mem::take(&mut rest.4).split_at_mut(len);
                rest = (sr, xr, yr, zr, ir);
                jobs.push((b0, b1, st, x, y, z, i));
            }
            let (runs, block_start) = (&runs, &block_start);
            std::thread::scope(|scope| {
                for (b0, b1, st, x, y, z, i) in jobs {
                    scope.spawn(move || {
                        let (first_cell, first_point) = ((b0 << shift).min(total), block_start[b0]);
                        let mut count = vec![0u32; 1 << shift];
                        for b in b0..b1 {
                            let c0 = (b << shift).min(total);
                            let c1 = ((b + 1) << shift).min(total);
                            let count = &mut count[..c1 - c0];
                            count.fill(0);
                            for run in runs {
                                for &c in &run.cells[run.at[b]..run.at[b + 1]] {
                                    count[c as usize - c0] += 1;
                                }
                            }
                            let mut at = (block_start[b] - first_point) as u32;
                            for (k, n) in count.iter_mut().enumerate() {
                                st[c0 - first_cell + k] = at + first_point as u32;
                                let here = *n;
                                *n = at;
                                at += here;
                            }
                            for run in runs {
                                let (from, to) = (run.at[b], run.at[b + 1]);
                                for (r, &c) in
                                    run.records[from..to].iter().zip(&run.cells[from..to])
                                {
                                    let slot = &mut count[c as usize - c0];
                                    let s = *slot as usize;
                                    x[s] = f32::from_bits(r[0]);
                                    y[s] = f32::from_bits(r[1]);
                                    z[s] = f32::from_bits(r[2]);
                                    i[s] = r[3];
                                    *slot += 1;
                                }
                            }
                        }
                    });
                }
            });
        }
        Ok(Self {
            origin: lo,
            cell,
            dims,
            starts,
            xs,
            ys,
            zs,
            ids,
        })
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.ids.len() - PAD
    }

    /// Whether the grid holds no points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sorted point `s` as `x, y, z` and its input index as the bits of `w`
    /// (the layout the GPU reads).
    pub fn point(&self, s: usize) -> [f32; 4] {
        [
            self.xs[s],
            self.ys[s],
            self.zs[s],
            f32::from_bits(self.ids[s]),
        ]
    }

    /// Number of cells.
    pub fn cell_count(&self) -> usize {
        self.starts.len() - 1
    }

    /// Linear index of cell `c`.
    pub fn index(&self, c: [u32; 3]) -> usize {
        c[0] as usize
            + self.dims[0] as usize * (c[1] as usize + self.dims[1] as usize * c[2] as usize)
    }

    /// Coordinates of linear cell `i`.
    pub fn coords(&self, i: usize) -> [u32; 3] {
        let [nx, ny, _] = self.dims.map(|d| d as usize);
        [
            (i % nx) as u32,
            ((i / nx) % ny) as u32,
            (i / (nx * ny)) as u32,
        ]
    }

    /// Points per cell.
    pub fn counts(&self) -> Vec<u32> {
        self.starts.windows(2).map(|w| w[1] - w[0]).collect()
    }
}

/// Input index of a point in the GPU layout ([`CellGrid::point`]).
pub fn id_of(p: &[f32; 4]) -> u32 {
    p[3].to_bits()
}

#[cfg(test)]
mod tests {
    use super::CellGrid;

    /// Points from a fixed generator, in `[0, scale)^3`.
    fn points(n: usize, scale: f32) -> Vec<[f32; 3]> {
        let mut state = 11u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 24) as f32 * scale
        };
        (0..n).map(|_| [next(), next(), next()]).collect()
    }

    #[test]
    fn the_sort_is_stable_and_the_same_on_any_thread_count() {
        // Dense (several points per cell, many blocks) and sparse (cells
        // outnumber points: few blocks of many cells).
        for (scale, radius) in [(1.0, 0.08), (50.0, 0.5)] {
            let pts = points(5000, scale);
            let one = CellGrid::new(&pts, radius, 1 << 22, 1).expect("a grid");
            for threads in [2, 3, 8] {
                let many = CellGrid::new(&pts, radius, 1 << 22, threads).expect("a grid");
                assert_eq!(many.dims, one.dims);
                assert_eq!(many.starts, one.starts, "{threads} threads");
                assert_eq!(many.ids, one.ids, "{threads} threads");
                assert_eq!(many.xs, one.xs);
                assert_eq!(many.ys, one.ys);
                assert_eq!(many.zs, one.zs);
            }
            // Each cell holds its points in input order, at their place.
            for c in 0..one.cell_count() {
                let run = &one.ids[one.starts[c] as usize..one.starts[c + 1] as usize];
                assert!(
                    run.windows(2).all(|w| w[0] < w[1]),
                    "cell {c} keeps input order"
                );
                for (k, &id) in run.iter().enumerate() {
                    let s = one.starts[c] as usize + k;
                    assert_eq!(pts[id as usize], [one.xs[s], one.ys[s], one.zs[s]]);
                }
            }
            assert_eq!(one.len(), pts.len());
        }
    }
}
