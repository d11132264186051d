//! The cell grid of the neighbour search: dense cells over the domain when
//! they fit, hashed cells otherwise (any domain size, memory proportional to
//! the particle count). Cell edge = the largest particle diameter, so every
//! contact partner lies in the 27 cells around a particle.

use super::SimError;

/// Dense or hashed cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GridMode {
    /// Dense when the domain has at most [`DENSE_CELLS_PER_PARTICLE`] cells
    /// per particle (and at most 2^26 cells), hashed otherwise.
    #[default]
    Auto,
    /// Always dense (an error when the domain is too large).
    Dense,
    /// Always hashed.
    Hashed,
}

/// Dense grids are used up to this many cells per particle.
pub const DENSE_CELLS_PER_PARTICLE: u64 = 8;

/// Largest dense grid, cells.
pub const MAX_DENSE_CELLS: u64 = 1 << 26;

/// Fewest hash buckets.
pub const MIN_BUCKETS: u32 = 1024;

/// Where cells are and how they are keyed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridSpec {
    /// Corner of cell (0, 0, 0), metres.
    pub origin: [f32; 3],
    /// Cell edge, metres.
    pub cell_size: f32,
    /// Cells per axis covering the domain (dense mode clamps to them).
    pub dims: [i32; 3],
    /// Whether cells are hashed into `num_keys` buckets.
    pub hashed: bool,
    /// Number of keys: cells (dense) or buckets (hashed, a power of two).
    pub num_keys: u32,
    /// The period along each axis (0: not periodic), metres. Along a
    /// periodic axis `dims` whole cells span it (each a little longer than
    /// `cell_size`) and cell coordinates wrap.
    pub period: [f32; 3],
}

impl GridSpec {
    /// The grid for a domain `[min, max]`, cells of edge `cell`, `n` particles.
    pub fn new(
        min: [f32; 3],
        max: [f32; 3],
        cell: f32,
        n: usize,
        mode: GridMode,
    ) -> Result<Self, SimError> {
        if !(cell.is_finite() && cell > 0.0) {
            return Err(SimError::BadValue {
                field: "the cell size (twice the largest radius, m)".into(),
                value: f64::from(cell),
                expected: "must be positive: particle radii must be positive".into(),
            });
        }
        let dims_f: [f64; 3] = std::array::from_fn(|a| {
            ((f64::from(max[a]) - f64::from(min[a])) / f64::from(cell))
                .ceil()
                .max(1.0)
        });
        let cells = dims_f.iter().product::<f64>();
        let dense_fits =
            dims_f.iter().all(|&d| d < f64::from(1u32 << 30)) && cells <= MAX_DENSE_CELLS as f64;
        let want_dense = match mode {
            GridMode::Dense => {
                if !dense_fits {
                    return Err(SimError::TooMany {
                        what: "dense grid cells (use --grid hashed)",
                        count: cells.min(u64::MAX as f64) as u64,
                        max: MAX_DENSE_CELLS,
                    });
                }
                true
            }
            GridMode::Hashed => false,
            GridMode::Auto => {
                dense_fits && cells <= (DENSE_CELLS_PER_PARTICLE * n as u64).max(4096) as f64
            }
        };
        let dims = dims_f.map(|d| d.min(f64::from(i32::MAX)) as i32);
        if want_dense {
            Ok(Self {
                origin: min,
                cell_size: cell,
                dims,
                hashed: false,
                num_keys: cells as u32,
                period: [0.0; 3],
            })
        } else {
            let buckets = (2 * n as u64)
                .max(u64::from(MIN_BUCKETS))
                .next_power_of_two()
                .min(1 << 31) as u32;
            Ok(Self {
                origin: min,
                cell_size: cell,
                dims,
                hashed: true,
                num_keys: buckets,
                period: [0.0; 3],
            })
        }
    }

    /// This grid with the axes of `periodic` (bits `1 << axis`) periodic
    /// over the box `[min, max]`: `floor(L / cell_size)` cells along each.
    pub fn with_periodic(mut self, periodic: u32, min: [f32; 3], max: [f32; 3]) -> Self {
        for a in (0..3).filter(|&a| periodic & (1 << a) != 0) {
            let l = max[a] - min[a];
            self.period[a] = l;
            self.dims[a] = ((l / self.cell_size).floor() as i32).max(1);
        }
        if !self.hashed {
            self.num_keys = self.dims.iter().map(|&d| d as u32).product();
        }
        self
    }

    /// Whether any axis is periodic.
    pub fn is_periodic(&self) -> bool {
        self.period.iter().any(|&l| l > 0.0)
    }

