//! Checks of the starting particles: any beyond a closed face of the
//! domain, and pairs that start overlapping deeply.

use rustc_hash::FxHashMap;

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

/// The starting particles sorted by cell (a counting sort into one index
/// array): a dense grid over the occupied box when it has at most
/// [`DENSE_CELLS_PER_PARTICLE`] cells a particle, else the occupied cells
/// found through a hash map of their keys.
struct CellGrid {
    /// The particles of cell `c`, ascending: `members[start[c]..start[c + 1]]`.
    start: Vec<u32>,
    members: Vec<u32>,
    lookup: CellLookup,
}

/// How a cell key becomes a cell number.
enum CellLookup {
    /// Cells numbered `x + dims.x (y + dims.y z)` from the box's lowest key.
    Dense { lo: [i64; 3], dims: [i64; 3] },
    /// Cells numbered in order of first appearance.
    Sparse(FxHashMap<[i64; 3], u32>),
}

/// The most cells a particle the dense grid of [`initial_overlaps`] may use.
const DENSE_CELLS_PER_PARTICLE: i64 = 8;

impl CellGrid {
    fn new(keys: &[[i64; 3]]) -> Self {
        let n = keys.len() as i64;
        let mut lo = [i64::MAX; 3];
        let mut hi = [i64::MIN; 3];
        for k in keys {
            for a in 0..3 {
                lo[a] = lo[a].min(k[a]);
                hi[a] = hi[a].max(k[a]);
            }
        }
        let dims: [i64; 3] = std::array::from_fn(|a| hi[a].saturating_sub(lo[a]).saturating_add(1));
        let cells = dims
            .iter()
            .try_fold(1i64, |acc, &d| acc.checked_mul(d))
            .filter(|&c| c <= DENSE_CELLS_PER_PARTICLE.saturating_mul(n).max(1024))
            .filter(|&c| c < i64::from(u32::MAX));
        let (lookup, cell_of, count) = match cells {
            Some(count) => {
                let lookup = CellLookup::Dense { lo, dims };
                let cell_of = keys.iter().map(|k| lookup.find(k).unwrap_or(0)).collect();
                (lookup, cell_of, count as usize)
            }
            None => {
                let mut index: FxHashMap<[i64; 3], u32> =
                    FxHashMap::with_capacity_and_hasher(keys.len(), Default::default());
                let cell_of: Vec<u32> = keys
                    .iter()
                    .map(|k| {
                        let next = index.len() as u32;
                        *index.entry(*k).or_insert(next)
                    })
                    .collect();
                let count = index.len();
                (CellLookup::Sparse(index), cell_of, count)
            }
        };
        let mut start = vec![0u32; count + 1];
        for &c in &cell_of {
            start[c as usize + 1] += 1;
        }
        for c in 0..count {
            start[c + 1] += start[c];
        }
        let mut fill = start.clone();
        let mut members = vec![0u32; keys.len()];
        for (i, &c) in cell_of.iter().enumerate() {
            members[fill[c as usize] as usize] = i as u32;
            fill[c as usize] += 1;
        }
        CellGrid {
            start,
            members,
            lookup,
        }
    }

    /// The particles of the cell at `key`, ascending (empty for none).
    fn cell(&self, key: &[i64; 3]) -> &[u32] {
        match self.lookup.find(key) {
            Some(c) => {
                let c = c as usize;
                &self.members[self.start[c] as usize..self.start[c + 1] as usize]
            }
            None => &[],
        }
    }
}

impl CellLookup {
    fn find(&self, key: &[i64; 3]) -> Option<u32> {
        match self {
            CellLookup::Dense { lo, dims } => {
                let mut c = 0i64;
                for a in (0..3).rev() {
                    let x = key[a].checked_sub(lo[a])?;
                    if !(0..dims[a]).contains(&x) {
                        return None;
                    }
                    c = c * dims[a] + x;
                }
                Some(c as u32)
            }
            CellLookup::Sparse(index) => index.get(key).copied(),
        }
    }
}

