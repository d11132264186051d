//! Distance from each voxel to the body's exterior, for particle depths and
//! outward normals: an exact Euclidean distance transform (Felzenszwalb and
//! Huttenlocher 2012) of the voxels reachable from outside the grid.

use crate::voxel::{GridSpec, VoxelGrid};

/// Euclidean distance, in voxels, from every voxel of a grid padded by one on
/// each side to the nearest exterior voxel centre.
#[derive(Debug)]
pub struct DistanceField {
    dims: [usize; 3],
    distance: Vec<f32>,
}

impl DistanceField {
    /// Distance (voxels) at grid voxel `v` and its gradient, by a 3x3x3 Sobel
    /// stencil: central differences smoothed across the other two axes, which
    /// tames the staircase of a voxelized surface. Grid voxels sit inside the
    /// padding, so every stencil cell is in the array.
    pub fn at(&self, v: [u32; 3]) -> (f64, [f64; 3]) {
        let strides = [1, self.dims[0], self.dims[0] * self.dims[1]];
        let p = (v[0] as usize + 1)
            + strides[1] * (v[1] as usize + 1)
            + strides[2] * (v[2] as usize + 1);
        let d = f64::from(self.distance[p]);
        const W: [f32; 3] = [1.0, 2.0, 1.0];
        let mut g = [0.0; 3];
        for (a, g) in g.iter_mut().enumerate() {
            let (sa, sb, sc) = (strides[a], strides[(a + 1) % 3], strides[(a + 2) % 3]);
            let mut sum = 0.0f32;
            for (i, wb) in W.iter().enumerate() {
                for (j, wc) in W.iter().enumerate() {
                    let q = p + i * sb + j * sc - sb - sc;
                    sum += wb * wc * (self.distance[q + sa] - self.distance[q - sa]);
                }
            }
            *g = f64::from(sum) / 32.0;
        }
        (d, g)
    }
}

/// The distance field of `grid`: exterior voxels are the empty ones connected
/// to the outside of the grid, so a sealed cavity counts as inside.
pub fn exterior_distance(grid: &VoxelGrid, spec: &GridSpec) -> DistanceField {
    let dims = spec.dims.map(|d| d as usize + 2);
    let len = dims[0] * dims[1] * dims[2];
    let strides = [1, dims[0], dims[0] * dims[1]];
    // 0 = empty (not yet reached), 1 = occupied, 2 = exterior.
    const EMPTY: u8 = 0;
    const OCCUPIED: u8 = 1;
    const EXTERIOR: u8 = 2;
    let mut state = vec![EXTERIOR; len];
    let [nx, ny, nz] = spec.dims.map(|d| d as usize);
    let mut stack: Vec<usize> = Vec::new();
    let mut i = 0;
    for z in 0..nz {
        for y in 0..ny {
            let row = 1 + strides[1] * (y + 1) + strides[2] * (z + 1);
            let border_row = y == 0 || y + 1 == ny || z == 0 || z + 1 == nz;
            for x in 0..nx {
                let p = row + x;
                if grid.get(i) {
                    state[p] = OCCUPIED;
                } else if border_row || x == 0 || x + 1 == nx {
                    // Empty and next to the padding: exterior, and a seed
                    // of the flood. Only grid cells are ever pushed, so
                    // their six neighbours are inside the padded array.
                    stack.push(p);
                } else {
                    state[p] = EMPTY;
                }
                i += 1;
            }
        }
    }
    while let Some(p) = stack.pop() {
        for s in strides {
            for q in [p - s, p + s] {
                if state[q] == EMPTY {
                    state[q] = EXTERIOR;
                    stack.push(q);
                }
            }
        }
    }
    const FAR: f32 = 1e20;
    let mut squared: Vec<f32> = state
        .iter()
        .map(|&s| if s == EXTERIOR { 0.0 } else { FAR })
        .collect();
    drop(state);
    // One 1-D transform per axis, lines split between two threads.
    for axis in 0..3 {
        let (u, v) = ((axis + 1) % 3, (axis + 2) % 3);
        let lines: Vec<usize> = (0..dims[v])
            .flat_map(|j| (0..dims[u]).map(move |i| i * strides[u] + j * strides[v]))
            .collect();
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, 8);
        let chunk = lines.len().div_ceil(threads).max(1);
        let field = &squared;
        let results: Vec<Vec<f32>> = std::thread::scope(|scope| {
            let handles: Vec<_> = lines
                .chunks(chunk)
                .map(|bases| {
                    scope.spawn(move || {
                        let n = dims[axis];
                        let mut scratch = Scratch::new(n);
                        let mut out = Vec::with_capacity(bases.len() * n);
                        let mut line = vec![0f32; n];
                        for &base in bases {
                            for (k, x) in line.iter_mut().enumerate() {
                                *x = field[base + k * strides[axis]];
                            }
                            transform_1d(&line, &mut scratch);
                            out.extend_from_slice(&scratch.out);
                        }
                        out
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("distance threads do not panic"))
                .collect()
        });
        let n = dims[axis];
        for (bases, values) in lines.chunks(chunk).zip(results) {
            for (b, &base) in bases.iter().enumerate() {
                for k in 0..n {
                    squared[base + k * strides[axis]] = values[b * n + k];
                }
            }
        }
    }
    for x in &mut squared {
        *x = x.sqrt();
    }
    DistanceField {
        dims,
        distance: squared,
    }
}

/// Reusable buffers of the 1-D transform.
struct Scratch {
    v: Vec<usize>,
    z: Vec<f64>,
    out: Vec<f32>,
}

impl Scratch {
    fn new(n: usize) -> Self {
        Self {
            v: vec![0; n],
            z: vec![0.0; n + 1],
            out: vec![0.0; n],
        }
    }
}

/// Lower envelope of parabolas: `out[q] = min_p (q - p)^2 + f[p]`.
fn transform_1d(f: &[f32], scratch: &mut Scratch) {
    let n = f.len();
    let Scratch { v, z, out } = scratch;
    let f64_at = |q: usize| f64::from(f[q]);
    let mut k = 0usize;
    v[0] = 0;
    z[0] = f64::NEG_INFINITY;
    z[1] = f64::INFINITY;
    for q in 1..n {
        loop {
            let p = v[k];
            let s = ((f64_at(q) + (q * q) as f64) - (f64_at(p) + (p * p) as f64))
                / (2.0 * q as f64 - 2.0 * p as f64);
            if s <= z[k] && k > 0 {
                k -= 1;
                continue;
            }
            if s <= z[k] {
                v[0] = q;
                z[0] = f64::NEG_INFINITY;
                z[1] = f64::INFINITY;
                break;
            }
            k += 1;
            v[k] = q;
            z[k] = s;
            z[k + 1] = f64::INFINITY;
            break;
        }
    }
    k = 0;
    for (q, o) in out.iter_mut().enumerate().take(n) {
        while z[k + 1] < q as f64 {
            k += 1;
        }
        let p = v[k];
        let d = q as f64 - p as f64;
        *o = (d * d + f64_at(p)) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_dimensional_transform_is_exact() {
        let far = 1e20f32;
        let f = [far, 0.0, far, far, far, 0.0, far];
        let mut scratch = Scratch::new(f.len());
        transform_1d(&f, &mut scratch);
        assert_eq!(scratch.out, vec![1.0, 0.0, 1.0, 4.0, 1.0, 0.0, 1.0]);
    }
}
