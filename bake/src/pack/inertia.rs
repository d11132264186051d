//! Mass properties of a set of equal cubic voxels.

/// Mass, centre of mass and inertia of a voxel body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MassProperties {
    /// Total mass, kg.
    pub mass: f64,
    /// Centre of mass, metres.
    pub centre_of_mass: [f64; 3],
    /// Inertia tensor about the centre of mass, kg m^2.
    pub inertia: [[f64; 3]; 3],
    /// Eigenvalues of `inertia`, ascending.
    pub principal_moments: [f64; 3],
    /// Unit eigenvectors as rows, right-handed, in the order of the moments.
    pub principal_axes: [[f64; 3]; 3],
}

/// Each voxel is a cube of edge `a` and density `rho`: a point mass at its
/// centre plus the cube's own `m a^2 / 6` about each axis.
pub fn mass_properties(centres: &[[f64; 3]], a: f64, rho: f64) -> MassProperties {
    let m = rho * a * a * a;
    let n = centres.len() as f64;
    let mass = m * n;
    let mut com = [0.0; 3];
    for c in centres {
        for k in 0..3 {
            com[k] += c[k];
        }
    }
    let com = com.map(|x| x / n);
    let mut inertia = [[0.0; 3]; 3];
    for c in centres {
        let r: [f64; 3] = std::array::from_fn(|k| c[k] - com[k]);
        let r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
        for i in 0..3 {
            for j in 0..3 {
                let delta = if i == j { r2 } else { 0.0 };
                inertia[i][j] += m * (delta - r[i] * r[j]);
            }
        }
    }
    for (i, row) in inertia.iter_mut().enumerate() {
        row[i] += mass * a * a / 6.0;
    }
    let (principal_moments, principal_axes) = symmetric_eigen(inertia);
    MassProperties {
        mass,
        centre_of_mass: com,
        inertia,
        principal_moments,
        principal_axes,
    }
}

/// Eigenvalues (ascending) and unit eigenvectors (rows, right-handed) of a
/// symmetric 3x3 matrix, by cyclic Jacobi rotations.
pub fn symmetric_eigen(m: [[f64; 3]; 3]) -> ([f64; 3], [[f64; 3]; 3]) {
    let mut a = m;
    let mut v = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]; // columns = eigenvectors
    let scale = a
        .iter()
        .flatten()
        .fold(0.0f64, |s, x| s.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    for _sweep in 0..64 {
        let off = a[0][1].abs() + a[0][2].abs() + a[1][2].abs();
        if off <= 1e-15 * scale {
            break;
        }
        for (p, q) in [(0, 1), (0, 2), (1, 2)] {
            if a[p][q].abs() <= 1e-300 {
                continue;
            }
            let theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
            let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
            let t = if theta == 0.0 { 1.0 } else { t };
            let c = 1.0 / (t * t + 1.0).sqrt();
            let s = t * c;
            // a = J^T a J for the rotation J in the (p, q) plane.
            for k in 0..3 {
                let (akp, akq) = (a[k][p], a[k][q]);
                a[k][p] = c * akp - s * akq;
                a[k][q] = s * akp + c * akq;
            }
            for k in 0..3 {
                let (apk, aqk) = (a[p][k], a[q][k]);
                a[p][k] = c * apk - s * aqk;
                a[q][k] = s * apk + c * aqk;
            }
            for row in &mut v {
                let (vkp, vkq) = (row[p], row[q]);
                row[p] = c * vkp - s * vkq;
                row[q] = s * vkp + c * vkq;
            }
        }
    }
    let mut order = [0usize, 1, 2];
    order.sort_by(|&i, &j| a[i][i].total_cmp(&a[j][j]));
    let values = order.map(|i| a[i][i]);
    let mut axes = order.map(|i| [v[0][i], v[1][i], v[2][i]]);
    // Right-handed: third axis = first x second.
    let c = [
        axes[0][1] * axes[1][2] - axes[0][2] * axes[1][1],
        axes[0][2] * axes[1][0] - axes[0][0] * axes[1][2],
        axes[0][0] * axes[1][1] - axes[0][1] * axes[1][0],
    ];
    if c[0] * axes[2][0] + c[1] * axes[2][1] + c[2] * axes[2][2] < 0.0 {
        axes[2] = axes[2].map(|x| -x);
    }
    (values, axes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eigen_decomposition_reconstructs_the_matrix() {
        let m = [[4.0, 1.0, -2.0], [1.0, 3.0, 0.5], [-2.0, 0.5, 5.0]];
        let (values, axes) = symmetric_eigen(m);
        assert!(values[0] <= values[1] && values[1] <= values[2]);
        for i in 0..3 {
            for j in 0..3 {
                let r: f64 = (0..3).map(|k| axes[k][i] * values[k] * axes[k][j]).sum();
                assert!((r - m[i][j]).abs() < 1e-12, "{r} vs {}", m[i][j]);
            }
        }
    }

    #[test]
    fn a_single_voxel_is_a_cube() {
        let p = mass_properties(&[[1.0, 2.0, 3.0]], 0.1, 1000.0);
        assert!((p.mass - 1.0).abs() < 1e-12);
        assert_eq!(p.centre_of_mass, [1.0, 2.0, 3.0]);
        for i in 0..3 {
            assert!((p.inertia[i][i] - 1.0 * 0.01 / 6.0).abs() < 1e-15);
        }
    }
}
