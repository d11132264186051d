//! Runtime choice of the instruction set for [`lanes::pair_forces`]: the
//! one module of the workspace that allows `unsafe` (the workspace denies
//! it), because calling a `#[target_feature]` function is unsafe until the
//! feature is known to be there.
//!
//! Audit: each `unsafe` block here and in the submodules calls a function
//! compiled for a feature only after `is_x86_feature_detected!` has
//! reported that feature on this CPU (read once, in [`has_avx512`] and [`has_avx2`];
//! `PELLET_SIMD` may only lower the level). The pair kernels themselves
//! contain no unsafe code (they inline the safe [`lanes::pair_forces`]);
//! the record loads, gathers and sixteen-particle updates check their
//! indices and lengths before they load. Without the features, or off
//! x86-64, the portable build of the same function runs. Every build gives
//! bit-identical results (see [`lanes`]).
//!
//! The files: the record loads, transposes and stores (AVX-512 sixteen
//! records at a time, AVX2 eight; `records.rs`); the fills of a batch's
//! lanes and the lanes' results as records for the scatter (`gather.rs`);
//! the wide prefilter of the listed pairs (`prefilter.rs`); the
//! sixteen-particle Verlet update and gravity start (`update.rs`). This
//! file: the feature detection and the pair kernels.
#![allow(unsafe_code)]

mod gather;
mod prefilter;
#[cfg(target_arch = "x86_64")]
mod records;
mod update;

pub use gather::{fill_lanes, fill_lanes_but_positions, fill_lanes_portable, lane_records};
pub use prefilter::{ListedBlock, has_wide_prefilter, prefilter_block};
pub use update::{VerletStep, gravity16, has_wide_update, verlet16};

use super::lanes::{self, PairLanes, PairResults};
use crate::stages::common::{ROLL_CDT, ROLL_EPSD2, ROLL_NONE};

/// The widest instructions the engine may use: what the CPU reports,
/// lowered by `PELLET_SIMD=avx2` or `PELLET_SIMD=portable` in the
/// environment (to measure or test the narrower builds on a wider CPU).
#[cfg(target_arch = "x86_64")]
fn simd_cap() -> (bool, bool) {
    static CAP: std::sync::OnceLock<(bool, bool)> = std::sync::OnceLock::new();
    *CAP.get_or_init(|| {
        let asked = std::env::var("PELLET_SIMD").unwrap_or_default();
        let avx2 = std::arch::is_x86_feature_detected!("avx2") && asked != "portable";
        let avx512 = std::arch::is_x86_feature_detected!("avx512f") && avx2 && asked != "avx2";
        (avx512, avx2)
    })
}

/// Whether the AVX-512 builds run (the CPU reports AVX-512F, and
/// `PELLET_SIMD` does not lower the level).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx512() -> bool {
    simd_cap().0
}

/// Whether the AVX2 builds run (the CPU reports AVX2, and `PELLET_SIMD` is
/// not `portable`).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx2() -> bool {
    simd_cap().1
}

/// The instruction set [`pair_forces`] uses on this machine: `"avx512"`,
/// `"avx2"` or `"portable"`.
pub fn simd_level() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            return "avx512";
        }
        if has_avx2() {
            return "avx2";
        }
    }
    "portable"
}

/// [`lanes::pair_forces`] with the widest instructions this CPU has
/// (`hertz`: the Hertz-Mindlin lanes; `roll`: the rolling resistance,
/// `ROLL_NONE`, `ROLL_EPSD2` or `ROLL_CDT`).
#[inline]
pub fn pair_forces(b: &PairLanes, dt_hist: f32, hertz: bool, roll: u32, out: &mut PairResults) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the CPU reports AVX-512F, the only feature `avx512` is
            // compiled for; the call passes plain references.
            unsafe { avx512(b, dt_hist, hertz, roll, out) };
            return;
        }
        if has_avx2() {
            // SAFETY: the CPU reports AVX2, the only feature `avx2` is
            // compiled for; the call passes plain references.
            unsafe { avx2(b, dt_hist, hertz, roll, out) };
            return;
        }
    }
    pair_forces_portable(b, dt_hist, hertz, roll, out);
}

/// [`lanes::pair_forces`] for the model chosen at run time (inlined into
/// each instruction set's function).
#[inline(always)]
fn lanes_for(b: &PairLanes, dt_hist: f32, hertz: bool, roll: u32, out: &mut PairResults) {
    match (hertz, roll) {
        (false, ROLL_NONE) => lanes::pair_forces::<false, ROLL_NONE>(b, dt_hist, out),
        (false, ROLL_EPSD2) => lanes::pair_forces::<false, ROLL_EPSD2>(b, dt_hist, out),
        (false, _) => lanes::pair_forces::<false, ROLL_CDT>(b, dt_hist, out),
        (true, ROLL_NONE) => lanes::pair_forces::<true, ROLL_NONE>(b, dt_hist, out),
        (true, ROLL_EPSD2) => lanes::pair_forces::<true, ROLL_EPSD2>(b, dt_hist, out),
        (true, _) => lanes::pair_forces::<true, ROLL_CDT>(b, dt_hist, out),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn avx512(b: &PairLanes, dt_hist: f32, hertz: bool, roll: u32, out: &mut PairResults) {
    lanes_for(b, dt_hist, hertz, roll, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn avx2(b: &PairLanes, dt_hist: f32, hertz: bool, roll: u32, out: &mut PairResults) {
    lanes_for(b, dt_hist, hertz, roll, out);
}

/// The portable build (`PELLET_SIMD=portable`, CPUs without AVX2, and the
/// tests that compare it with the wide ones).
pub fn pair_forces_portable(
    b: &PairLanes,
    dt_hist: f32,
    hertz: bool,
    roll: u32,
    out: &mut PairResults,
) {
    lanes_for(b, dt_hist, hertz, roll, out);
}

#[cfg(test)]
mod tests;
