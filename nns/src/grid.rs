//! The uniform grid of the neighbour search: cells at least `eps` wide, so
//! every neighbour of a point lies in its own cell or one of the 26 around
//! it; points counting-sorted by cell (x fastest, then y, then z).

use super::NnsError;

/// Points sorted into cells.
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
    /// Points in cell order: `x, y, z` and the point's input index as the
    /// bits of `w`.
    pub sorted: Vec<[f32; 4]>,
}

impl CellGrid {
    /// Sorts `points` into cells of at least `radius`. When the bounding box
    /// would need more than `max_cells` cells, the cells grow (a sparse
    /// cloud costs no more memory than a dense one).
    pub fn new(points: &[[f32; 3]], radius: f32, max_cells: u64) -> Result<Self, NnsError> {
        if points.len() >= u32::MAX as usize {
            return Err(NnsError::TooManyPoints {
                points: points.len() as u64,
                max: u64::from(u32::MAX - 1),
            });
        }
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for (index, p) in points.iter().enumerate() {
            for k in 0..3 {
                if !p[k].is_finite() {
                    return Err(NnsError::NonFinitePoint {
                        index: index as u64,
                    });
                }
                lo[k] = lo[k].min(f64::from(p[k]));
                hi[k] = hi[k].max(f64::from(p[k]));
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
        let index_of = |p: &[f32; 3]| -> usize {
            let c: [usize; 3] = std::array::from_fn(|k| {
                (((f64::from(p[k]) - lo[k]) / cell) as usize).min(dims[k] as usize - 1)
            });
            c[0] + dims[0] as usize * (c[1] + dims[1] as usize * c[2])
        };
        let mut starts = vec![0u32; total + 1];
        let cells: Vec<u32> = points.iter().map(|p| index_of(p) as u32).collect();
        for &c in &cells {
            starts[c as usize + 1] += 1;
        }
        for c in 0..total {
            starts[c + 1] += starts[c];
        }
        let mut fill = starts[..total].to_vec();
        let mut sorted = vec![[0.0f32; 4]; points.len()];
        for (i, (p, &c)) in points.iter().zip(&cells).enumerate() {
            let at = &mut fill[c as usize];
            sorted[*at as usize] = [p[0], p[1], p[2], f32::from_bits(i as u32)];
            *at += 1;
        }
        Ok(Self {
            origin: lo,
            cell,
            dims,
            starts,
            sorted,
        })
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

/// Input index of a sorted point.
pub fn id_of(p: &[f32; 4]) -> u32 {
    p[3].to_bits()
}
