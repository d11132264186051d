//! The CPU reference voxelizer: exact ray-triangle parity along voxel columns
//! (solid) and an exact triangle-box overlap test (shell). It is the oracle
//! the GPU voxelizer is tested against, and `--backend cpu`.

use super::grid::{GridSpec, VoxelGrid};
use super::sat::triangle_overlaps_box;
use super::{SolidVoxels, vote};
use crate::mesh::TriMesh;

/// Voxels whose centre is inside the mesh, by the parity of surface
/// crossings along each axis, combined by majority vote.
pub fn solid(mesh: &TriMesh, spec: &GridSpec) -> SolidVoxels {
    let axes: Vec<(VoxelGrid, u32)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|axis| s.spawn(move || axis_parity(mesh, spec, axis)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("voxelizer threads do not panic"))
            .collect()
    });
    let (grid, disagreements) = vote([&axes[0].0, &axes[1].0, &axes[2].0]);
    SolidVoxels {
        grid,
        layers: [axes[0].1, axes[1].1, axes[2].1],
        disagreements,
    }
}

/// Edge function of `q` against edge `a -> b`, and whether a point exactly on
/// the edge counts (a consistent top-left rule: of the two directions of a
/// shared edge exactly one includes it, so a ray through a shared edge or
/// vertex crosses the surface once, as in GPU rasterization).
fn edge(a: [f64; 2], b: [f64; 2], q: [f64; 2]) -> (f64, bool) {
    let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
    let w = dx * (q[1] - a[1]) - dy * (q[0] - a[0]);
    (w, dy < 0.0 || (dy == 0.0 && dx < 0.0))
}

/// Parity along `axis`: returns the inside voxels and the largest number of
/// surface crossings in any column (the depth layers a peeler needs).
pub fn axis_parity(mesh: &TriMesh, spec: &GridSpec, axis: usize) -> (VoxelGrid, u32) {
    let (u, v) = ((axis + 1) % 3, (axis + 2) % 3);
    let (nu, nv, na) = (spec.dims[u] as i64, spec.dims[v] as i64, spec.dims[axis]);
    let vs = f64::from(spec.voxel_size);
    // Column centres sit at integer coordinates in this space.
    let to_grid = |p: [f32; 3], a: usize| (f64::from(p[a]) - f64::from(spec.origin[a])) / vs - 0.5;
    let mut hits: Vec<(u32, f32)> = Vec::new();
    for t in 0..mesh.triangles.len() {
        let tri = mesh.triangle(t);
        let mut p: [[f64; 2]; 3] = tri.map(|q| [to_grid(q, u), to_grid(q, v)]);
        let mut depth: [f64; 3] = tri.map(|q| to_grid(q, axis) + 0.5);
        let area = edge(p[0], p[1], p[2]).0;
        if area == 0.0 {
            continue; // edge-on: a ray grazes it, no crossing
        }
        if area < 0.0 {
            p.swap(1, 2);
            depth.swap(1, 2);
        }
        let area = area.abs();
        let lo = |k: usize| {
            p.iter()
                .map(|q| q[k])
                .fold(f64::INFINITY, f64::min)
                .ceil()
                .max(0.0) as i64
        };
        let hi = |k: usize, n: i64| {
            p.iter()
                .map(|q| q[k])
                .fold(f64::NEG_INFINITY, f64::max)
                .floor()
                .min((n - 1) as f64) as i64
        };
        for j in lo(1)..=hi(1, nv) {
            for i in lo(0)..=hi(0, nu) {
                let q = [i as f64, j as f64];
                let e = [
                    edge(p[1], p[2], q),
                    edge(p[2], p[0], q),
                    edge(p[0], p[1], q),
                ];
                if e.iter()
                    .all(|&(w, top_left)| w > 0.0 || (w == 0.0 && top_left))
                {
                    let d = (e[0].0 * depth[0] + e[1].0 * depth[1] + e[2].0 * depth[2]) / area;
                    hits.push(((i + nu * j) as u32, d as f32));
                }
            }
        }
    }
    hits.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut grid = VoxelGrid::empty(spec.dims);
    let mut layers = 0u32;
    let mut start = 0;
    while start < hits.len() {
        let column = hits[start].0;
        let end = start + hits[start..].iter().take_while(|h| h.0 == column).count();
        layers = layers.max((end - start) as u32);
        let (i, j) = (column % nu as u32, column / nu as u32);
        let mut crossed = start;
        for k in 0..na {
            let centre = k as f32 + 0.5;
            while crossed < end && hits[crossed].1 < centre {
                crossed += 1;
            }
            if (crossed - start) % 2 == 1 {
                let mut c = [0u32; 3];
                c[axis] = k;
                c[u] = i;
                c[v] = j;
                grid.set(spec.index(c));
            }
        }
        start = end;
    }
    (grid, layers)
}

/// Voxels the surface passes through: every voxel whose box (grown by
/// [`super::SHELL_MARGIN`] of its size, so a face lying exactly on a voxel
/// boundary marks both sides consistently) overlaps a triangle.
pub fn shell(mesh: &TriMesh, spec: &GridSpec) -> VoxelGrid {
    let mut grid = VoxelGrid::empty(spec.dims);
    let vs = f64::from(spec.voxel_size);
    let half = 0.5 * vs * (1.0 + super::SHELL_MARGIN);
    for t in 0..mesh.triangles.len() {
        let tri = mesh.triangle(t).map(|p| p.map(f64::from));
        let range = |a: usize| {
            let lo = tri.iter().map(|p| p[a]).fold(f64::INFINITY, f64::min);
            let hi = tri.iter().map(|p| p[a]).fold(f64::NEG_INFINITY, f64::max);
            let o = f64::from(spec.origin[a]);
            // Voxel k spans [k, k + 1] in grid units, grown by the margin.
            let first = (((lo - o) / vs) - 1.0 - super::SHELL_MARGIN)
                .ceil()
                .max(0.0) as u32;
            let last = (((hi - o) / vs) + super::SHELL_MARGIN)
                .floor()
                .min(f64::from(spec.dims[a]) - 1.0);
            (first, last)
        };
        let (rx, ry, rz) = (range(0), range(1), range(2));
        if rx.1 < 0.0 || ry.1 < 0.0 || rz.1 < 0.0 {
            continue;
        }
        for z in rz.0..=rz.1 as u32 {
            for y in ry.0..=ry.1 as u32 {
                for x in rx.0..=rx.1 as u32 {
                    let c = spec.centre([x, y, z]).map(f64::from);
                    if triangle_overlaps_box(&tri, c, half) {
                        grid.set(spec.index([x, y, z]));
                    }
                }
            }
        }
    }
    grid
}
