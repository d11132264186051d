//! Mesh to voxels: a [`GridSpec`] fitted to the mesh, then a solid (inside by
//! surface-crossing parity) or shell (surface only) [`VoxelGrid`], on the GPU
//! by depth peeling or on the CPU by exact ray casting.

pub mod cpu;
pub mod gpu;
pub mod grid;
pub mod sat;

pub use grid::{GridError, GridSpec, Resolution, VoxelGrid};

/// Shell voxels are tested against their box grown by this fraction of the
/// voxel size, so faces lying exactly on voxel boundaries mark voxels the
/// same way in f32 (GPU) and f64 (CPU) arithmetic.
pub const SHELL_MARGIN: f64 = 1e-3;

/// A solid voxelization and what it learned about the mesh.
#[derive(Debug, Clone)]
pub struct SolidVoxels {
    /// Voxels voted inside.
    pub grid: VoxelGrid,
    /// Most surface crossings in any column, per axis (x, y, z): the depth
    /// layers peeled along that axis.
    pub layers: [u32; 3],
    /// Voxels where the three axes did not all agree (0 for a closed mesh).
    pub disagreements: u64,
}

/// Majority of three per-axis parity grids, and the voxels where they differ.
pub fn vote(axes: [&VoxelGrid; 3]) -> (VoxelGrid, u64) {
    let [a, b, c] = axes;
    let mut out = VoxelGrid::empty(a.dims);
    let mut disagreements = 0;
    for (i, w) in out.words.iter_mut().enumerate() {
        let (x, y, z) = (a.words[i], b.words[i], c.words[i]);
        *w = (x & y) | (x & z) | (y & z);
        disagreements += u64::from(((x ^ y) | (x ^ z)).count_ones());
    }
    (out, disagreements)
}
