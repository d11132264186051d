//! Triangle / axis-aligned box overlap by the separating axis theorem
//! (Akenine-Möller 2001): 3 box axes, the triangle normal and the 9 edge
//! cross products. The GPU twin is `shell.wgsl` (same axes, same order).

/// Whether triangle `tri` overlaps the cube of half-size `half` around `centre`
/// (touching counts as overlapping).
pub fn triangle_overlaps_box(tri: &[[f64; 3]; 3], centre: [f64; 3], half: f64) -> bool {
    let v: [[f64; 3]; 3] = tri.map(|p| std::array::from_fn(|a| p[a] - centre[a]));
    let e = [sub(v[1], v[0]), sub(v[2], v[1]), sub(v[0], v[2])];
    // The 9 axes a_ij = e_i x u_j, where u_j are the box axes.
    for edge in &e {
        for j in 0..3 {
            let mut axis = [0.0; 3];
            axis[(j + 1) % 3] = -edge[(j + 2) % 3];
            axis[(j + 2) % 3] = edge[(j + 1) % 3];
            let p = v.map(|q| dot(q, axis));
            let r = half * (axis[0].abs() + axis[1].abs() + axis[2].abs());
            if min3(p) > r || max3(p) < -r {
                return false;
            }
        }
    }
    // The box's own axes: the triangle's bounds against the box.
    for a in 0..3 {
        let p = [v[0][a], v[1][a], v[2][a]];
        if min3(p) > half || max3(p) < -half {
            return false;
        }
    }
    // The triangle's plane.
    let n = cross(e[0], e[1]);
    let d = dot(n, v[0]);
    let r = half * (n[0].abs() + n[1].abs() + n[2].abs());
    d.abs() <= r
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn min3(p: [f64; 3]) -> f64 {
    p[0].min(p[1]).min(p[2])
}

fn max3(p: [f64; 3]) -> f64 {
    p[0].max(p[1]).max(p[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separates_and_overlaps_as_expected() {
        let tri = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]];
        assert!(triangle_overlaps_box(&tri, [0.2, 0.2, 0.0], 0.1));
        assert!(
            triangle_overlaps_box(&tri, [0.2, 0.2, 0.1], 0.1),
            "touching counts"
        );
        assert!(
            !triangle_overlaps_box(&tri, [0.2, 0.2, 0.3], 0.1),
            "above the plane"
        );
        assert!(
            !triangle_overlaps_box(&tri, [0.8, 0.8, 0.0], 0.1),
            "beyond the hypotenuse"
        );
        assert!(
            !triangle_overlaps_box(&tri, [-0.5, 0.5, 0.0], 0.1),
            "left of the triangle"
        );
    }
}
