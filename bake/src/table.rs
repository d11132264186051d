//! `bake table`: the neighbour-overlap table `E(Cq, Cj)` of Kim et al. 2014.
//!
//! `E(o)` is the average over positions `p` uniform in the unit cell `Cq` of
//! the volume of the sphere `S(p, r)` (r = eps / l) inside the cell `Cq + o`,
//! in cell volumes. Equivalently `E(o) = P(|o + u - v| <= r)` for `u`, `v`
//! uniform in the unit cube, i.e. `P(|o + T| <= r)` where `T` has independent
//! triangular components on `[-1, 1]`.
//!
//! Each sample draws `T_x` and `T_y` (seeded Monte Carlo, or a 2-D Sobol
//! sequence) and integrates `T_z` exactly with the triangular CDF, a
//! conditional Monte Carlo estimator: unbiased, with far less variance than
//! counting sphere hits. Samples are split into 16 independent batches
//! (random batches, or randomly shifted Sobol copies) and the standard error
//! of each entry is the spread of the batch means.

use pellet_formats::PodVec;
use pellet_formats::assets::{OverlapTable, SamplingMethod};
use pellet_formats::scene::Rng;

/// Independent batches per entry, for the standard error.
pub const BATCHES: usize = 16;

/// Most memory the samples may take, bytes (4 GiB): all `(T_x, T_y)` pairs
/// are kept (16 bytes each) and reused for every ratio and offset, so
/// `samples` is at most 2^28 = 268 435 456 per entry (the default is 10^6).
pub const MAX_SAMPLE_BYTES: u64 = 4 << 30;

/// Bytes one sample takes.
const SAMPLE_BYTES: u64 = size_of::<[f64; 2]>() as u64;

/// Most samples per entry, from [`MAX_SAMPLE_BYTES`].
pub const MAX_SAMPLES: u64 = MAX_SAMPLE_BYTES / SAMPLE_BYTES;

/// `bytes` in binary units, three significant figures: `14.6 TiB`.
fn binary_size(bytes: u64) -> String {
    let mut value = bytes as f64;
    for unit in ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"] {
        if value < 1024.0 || unit == "PiB" {
            return if unit == "bytes" {
                format!("{bytes} bytes")
            } else {
                format!("{value:.1} {unit}")
            };
        }
        value /= 1024.0;
    }
    format!("{bytes} bytes")
}

/// How to bake a table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableSettings {
    /// Smallest ratio eps / l. Default 0.1.
    pub ratio_min: f64,
    /// Largest ratio eps / l (at most 2). Default 2.
    pub ratio_max: f64,
    /// Ratios tabulated, evenly spaced. Default 64.
    pub ratios: u32,
    /// Samples per entry. Default 1 000 000 (as the paper).
    pub samples: u64,
    /// Seed of the sampler.
    pub seed: u64,
    /// Monte Carlo or Sobol.
    pub method: SamplingMethod,
}

impl Default for TableSettings {
    fn default() -> Self {
        Self {
            ratio_min: 0.1,
            ratio_max: 2.0,
            ratios: 64,
            samples: 1_000_000,
            seed: 0,
            method: SamplingMethod::MonteCarlo,
        }
    }
}

/// Why a table cannot be baked with these settings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// Bad ratio range.
    #[error("the ratio range must satisfy 0 < ratio-min <= ratio-max <= 2, not {min}..{max}")]
    Range {
        /// Given minimum.
        min: f64,
        /// Given maximum.
        max: f64,
    },
    /// Zero ratios, or one ratio for a range.
    #[error("need at least 2 ratios for a range (or ratio-min = ratio-max for one), not {0}")]
    Ratios(u32),
    /// Too few samples for the batches.
    #[error("need at least {BATCHES} samples, not {0}")]
    Samples(u64),
    /// More samples than [`MAX_SAMPLE_BYTES`] holds; refused before allocating.
    #[error(
        "{samples} samples per entry need {} of memory, more than the {} limit (at most {MAX_SAMPLES} samples)",
        binary_size(samples.saturating_mul(SAMPLE_BYTES)),
        binary_size(MAX_SAMPLE_BYTES)
    )]
    TooManySamples {
        /// Samples asked for.
        samples: u64,
    },
}

/// Triangular CDF on [-1, 1] with mode 0.
fn tri_cdf(t: f64) -> f64 {
    if t <= -1.0 {
        0.0
    } else if t <= 0.0 {
        0.5 * (t + 1.0) * (t + 1.0)
    } else if t < 1.0 {
        1.0 - 0.5 * (1.0 - t) * (1.0 - t)
    } else {
        1.0
    }
}

