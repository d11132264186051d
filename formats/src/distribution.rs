//! [`Distribution`]: the generated point sets the neighbour model is
//! validated on (`bake validate-table`) and the neighbour search is tested
//! and benchmarked on (`player nns --generate`): uniform, a packed pile, a
//! tall column, Gaussian clusters. Deterministic in their seed.

use serde::Serialize;

use crate::scene::Rng;

/// A test distribution, in units of the grid cell length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Distribution {
    /// Uniform random in a cube, 10 particles per cell on average.
    Uniform,
    /// A conical heap of densely packed grains (jittered lattice, ~11 per cell).
    Pile,
    /// A tall packed column, 4 times higher than wide (a dam-break start).
    Column,
    /// Gaussian clusters of different widths: very dense cores, empty space between.
    Clusters,
}

impl Distribution {
    /// All four.
    pub const ALL: [Distribution; 4] = [Self::Uniform, Self::Pile, Self::Column, Self::Clusters];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::Pile => "pile",
            Self::Column => "column",
            Self::Clusters => "clusters",
        }
    }

    /// `n` particle positions (cell units, all non-negative), deterministic in `seed`.
    pub fn generate(self, n: usize, seed: u64) -> Vec<[f64; 3]> {
        let mut rng = Rng::new(seed);
        let mut u = move || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        match self {
            Self::Uniform => {
                let side = (n as f64 / 10.0).cbrt();
                (0..n)
                    .map(|_| [u() * side, u() * side, u() * side])
                    .collect()
            }
            Self::Pile | Self::Column => {
                // Jittered lattice at spacing 0.45 (about 11 per cell) inside a
                // cone of slope 1 (pile) or a 1 x 4 x 1 box (column), grown
                // until it holds n particles.
                let s = 0.45;
                let mut size = 4.0f64;
                loop {
                    let inside = |p: [f64; 3]| match self {
                        Self::Pile => {
                            let (dx, dz) = (p[0] - size, p[2] - size);
                            p[1] <= size - (dx * dx + dz * dz).sqrt()
                        }
                        _ => p[0] <= size && p[2] <= size && p[1] <= 4.0 * size,
                    };
                    let extent = if self == Self::Pile {
                        [2.0 * size, size, 2.0 * size]
                    } else {
                        [size, 4.0 * size, size]
                    };
                    let counts = extent.map(|e| (e / s) as usize + 1);
                    let mut out = Vec::new();
                    'fill: for k in 0..counts[1] {
                        for j in 0..counts[2] {
                            for i in 0..counts[0] {
                                let p = [
                                    (i as f64 + 0.5 + 0.3 * (u() - 0.5)) * s,
                                    (k as f64 + 0.5 + 0.3 * (u() - 0.5)) * s,
                                    (j as f64 + 0.5 + 0.3 * (u() - 0.5)) * s,
                                ];
                                if out.len() == n {
                                    break 'fill;
                                }
                                if inside(p) {
                                    out.push(p);
                                }
                            }
                        }
                    }
                    if out.len() == n {
                        return out;
                    }
                    size *= 1.15;
                }
            }
            Self::Clusters => {
                let clusters = 12;
                let side = 60.0;
                let centres: Vec<([f64; 3], f64)> = (0..clusters)
                    .map(|_| {
                        (
                            [
                                10.0 + u() * (side - 20.0),
                                10.0 + u() * (side - 20.0),
                                10.0 + u() * (side - 20.0),
                            ],
                            2.0 + 4.0 * u(),
                        )
                    })
                    .collect();
                let mut gauss = move || {
                    // Box-Muller.
                    let (a, b) = (u().max(1e-300), u());
                    (-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()
                };
                (0..n)
                    .map(|i| {
                        let (c, sigma) = centres[i % clusters];
                        std::array::from_fn(|k| (c[k] + sigma * gauss()).clamp(0.0, side))
                    })
                    .collect()
            }
        }
    }
}