/// Finds [`InitialOverlaps`] with a grid of cells twice the largest radius
/// ([`CellGrid`]): each particle's 27 cells searched, each pair tested
/// once. `None` when no pair is over the threshold. The pairs are visited
/// by particle, then cell, then particle order, so the deepest of equally
/// deep pairs is always the same one.
pub fn initial_overlaps(particles: &ParticleArrays) -> Option<InitialOverlaps> {
    let n = particles.len();
    let r_max = particles.pos.iter().map(|p| p[3]).fold(0.0f32, f32::max);
    if n < 2 || r_max.is_nan() || r_max <= 0.0 {
        return None;
    }
    let cell = 2.0 * r_max;
    let key = |p: &[f32; 4]| -> [i64; 3] { std::array::from_fn(|a| (p[a] / cell).floor() as i64) };
    let keys: Vec<[i64; 3]> = particles.pos.iter().map(key).collect();
    let grid = CellGrid::new(&keys);
    let mut found: Option<InitialOverlaps> = None;
    for (i, p) in particles.pos.iter().enumerate() {
        let c = keys[i];
        let body = particles.meta[i][2];
        for dz in -1..=1 {
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let (Some(x), Some(y), Some(z)) = (
                        c[0].checked_add(dx),
                        c[1].checked_add(dy),
                        c[2].checked_add(dz),
                    ) else {
                        continue;
                    };
                    let list = grid.cell(&[x, y, z]);
                    // Only the later particles of the cell (each pair once).
                    let later = list.partition_point(|&j| j as usize <= i);
                    for &j in &list[later..] {
                        let j = j as usize;
                        if body != FREE && body == particles.meta[j][2] {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair tested directly: the count of pairs over the threshold
    /// and the deepest overlap, or `None`.
    fn brute_force(p: &ParticleArrays) -> Option<(u64, f32)> {
        let mut found: Option<(u64, f32)> = None;
        for i in 0..p.len() {
            for j in i + 1..p.len() {
                let body = p.meta[i][2];
                if body != FREE && body == p.meta[j][2] {
                    continue;
                }
                let (a, b) = (p.pos[i], p.pos[j]);
                let d =
                    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt();
                let depth = a[3] + b[3] - d;
                if depth / (2.0 * a[3].min(b[3])) > OVERLAP_WARNING {
                    let f = found.get_or_insert((0, depth));
                    f.0 += 1;
                    f.1 = f.1.max(depth);
                }
            }
        }
        found
    }

    #[test]
    fn the_grid_finds_what_testing_every_pair_finds() {
        let mut seed = 0x2545_f491_u64;
        let mut unit = || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            ((seed >> 33) as f32) / (1u64 << 31) as f32
        };
        for (count, side) in [(2usize, 0.05f32), (300, 0.2), (2000, 0.4), (2000, 40.0)] {
            let mut p = ParticleArrays::default();
            for k in 0..count {
                let r = 0.005 + 0.01 * unit();
                let c = [unit() * side, unit() * side - 3.0, unit() * side];
                p.pos.push([c[0], c[1], c[2], r]);
                // A few bodies of several particles (their own overlaps do
                // not count), the rest free; and a coincident pair.
                let body = if k % 7 == 0 { (k % 5) as u32 } else { FREE };
                p.meta.push([k as u32 * 3 + 1, 0, body, 0]);
                p.vel.push([0.0; 4]);
                p.angvel.push([0.0; 4]);
                p.local.push([0.0; 4]);
            }
            if count > 2 {
                p.pos[1] = p.pos[0];
            }
            let grid = initial_overlaps(&p);
            let reference = brute_force(&p);
            // Every set but the first holds overlaps (the sparse one only
            // its coincident pair), so the comparison tests something.
            assert!(count == 2 || reference.is_some(), "{count} in {side} m");
            assert_eq!(
                grid.map(|o| (o.pairs, o.depth)),
                reference,
                "{count} in {side} m"
            );
            if let Some(o) = grid {
                assert!(o.worst.0 < o.worst.1);
            }
        }
        assert!(brute_force(&ParticleArrays::default()).is_none());
    }
}