/// Inverse triangular CDF: maps a uniform `w` in [0, 1) to `T`.
fn tri_inv(w: f64) -> f64 {
    if w < 0.5 {
        (2.0 * w).sqrt() - 1.0
    } else {
        1.0 - (2.0 * (1.0 - w)).sqrt()
    }
}

/// Canonical offsets `0 <= a <= b <= c <= reach`.
pub fn canonical_offsets(reach: i8) -> Vec<[i8; 3]> {
    let mut out = Vec::new();
    for c in 0..=reach {
        for b in 0..=c {
            for a in 0..=b {
                out.push([a, b, c]);
            }
        }
    }
    out
}

/// Whether the sphere of radius `r` around some point of the unit cell reaches cell `o`.
fn reachable(o: [i8; 3], r: f64) -> bool {
    let d2: f64 = o
        .iter()
        .map(|&x| (f64::from(x) - 1.0).max(0.0).powi(2))
        .sum();
    d2 < r * r
}

/// 2-D Sobol points (the first two dimensions: van der Corput in base 2, and
/// the Pascal-matrix dimension), `n` of them, as `[0, 1)` pairs.
fn sobol_2d(n: usize) -> Vec<[f64; 2]> {
    let mut v2 = [0u32; 32];
    v2[0] = 1 << 31;
    for k in 1..32 {
        v2[k] = v2[k - 1] ^ (v2[k - 1] >> 1);
    }
    let mut out = Vec::with_capacity(n);
    let (mut x, mut y) = (0u32, 0u32);
    for i in 0..n {
        out.push([
            f64::from(x) / 4_294_967_296.0,
            f64::from(y) / 4_294_967_296.0,
        ]);
        // Gray-code update: flip the direction number of the lowest zero bit of i.
        let c = (!i).trailing_zeros() as usize;
        if c < 32 {
            x ^= 1 << (31 - c);
            y ^= v2[c];
        }
    }
    out
}

