//! The uniform grid of the neighbour search: cells at least `eps` wide, so
//! every neighbour of a point lies in its own cell or one of the 26 around
//! it; points counting-sorted by cell (x fastest, then y, then z) into
//! structure-of-arrays coordinates, so the distance tests read them as
//! vectors.

use super::NnsError;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use super::simd::{advise_huge_pages, huge_zeroed};

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
        let index_of = |p: &[f32; 3]| -> u32 {
            let c: [usize; 3] = std::array::from_fn(|k| {
                (((f64::from(p[k]) - lo[k]) / cell) as usize).min(dims[k] as usize - 1)
            });
            (c[0] + dims[0] as usize * (c[1] + dims[1] as usize * c[2])) as u32
        };
        // A stable parallel counting sort. Each chunk of input points (one
        // per thread) finds its points' cells and counts them per cell.
        // Each chunk's counts take 4 bytes per cell, so chunks are fewer
        // than threads when cells outnumber points (a sparse cloud): all
        // the counts together stay within 8 bytes per point, half what the
        // sorted arrays take.
        let n = points.len();
        let sorters = threads.min((2 * n / total.max(1)).max(1));
        let sort_chunk = n.div_ceil(sorters).max(1);
        let (cells, mut counts): (Vec<Vec<u32>>, Vec<Vec<u32>>) = std::thread::scope(|scope| {
            let handles: Vec<_> = points
                .chunks(sort_chunk)
                .map(|mine| {
                    scope.spawn(move || {
                        let mut cells = Vec::with_capacity(mine.len());
                        let mut count = huge_zeroed::<u32>(total);
                        for p in mine {
                            let c = index_of(p);
                            cells.push(c);
                            count[c as usize] += 1;
                        }
                        (cells, count)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("cell threads do not panic"))
                .unzip()
        });
        // Where each cell starts, and within it where each chunk's points
        // go (chunk after chunk: the input order is kept). The counts become
        // each chunk's write cursors. In parallel over runs of cells: each
        // run's total first, then its starts from the totals before it.
        let mut starts = vec![0u32; total + 1];
        {
            let run = total.div_ceil(threads).max(1);
            let mut runs: Vec<(&mut [u32], Vec<&mut [u32]>)> = starts[..total]
                .chunks_mut(run)
                .map(|s| (s, Vec::with_capacity(counts.len())))
                .collect();
            for count in counts.iter_mut() {
                for (r, c) in runs.iter_mut().zip(count.chunks_mut(run)) {
                    r.1.push(c);
                }
            }
            let totals: Vec<u32> = std::thread::scope(|scope| {
                let handles: Vec<_> = runs
                    .iter()
                    .map(|(_, counts)| {
                        scope.spawn(move || {
                            counts.iter().map(|c| c.iter().sum::<u32>()).sum::<u32>()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("prefix threads do not panic"))
                    .collect()
            });
            std::thread::scope(|scope| {
                let mut at = 0u32;
                for ((starts, mut counts), total) in runs.into_iter().zip(totals) {
                    let base = at;
                    at += total;
                    scope.spawn(move || {
                        let mut at = base;
                        for (c, start) in starts.iter_mut().enumerate() {
                            *start = at;
                            for count in counts.iter_mut() {
                                let k = count[c];
                                count[c] = at;
                                at += k;
                            }
                        }
                    });
                }
            });
        }
        starts[total] = n as u32;
        // Each chunk writes its points as records of 16 bytes (one cache
        // line touched per point), split into the coordinate arrays after.
        // Every record is written once, by one thread (the cursors of the
        // chunks cover disjoint ranges); relaxed atomic stores are plain
        // stores on x86-64 and ARM.
        let records: Vec<[AtomicU64; 2]> = {
            let mut v = Vec::with_capacity(n);
            advise_huge_pages(v.spare_capacity_mut());
            v.resize_with(n, || [AtomicU64::new(0), AtomicU64::new(0)]);
            v
        };
        std::thread::scope(|scope| {
            for (t, ((mine, cells), cursor)) in points
                .chunks(sort_chunk)
                .zip(&cells)
                .zip(counts.iter_mut())
                .enumerate()
            {
                let records = &records;
                scope.spawn(move || {
                    for (k, (p, &c)) in mine.iter().zip(cells).enumerate() {
                        let at = &mut cursor[c as usize];
                        let r = &records[*at as usize];
                        let input = (t * sort_chunk + k) as u64;
                        r[0].store(
                            u64::from(p[0].to_bits()) | u64::from(p[1].to_bits()) << 32,
                            Relaxed,
                        );
                        r[1].store(u64::from(p[2].to_bits()) | input << 32, Relaxed);
                        *at += 1;
                    }
                });
            }
        });
        drop((cells, counts));
        // The coordinate arrays and the input indices, each built by one
        // thread reading the records in order (nothing to clear first).
        let word = |r: &[AtomicU64; 2], k: usize| -> u32 {
            let w = r[k / 2].load(Relaxed);
            if k.is_multiple_of(2) {
                w as u32
            } else {
                (w >> 32) as u32
            }
        };
        let coordinate = |k: usize| -> Vec<f32> {
            let mut v = Vec::with_capacity(n + PAD);
            advise_huge_pages(v.spare_capacity_mut());
            v.extend(records.iter().map(|r| f32::from_bits(word(r, k))));
            v.resize(n + PAD, f32::INFINITY);
            v
        };
        let input_ids = || -> Vec<u32> {
            let mut v = Vec::with_capacity(n + PAD);
            advise_huge_pages(v.spare_capacity_mut());
            v.extend(records.iter().map(|r| word(r, 3)));
            v.resize(n + PAD, 0);
            v
        };
        let workers = threads.min(4);
        let mut coords: [Vec<f32>; 3] = Default::default();
        let mut ids = Vec::new();
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|t| {
                    let (coordinate, input_ids) = (&coordinate, &input_ids);
                    scope.spawn(move || {
                        let mine: Vec<usize> = (t..4).step_by(workers).collect();
                        let built: Vec<(usize, Vec<f32>)> = mine
                            .iter()
                            .filter(|&&k| k < 3)
                            .map(|&k| (k, coordinate(k)))
                            .collect();
                        (built, mine.contains(&3).then(input_ids))
                    })
                })
                .collect();
            for h in handles {
                let (built, input) = h.join().expect("column threads do not panic");
                for (k, v) in built {
                    coords[k] = v;
                }
                if let Some(v) = input {
                    ids = v;
                }
            }
        });
        let [xs, ys, zs] = coords;
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
        // Dense (cells fewer than points: every thread sorts a chunk) and
        // sparse (cells outnumber points: one chunk sorts).
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
