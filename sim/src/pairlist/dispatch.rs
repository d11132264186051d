//! Runtime choice of the instruction set for [`lanes::pair_forces`]: the
//! one module of the workspace that allows `unsafe` (the workspace denies
//! it), because calling a `#[target_feature]` function is unsafe until the
//! feature is known to be there.
//!
//! Audit: each `unsafe` block below calls a function compiled for a
//! feature only after `is_x86_feature_detected!` has reported that feature
//! on this CPU; the functions themselves contain no unsafe code (they
//! inline the safe [`lanes::pair_forces`]). Without the features, or off
//! x86-64, the portable build of the same function runs. Every build gives
//! bit-identical results (see [`lanes`]).
#![allow(unsafe_code)]

use super::lanes::{self, PairLanes, PairResults};

/// The instruction set [`pair_forces`] uses on this machine: `"avx512"`,
/// `"avx2"` or `"portable"`.
pub fn simd_level() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "avx512";
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return "avx2";
        }
    }
    "portable"
}

/// [`lanes::pair_forces`] with the widest instructions this CPU has.
#[inline]
pub fn pair_forces(b: &PairLanes, dt_hist: f32, out: &mut PairResults) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU reports AVX-512F, the only feature `avx512` is
            // compiled for; the call passes plain references.
            unsafe { avx512(b, dt_hist, out) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU reports AVX2, the only feature `avx2` is
            // compiled for; the call passes plain references.
            unsafe { avx2(b, dt_hist, out) };
            return;
        }
    }
    lanes::pair_forces(b, dt_hist, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn avx512(b: &PairLanes, dt_hist: f32, out: &mut PairResults) {
    lanes::pair_forces(b, dt_hist, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn avx2(b: &PairLanes, dt_hist: f32, out: &mut PairResults) {
    lanes::pair_forces(b, dt_hist, out);
}

/// The portable build, for tests that compare it with the wide ones.
pub fn pair_forces_portable(b: &PairLanes, dt_hist: f32, out: &mut PairResults) {
    lanes::pair_forces(b, dt_hist, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairlist::lanes::LANES;

    /// Random batches with touching, grazing, coincident, sliding and
    /// sticking pairs: the wide build and the portable one agree bit for bit.
    #[test]
    fn wide_and_portable_builds_are_bit_identical() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move |lo: f32, hi: f32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            lo + (hi - lo) * ((seed >> 40) as f32 / (1u64 << 24) as f32)
        };
        for round in 0..200 {
            let mut b = PairLanes::default();
            for l in 0..LANES {
                for a in 0..3 {
                    b.pi[a][l] = rnd(-0.02, 0.02);
                    b.pj[a][l] = if round % 7 == 0 {
                        b.pi[a][l]
                    } else {
                        rnd(-0.02, 0.02)
                    };
                    b.vi[a][l] = rnd(-2.0, 2.0);
                    b.vj[a][l] = rnd(-2.0, 2.0);
                    b.wi[a][l] = rnd(-50.0, 50.0);
                    b.wj[a][l] = rnd(-50.0, 50.0);
                    b.xi[a][l] = rnd(-1e-3, 1e-3);
                }
                b.pi[3][l] = rnd(0.005, 0.015);
                b.pj[3][l] = rnd(0.005, 0.015);
                b.kn[l] = rnd(1e3, 1e5);
                b.kt[l] = if l % 5 == 0 { 0.0 } else { rnd(1e2, 1e4) };
                b.mu[l] = rnd(0.0, 1.0);
                b.c[l] = rnd(0.0, 5.0);
                b.sign[l] = if l % 2 == 0 { 1.0 } else { -1.0 };
            }
            let (mut wide, mut portable) = (PairResults::default(), PairResults::default());
            pair_forces(&b, 1e-5, &mut wide);
            pair_forces_portable(&b, 1e-5, &mut portable);
            let bits = |r: &PairResults| -> Vec<u32> {
                r.f.iter()
                    .chain(&r.tn)
                    .chain(&r.xi)
                    .flat_map(|v| v.map(f32::to_bits))
                    .collect()
            };
            assert_eq!(
                bits(&wide),
                bits(&portable),
                "round {round} ({})",
                simd_level()
            );
            assert_eq!(wide.touching, portable.touching);
        }
    }
}