/// The `(T_x, T_y)` samples of each batch.
fn samples(settings: &TableSettings) -> Vec<Vec<[f64; 2]>> {
    let per_batch = (settings.samples as usize).div_ceil(BATCHES);
    let mut rng = Rng::new(settings.seed);
    let mut uniform = move || (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
    let base = match settings.method {
        SamplingMethod::Sobol => sobol_2d(per_batch),
        SamplingMethod::MonteCarlo => Vec::new(),
    };
    (0..BATCHES)
        .map(|_| match settings.method {
            SamplingMethod::MonteCarlo => (0..per_batch)
                .map(|_| [tri_inv(uniform()), tri_inv(uniform())])
                .collect(),
            SamplingMethod::Sobol => {
                // Cranley-Patterson rotation: an independent random shift per batch.
                let shift = [uniform(), uniform()];
                base.iter()
                    .map(|p| {
                        [
                            tri_inv((p[0] + shift[0]).fract()),
                            tri_inv((p[1] + shift[1]).fract()),
                        ]
                    })
                    .collect()
            }
        })
        .collect()
}

/// Mean and standard error of `E(o)` at ratio `r` over the batches.
fn estimate(batches: &[Vec<[f64; 2]>], o: [i8; 3], r: f64) -> (f64, f64) {
    if !reachable(o, r) {
        return (0.0, 0.0);
    }
    let [a, b, c] = o.map(f64::from);
    let r2 = r * r;
    let means: Vec<f64> = batches
        .iter()
        .map(|batch| {
            let mut sum = 0.0;
            for t in batch {
                let (x, y) = (a + t[0], b + t[1]);
                let h2 = r2 - x * x - y * y;
                if h2 > 0.0 {
                    let h = h2.sqrt();
                    sum += tri_cdf(h - c) - tri_cdf(-h - c);
                }
            }
            sum / batch.len() as f64
        })
        .collect();
    let mean = means.iter().sum::<f64>() / means.len() as f64;
    let var = means.iter().map(|m| (m - mean) * (m - mean)).sum::<f64>() / (means.len() - 1) as f64;
    (mean, (var / means.len() as f64).sqrt())
}

/// One ratio's index and its `(value, stderr)` per canonical offset.
type RatioEntries = (usize, Vec<(f64, f64)>);

/// Bakes the table, using every core.
pub fn bake_table(settings: &TableSettings) -> Result<OverlapTable, TableError> {
    let (min, max) = (settings.ratio_min, settings.ratio_max);
    if !(min > 0.0 && min <= max && max <= 2.0) {
        return Err(TableError::Range { min, max });
    }
    if settings.ratios == 0
        || (settings.ratios == 1 && min != max)
        || (settings.ratios > 1 && min == max)
    {
        return Err(TableError::Ratios(settings.ratios));
    }
    if settings.samples < BATCHES as u64 {
        return Err(TableError::Samples(settings.samples));
    }
    // MAX_SAMPLES is whole batches, so rounding up to batches stays within it.
    if settings.samples > MAX_SAMPLES {
        return Err(TableError::TooManySamples {
            samples: settings.samples,
        });
    }
    let ratios: Vec<f64> = (0..settings.ratios)
        .map(|i| {
            if settings.ratios == 1 {
                min
            } else {
                min + (max - min) * f64::from(i) / f64::from(settings.ratios - 1)
            }
        })
        .collect();
    let reach = if max <= 1.0 { 1 } else { 2 };
    let offsets = canonical_offsets(reach);
    let batches = samples(settings);
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, 16);
    // Ratios are dealt round-robin so each thread gets small and large ones.
    let results: Vec<Vec<RatioEntries>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (batches, ratios, offsets) = (&batches, &ratios, &offsets);
                scope.spawn(move || {
                    (t..ratios.len())
                        .step_by(threads)
                        .map(|k| {
                            (
                                k,
                                offsets
                                    .iter()
                                    .map(|&o| estimate(batches, o, ratios[k]))
                                    .collect(),
                            )
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("table threads do not panic"))
            .collect()
    });
    let m = offsets.len();
    let mut values = vec![0f32; ratios.len() * m];
    let mut stderr = vec![0f32; ratios.len() * m];
    for (k, entries) in results.into_iter().flatten() {
        for (o, (v, e)) in entries.into_iter().enumerate() {
            values[k * m + o] = v as f32;
            stderr[k * m + o] = e as f32;
        }
    }
    Ok(OverlapTable {
        method: settings.method,
        samples: (settings.samples as usize).div_ceil(BATCHES) as u64 * BATCHES as u64,
        seed: settings.seed,
        ratios: PodVec(ratios.iter().map(|&r| r as f32).collect()),
        offsets: PodVec(offsets),
        values: PodVec(values),
        stderr: PodVec(stderr),
    })
}

/// `E(0)` in closed form for `r <= 1` (the average overlap of the sphere with
/// its own cell): the integral over the ball of the product of triangular
/// densities, `4/3 pi r^3 - 3/2 pi r^4 + 8/5 r^5 - r^6 / 6`.
pub fn self_overlap_exact(r: f64) -> f64 {
    use std::f64::consts::PI;
    4.0 / 3.0 * PI * r.powi(3) - 1.5 * PI * r.powi(4) + 1.6 * r.powi(5) - r.powi(6) / 6.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triangular_inverse_and_cdf_agree() {
        for w in [0.0, 0.1, 0.5, 0.75, 0.999] {
            assert!((tri_cdf(tri_inv(w)) - w).abs() < 1e-12);
        }
    }

    #[test]
    fn sample_sizes_read_in_binary_units() {
        assert_eq!(binary_size(1000), "1000 bytes");
        assert_eq!(binary_size(4 << 30), "4.0 GiB");
        assert_eq!(binary_size(16_000_000_000_000), "14.6 TiB");
    }

    #[test]
    fn sobol_starts_as_expected() {
        let p = sobol_2d(4);
        assert_eq!(p, vec![[0.0, 0.0], [0.5, 0.5], [0.75, 0.25], [0.25, 0.75]]);
    }
}

#[cfg(test)]
mod symmetry_tests {
    use super::*;

    /// The same cell offset along different axes goes through different code
    /// paths (sampled x and y, integrated z): the results agree within errors.
    #[test]
    fn permuted_offsets_agree_within_their_errors() {
        let settings = TableSettings {
            samples: 64_000,
            seed: 5,
            ..Default::default()
        };
        let batches = samples(&settings);
        for r in [0.4, 0.9, 1.3, 1.9] {
            for o in [[0i8, 0, 1], [0, 1, 1], [0, 1, 2]] {
                let perms = [[o[0], o[1], o[2]], [o[2], o[0], o[1]], [o[1], o[2], o[0]]];
                let est: Vec<(f64, f64)> =
                    perms.iter().map(|&p| estimate(&batches, p, r)).collect();
                for e in &est[1..] {
                    let tol = 5.0 * (e.1 * e.1 + est[0].1 * est[0].1).sqrt() + 1e-9;
                    assert!((e.0 - est[0].0).abs() <= tol, "r {r} {o:?}: {est:?}");
                }
            }
        }
    }
}
