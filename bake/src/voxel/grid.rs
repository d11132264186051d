//! [`GridSpec`] (where the voxels are) and [`VoxelGrid`] (which are set).

use serde::Serialize;

use crate::mesh::Bounds;

/// Largest grid side accepted, voxels.
pub const MAX_SIDE: u32 = pellet_formats::assets::MAX_GRID_SIDE;

/// How fine to voxelize.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Resolution {
    /// Edge of one voxel, metres.
    VoxelSize(f32),
    /// Voxels along the longest axis of the mesh's bounding box.
    Cells(u32),
}

/// A regular grid of cubic voxels. Voxel `(x, y, z)` spans
/// `origin + [x, x+1] * voxel_size` (and likewise in y and z); its linear
/// index is `x + nx * (y + ny * z)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GridSpec {
    /// Minimum corner, metres.
    pub origin: [f32; 3],
    /// Voxel edge, metres.
    pub voxel_size: f32,
    /// Voxels along x, y, z.
    pub dims: [u32; 3],
}

/// Why a grid cannot be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GridError {
    /// Resolution or voxel size not positive and finite.
    #[error("the voxel size must be a positive number of metres, not {0}")]
    BadVoxelSize(f32),
    /// Zero cells.
    #[error("the resolution must be at least 1 cell")]
    ZeroCells,
    /// The mesh is flat or a point: no volume.
    #[error("the mesh's bounding box {0:?} has no extent along its longest axis")]
    Degenerate([f32; 3]),
    /// Too many voxels along some axis.
    #[error(
        "the grid would be {dims:?} voxels; at most {MAX_SIDE} per side (use a larger voxel size)"
    )]
    TooLarge {
        /// The dimensions it would need.
        dims: [u64; 3],
    },
}

impl GridSpec {
    /// The smallest grid of the requested resolution centred on `bounds`.
    pub fn fit(bounds: &Bounds, resolution: Resolution) -> Result<Self, GridError> {
        let size = bounds.size();
        let longest = size.iter().copied().fold(0.0f32, f32::max);
        let voxel_size = match resolution {
            Resolution::VoxelSize(v) if v.is_finite() && v > 0.0 => v,
            Resolution::VoxelSize(v) => return Err(GridError::BadVoxelSize(v)),
            Resolution::Cells(0) => return Err(GridError::ZeroCells),
            Resolution::Cells(n) => {
                if !(longest > 0.0 && longest.is_finite()) {
                    return Err(GridError::Degenerate(size));
                }
                longest / n as f32
            }
        };
        // Cells per axis: enough to cover the extent; the tolerance keeps an
        // extent of exactly n voxels at n (not n + 1 from rounding).
        let dims64: [u64; 3] = std::array::from_fn(|a| {
            let n = (f64::from(size[a]) / f64::from(voxel_size) - 1e-4).ceil();
            if n.is_finite() {
                (n.max(1.0)) as u64
            } else {
                u64::MAX
            }
        });
        if dims64.iter().any(|&d| d > u64::from(MAX_SIDE)) {
            return Err(GridError::TooLarge { dims: dims64 });
        }
        let dims = dims64.map(|d| d as u32);
        let origin = std::array::from_fn(|a| {
            let centre = 0.5 * (f64::from(bounds.min[a]) + f64::from(bounds.max[a]));
            (centre - 0.5 * f64::from(dims[a]) * f64::from(voxel_size)) as f32
        });
        Ok(Self {
            origin,
            voxel_size,
            dims,
        })
    }

    /// Number of voxels.
    pub fn len(&self) -> usize {
        self.dims.iter().map(|&d| d as usize).product()
    }

    /// Whether the grid has no voxels (never, for a fitted grid).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Linear index of voxel `(x, y, z)`.
    pub fn index(&self, v: [u32; 3]) -> usize {
        v[0] as usize
            + self.dims[0] as usize * (v[1] as usize + self.dims[1] as usize * v[2] as usize)
    }

    /// Centre of voxel `(x, y, z)`, metres.
    pub fn centre(&self, v: [u32; 3]) -> [f32; 3] {
        std::array::from_fn(|a| self.origin[a] + (v[a] as f32 + 0.5) * self.voxel_size)
    }
}

/// Which voxels of a grid are set, one bit each (`x` fastest), in 32-bit words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoxelGrid {
    /// Where the voxels are.
    pub dims: [u32; 3],
    /// Bits, least significant first; bits past the last voxel are zero.
    pub words: Vec<u32>,
}

impl VoxelGrid {
    /// All voxels clear.
    pub fn empty(dims: [u32; 3]) -> Self {
        let len: usize = dims.iter().map(|&d| d as usize).product();
        Self {
            dims,
            words: vec![0; len.div_ceil(32)],
        }
    }

    /// Voxels in the grid.
    pub fn len(&self) -> usize {
        self.dims.iter().map(|&d| d as usize).product()
    }

    /// Whether the grid has no voxels.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether voxel `i` is set.
    pub fn get(&self, i: usize) -> bool {
        self.words[i / 32] >> (i % 32) & 1 == 1
    }

    /// Sets voxel `i`.
    pub fn set(&mut self, i: usize) {
        self.words[i / 32] |= 1 << (i % 32);
    }

    /// Number of set voxels.
    pub fn count(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// Voxels set in `self` or `other` but not both.
    pub fn count_differences(&self, other: &VoxelGrid) -> u64 {
        self.words
            .iter()
            .zip(&other.words)
            .map(|(a, b)| u64::from((a ^ b).count_ones()))
            .sum()
    }

    /// The bits as bytes, least significant bit first (the asset's layout).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes: Vec<u8> = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        bytes.truncate(self.len().div_ceil(8));
        bytes
    }

    /// Indices of set voxels in increasing order.
    pub fn iter_set(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &bits)| {
            let mut bits = bits;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                Some(w * 32 + b as usize)
            })
        })
    }
}
