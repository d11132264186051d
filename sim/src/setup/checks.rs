//! Checks of the starting particles: any beyond a closed face of the
//! domain, and pairs that start overlapping deeply.

use super::{FREE, ParticleArrays};

/// Whether the particle at `p` (`xyz` centre, `w` radius) lies more than its
/// radius beyond one of the `closed` faces of the box `lo..hi` (the test the
/// kernels make each step; NaN compares false). Returns the face bit.
pub fn escaped_face(p: [f32; 4], lo: [f32; 3], hi: [f32; 3], closed: u32) -> Option<u32> {
    (0..3).find_map(|a| {
        if closed & (1 << (2 * a)) != 0 && p[a] < lo[a] - p[3] {
            Some(1 << (2 * a))
        } else if closed & (1 << (2 * a + 1)) != 0 && p[a] > hi[a] + p[3] {
            Some(1 << (2 * a + 1))
        } else {
            None
        }
    })
}

/// `x min`, `y max`, ... for a face bit of [`SimSetup::closed_faces`](super::SimSetup::closed_faces).
pub fn face_name(bit: u32) -> String {
    let k = bit.trailing_zeros();
    format!(
        "{} {}",
        ["x", "y", "z"][(k / 2).min(2) as usize],
        if k.is_multiple_of(2) { "min" } else { "max" }
    )
}

/// Overlap, as a fraction of the smaller diameter, above which starting
/// particles are reported: saved settled piles overlap by well under this,
/// duplicated or misplaced particles by far more (coincident ones by 100 %).
pub const OVERLAP_WARNING: f32 = 0.05;

/// Pairs of particles (not of the same body) that start overlapping by more
/// than [`OVERLAP_WARNING`] of the smaller diameter: their count, and the
/// worst one as (persistent ids, overlap in metres, fraction of the smaller
/// diameter).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InitialOverlaps {
    /// Pairs over the threshold.
    pub pairs: u64,
    /// The deepest: ids `a < b`.
    pub worst: (u32, u32),
    /// Its overlap, metres.
    pub depth: f32,
    /// Its overlap over the smaller diameter.
    pub fraction: f32,
}

/// Finds [`InitialOverlaps`] with a hash grid of cells twice the largest
/// radius (each pair is tested once). `None` when no pair is over the threshold.
pub fn initial_overlaps(particles: &ParticleArrays) -> Option<InitialOverlaps> {
    let n = particles.len();
    let r_max = particles.pos.iter().map(|p| p[3]).fold(0.0f32, f32::max);
    if n < 2 || r_max.is_nan() || r_max <= 0.0 {
        return None;
    }
    let cell = 2.0 * r_max;
    let key = |p: &[f32; 4]| -> [i64; 3] { std::array::from_fn(|a| (p[a] / cell).floor() as i64) };
    let mut cells: std::collections::HashMap<[i64; 3], Vec<u32>> =
        std::collections::HashMap::with_capacity(n);
    for (i, p) in particles.pos.iter().enumerate() {
        cells.entry(key(p)).or_default().push(i as u32);
    }
    let mut found: Option<InitialOverlaps> = None;
    for (i, p) in particles.pos.iter().enumerate() {
        let c = key(p);
        for dz in -1..=1 {
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let Some(list) = cells.get(&[c[0] + dx, c[1] + dy, c[2] + dz]) else {
                        continue;
                    };
                    for &j in list {
                        let j = j as usize;
                        let body = particles.meta[i][2];
                        if j <= i || (body != FREE && body == particles.meta[j][2]) {
                            continue;
                        }
                        let q = &particles.pos[j];
                        let d =
                            ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2))
                                .sqrt();
                        let depth = p[3] + q[3] - d;
                        let fraction = depth / (2.0 * p[3].min(q[3]));
                        if fraction > OVERLAP_WARNING {
                            let (a, b) = (particles.meta[i][0], particles.meta[j][0]);
                            let f = found.get_or_insert(InitialOverlaps {
                                pairs: 0,
                                worst: (a.min(b), a.max(b)),
                                depth,
                                fraction,
                            });
                            f.pairs += 1;
                            if depth > f.depth {
                                f.worst = (a.min(b), a.max(b));
                                f.depth = depth;
                                f.fraction = fraction;
                            }
                        }
                    }
                }
            }
        }
    }
    found
}
