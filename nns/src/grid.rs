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
        let layer = dims[0] as usize * dims[1] as usize;
        let chunk = n_points.div_ceil(threads).max(1);
        // A point's cell and its layer (z).
        let index_of = |p: &[f32; 3]| -> (u32, usize) {
            let c: [usize; 3] = std::array::from_fn(|k| {
                (((f64::from(p[k]) - lo[k]) / cell) as usize).min(dims[k] as usize - 1)
            });
            (
                (c[0] + dims[0] as usize * (c[1] + dims[1] as usize * c[2])) as u32,
                c[2],
            )
        };
        // Each point's cell, and points per layer of cells, in parallel.
        let n = points.len();
        let mut cells = huge_zeroed::<u32>(n);
        let per_layer: Vec<Vec<u32>> = std::thread::scope(|scope| {
            let handles: Vec<_> = points
                .chunks(chunk)
                .zip(cells.chunks_mut(chunk))
                .map(|(mine, out)| {
                    scope.spawn(move || {
                        let mut layers = vec![0u32; dims[2] as usize];
                        for (p, c) in mine.iter().zip(out) {
                            let (cell, z) = index_of(p);
                            *c = cell;
                            layers[z] += 1;
                        }
                        layers
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("cell threads do not panic"))
                .collect()
        });
        let mut below = vec![0u32; dims[2] as usize + 1];
        for z in 0..dims[2] as usize {
            below[z + 1] = below[z] + per_layer.iter().map(|l| l[z]).sum::<u32>();
        }
        // Slabs of whole layers of cells with about equal points, one per
        // thread; each thread counts, sorts and scatters the points of its
        // own slab (scanning every point's cell, in input order: stable).
        let mut cuts = vec![0usize];
        for t in 1..threads {
            let want = (n * t / threads) as u32;
            let z = below.partition_point(|&b| b < want).min(dims[2] as usize);
            cuts.push(z.max(*cuts.last().expect("cuts start with 0")));
        }
        cuts.push(dims[2] as usize);
        let mut starts = vec![0u32; total + 1];
        starts[total] = n as u32;
        let mut xs = huge_vec(n + PAD, f32::INFINITY);
        let mut ys = huge_vec(n + PAD, f32::INFINITY);
        let mut zs = huge_vec(n + PAD, f32::INFINITY);
        let mut ids = huge_zeroed::<u32>(n + PAD);
        {
            let cells = &cells;
            let mut rest = (
                &mut starts[..total],
                &mut xs[..n],
                &mut ys[..n],
                &mut zs[..n],
                &mut ids[..n],
            );
            let mut jobs = Vec::new();
            for w in cuts.windows(2) {
                let (c0, c1) = (w[0] * layer, w[1] * layer);
                let (p0, p1) = (below[w[0]], below[w[1]]);
                let len = (p1 - p0) as usize;
                let (st, sr) = std::mem::take(&mut rest.0).split_at_mut(c1 - c0);
                let (x, xr) = std::mem::take(&mut rest.1).split_at_mut(len);
                let (y, yr) = std::mem::take(&mut rest.2).split_at_mut(len);
                let (z, zr) = std::mem::take(&mut rest.3).split_at_mut(len);
                let (i, ir) = std::mem::take(&mut rest.4).split_at_mut(len);
                rest = (sr, xr, yr, zr, ir);
                jobs.push((c0 as u32, c1 as u32, p0, st, x, y, z, i));
            }
            std::thread::scope(|scope| {
                for (c0, c1, p0, st, x, y, z, i) in jobs {
                    scope.spawn(move || {
                        // Counting sort of the slab's cells: first into
                        // records of 16 bytes (one cache line touched per
                        // point), then split into the coordinate arrays.
                        for &c in cells.iter() {
                            if c >= c0 && c < c1 {
                                st[(c - c0) as usize] += 1;
                            }
                        }
                        let mut at = p0;
                        for s in st.iter_mut() {
                            let count = *s;
                            *s = at;
                            at += count;
                        }
                        let mut fill: Vec<u32> = st.iter().map(|&s| s - p0).collect();
                        let mut records = huge_vec(x.len(), [0u32; 4]);
                        for (input, (&c, p)) in cells.iter().zip(points).enumerate() {
                            if c >= c0 && c < c1 {
                                let at = &mut fill[(c - c0) as usize];
                                records[*at as usize] =
                                    [p[0].to_bits(), p[1].to_bits(), p[2].to_bits(), input as u32];
                                *at += 1;
                            }
                        }
                        for (k, r) in records.iter().enumerate() {
                            x[k] = f32::from_bits(r[0]);
                            y[k] = f32::from_bits(r[1]);
                            z[k] = f32::from_bits(r[2]);
                            i[k] = r[3];
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
