//! Distance from each voxel to the body's exterior, for particle depths and
//! outward normals: an exact Euclidean distance transform (Felzenszwalb and
//! Huttenlocher 2012) of the voxels reachable from outside the grid.

use crate::voxel::{GridSpec, VoxelGrid};

/// Squared Euclidean distance, in voxels, from every voxel of a grid padded by
/// one on each side to the nearest exterior voxel centre.
#[derive(Debug)]
pub struct DistanceField {
    dims: [usize; 3],
    squared: Vec<f32>,
}

impl DistanceField {
    fn get(&self, p: [isize; 3]) -> f64 {
        let c: [usize; 3] =
            std::array::from_fn(|a| p[a].clamp(0, self.dims[a] as isize - 1) as usize);
        f64::from(self.squared[c[0] + self.dims[0] * (c[1] + self.dims[1] * c[2])]).sqrt()
    }

    /// Distance (voxels) at grid voxel `v` and its central-difference gradient.
    pub fn at(&self, v: [u32; 3]) -> (f64, [f64; 3]) {
        let p = v.map(|x| x as isize + 1);
        let d = self.get(p);
        let g = std::array::from_fn(|a| {
            let mut lo = p;
            let mut hi = p;
            lo[a] -= 1;
            hi[a] += 1;
            0.5 * (self.get(hi) - self.get(lo))
        });
        (d, g)
    }
}

/// The distance field of `grid`: exterior voxels are the empty ones connected
/// to the outside of the grid, so a sealed cavity counts as inside.
pub fn exterior_distance(grid: &VoxelGrid, spec: &GridSpec) -> DistanceField {
    let dims = spec.dims.map(|d| d as usize + 2);
    let len = dims[0] * dims[1] * dims[2];
    let at = |x: usize, y: usize, z: usize| x + dims[0] * (y + dims[1] * z);
    let occupied = |x: usize, y: usize, z: usize| {
        (1..dims[0] - 1).contains(&x)
            && (1..dims[1] - 1).contains(&y)
            && (1..dims[2] - 1).contains(&z)
            && grid.get(spec.index([x as u32 - 1, y as u32 - 1, z as u32 - 1]))
    };
    // Flood the exterior from the padding.
    let mut exterior = vec![false; len];
    let mut stack = vec![[0usize, 0, 0]];
    exterior[0] = true;
    while let Some([x, y, z]) = stack.pop() {
        let mut visit = |nx: usize, ny: usize, nz: usize| {
            let i = at(nx, ny, nz);
            if !exterior[i] && !occupied(nx, ny, nz) {
                exterior[i] = true;
                stack.push([nx, ny, nz]);
            }
        };
        if x > 0 {
            visit(x - 1, y, z);
        }
        if x + 1 < dims[0] {
            visit(x + 1, y, z);
        }
        if y > 0 {
            visit(x, y - 1, z);
        }
        if y + 1 < dims[1] {
            visit(x, y + 1, z);
        }
        if z > 0 {
            visit(x, y, z - 1);
        }
        if z + 1 < dims[2] {
            visit(x, y, z + 1);
        }
    }
    const FAR: f32 = 1e20;
    let mut squared: Vec<f32> = exterior
        .iter()
        .map(|&e| if e { 0.0 } else { FAR })
        .collect();
    drop(exterior);
    // One 1-D transform per axis.
    let mut line = Vec::new();
    let mut out = Vec::new();
    for axis in 0..3 {
        let (u, v) = ((axis + 1) % 3, (axis + 2) % 3);
        let stride = [1, dims[0], dims[0] * dims[1]];
        for j in 0..dims[v] {
            for i in 0..dims[u] {
                let base = i * stride[u] + j * stride[v];
                line.clear();
                line.extend((0..dims[axis]).map(|k| squared[base + k * stride[axis]]));
                transform_1d(&line, &mut out);
                for (k, &d) in out.iter().enumerate() {
                    squared[base + k * stride[axis]] = d;
                }
            }
        }
    }
    DistanceField { dims, squared }
}

/// Lower envelope of parabolas: `out[q] = min_p (q - p)^2 + f[p]`.
fn transform_1d(f: &[f32], out: &mut Vec<f32>) {
    let n = f.len();
    out.clear();
    out.resize(n, 0.0);
    let mut v = vec![0usize; n];
    let mut z = vec![0f64; n + 1];
    let mut k = 0usize;
    z[0] = f64::NEG_INFINITY;
    z[1] = f64::INFINITY;
    let f64_at = |q: usize| f64::from(f[q]);
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
                // k == 0 and the new parabola dominates from the start.
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
    for (q, o) in out.iter_mut().enumerate() {
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
        let mut out = Vec::new();
        transform_1d(&f, &mut out);
        assert_eq!(out, vec![1.0, 0.0, 1.0, 4.0, 1.0, 0.0, 1.0]);
    }
}