    /// Integer cell of a position (clamped to the grid when dense, wrapped
    /// along periodic axes). Same arithmetic as `cell_coord` in `common.wgsl`.
    #[inline]
    pub fn cell_coord(&self, p: [f32; 3]) -> [i32; 3] {
        let inv = 1.0 / self.cell_size;
        let c: [i32; 3] = std::array::from_fn(|a| {
            if self.period[a] > 0.0 {
                let inv_a = self.dims[a] as f32 / self.period[a];
                floor_i32((p[a] - self.origin[a]) * inv_a).rem_euclid(self.dims[a])
            } else {
                floor_i32((p[a] - self.origin[a]) * inv)
            }
        });
        if self.hashed {
            c
        } else {
            std::array::from_fn(|a| c[a].clamp(0, self.dims[a] - 1))
        }
    }

    /// The minimum image of the separation `d = p_i - p_j` (as
    /// `min_image` in `common.wgsl`).
    #[inline]
    pub fn min_image(&self, mut d: [f32; 3]) -> [f32; 3] {
        for a in 0..3 {
            let l = self.period[a];
            if l > 0.0 {
                d[a] -= l * (d[a] * (1.0 / l)).round_ties_even();
            }
        }
        d
    }

    /// A free particle's position back in the box along the periodic axes
    /// (as `wrap_position` in `common.wgsl`).
    #[inline]
    pub fn wrap(&self, mut p: [f32; 4]) -> [f32; 4] {
        for a in 0..3 {
            let l = self.period[a];
            if l > 0.0 {
                p[a] -= l * ((p[a] - self.origin[a]) * (1.0 / l)).floor();
            }
        }
        p
    }

    /// Key of a cell: its linear index over the domain's cells, x fastest;
    /// hashed grids take it modulo the (power-of-two) bucket count, in
    /// wrapping 32-bit arithmetic, so cells that are neighbours along x are
    /// neighbouring buckets and sorted particles stay close in memory.
    #[inline]
    pub fn cell_key(&self, c: [i32; 3]) -> u32 {
        if self.hashed {
            let (dx, dy) = (self.dims[0] as u32, self.dims[1] as u32);
            let lin = (c[0] as u32).wrapping_add(
                dx.wrapping_mul((c[1] as u32).wrapping_add(dy.wrapping_mul(c[2] as u32))),
            );
            lin & (self.num_keys - 1)
        } else {
            (c[0] + self.dims[0] * (c[1] + self.dims[1] * c[2])) as u32
        }
    }
}

/// `floor(x) as i32`, saturating, without libm's `floorf` (a function call
/// on x86-64 without SSE4.1; this runs for every candidate of every particle).
#[inline(always)]
pub fn floor_i32(x: f32) -> i32 {
    if x >= 2_147_483_648.0 {
        return i32::MAX;
    }
    if x.is_nan() {
        return 0;
    }
    if x < -2_147_483_648.0 {
        return i32::MIN;
    }
    let t = x as i32;
    if (t as f32) > x { t - 1 } else { t }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_picks_dense_for_compact_domains_and_hashes_huge_ones() {
        let g = GridSpec::new([0.0; 3], [1.0; 3], 0.1, 1000, GridMode::Auto).expect("grid");
        assert!(!g.hashed);
        assert_eq!(g.dims, [10, 10, 10]);
        assert_eq!(g.num_keys, 1000);
        // 4096 cells per side: hashed, buckets ~ 2n.
        let g = GridSpec::new([0.0; 3], [4096.0; 3], 1.0, 1000, GridMode::Auto).expect("grid");
        assert!(g.hashed);
        assert_eq!(g.num_keys, 2048);
        assert_eq!(g.dims, [4096; 3]);
    }

    #[test]
    fn floor_matches_std() {
        for x in [
            -3.5f32,
            -3.0,
            -0.0,
            0.0,
            0.2,
            2.999_999_8,
            1e9,
            -1e9,
            5e30,
            -5e30,
            -0.000_001,
        ] {
            assert_eq!(floor_i32(x), x.floor() as i32, "{x}");
        }
    }

    #[test]
    fn dense_clamps_outside_points_to_edge_cells() {
        let g = GridSpec::new([0.0; 3], [1.0; 3], 0.25, 100, GridMode::Dense).expect("grid");
        assert_eq!(g.cell_coord([-5.0, 0.3, 9.0]), [0, 1, 3]);
        assert_eq!(g.cell_key([3, 3, 3]), 63);
    }
}
