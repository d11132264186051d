//! The CPU search: the exact distance test over runs of sorted points,
//! [`LANES`] candidates at a time, and the half-shell traversal of a box of
//! cells that tests each pair once and writes it into both points' lists.
//!
//! Functions marked `#[inline(always)]` here are compiled once per
//! instruction set by [`crate::simd`] (AVX-512, AVX2, portable), which the
//! compiler vectorises; every build computes the same f64 sums in the same
//! order (no fused multiply-add), so every build finds the same pairs.
//!
//! The files: [`Sink`] (`sink.rs`, output that grows while a vector build
//! stores whole registers); the [`Lanes`] test and the scans of candidate
//! runs (`lanes.rs`); the per-cell gathered candidate lists and the full
//! lists of a set of cells (`cells.rs`); the [`BoxIndex`] of a box of cells
//! and the [`half_shell`] pass over it (`shell.rs`); the flat passes that
//! count and write its lists in box order (`lists.rs`); the lists written
//! straight into input order (`input_order.rs`).

mod cells;
mod input_order;
mod lanes;
mod lists;
mod shell;
mod sink;

pub use cells::full_cells;
pub use input_order::input_order_lists;
pub use lanes::{Lanes, Points, Portable, full_shell, keep, scan, unit};
pub use lists::{box_lists, list_lengths};
pub use shell::{BoxIndex, HalfShell, half_shell};
pub use sink::{SINK_ROOM, Sink};

use super::grid::CellGrid;

/// Candidates tested per step: one AVX-512 vector of f32 (four AVX2
/// vectors of f64).
pub const LANES: usize = 16;

/// A point's coordinates widened to f64, exactly.
#[inline(always)]
pub fn query(grid: &CellGrid, s: usize) -> [f64; 3] {
    [
        f64::from(grid.xs[s]),
        f64::from(grid.ys[s]),
        f64::from(grid.zs[s]),
    ]
}

#[cfg(test)]
mod tests;
