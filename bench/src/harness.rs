//! Timing: run a closure repeatedly, keep every sample, report the median.

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Timing samples of one measured side of a benchmark.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timing {
    /// Median of the samples, seconds.
    pub median_s: f64,
    /// Fastest sample, seconds.
    pub min_s: f64,
    /// Slowest sample, seconds.
    pub max_s: f64,
    /// Number of samples.
    pub samples: usize,
}

impl Timing {
    /// The statistics of `seconds` (samples in any order); `None` when empty.
    pub fn of(seconds: &[f64]) -> Option<Self> {
        let mut v = seconds.to_vec();
        v.sort_by(f64::total_cmp);
        Some(Self {
            median_s: *v.get(v.len() / 2)?,
            min_s: v[0],
            max_s: v[v.len() - 1],
            samples: v.len(),
        })
    }

    /// Every figure times `k` (per-step from per-run, or the reverse).
    pub fn scaled(&self, k: f64) -> Self {
        Self {
            median_s: self.median_s * k,
            min_s: self.min_s * k,
            max_s: self.max_s * k,
            samples: self.samples,
        }
    }
}

/// Runs `f` once to warm up, then `samples` times (at least 3), and
/// returns the timing statistics.
pub fn time<T>(samples: usize, mut f: impl FnMut() -> T) -> Timing {
    std::hint::black_box(f());
    let seconds: Vec<f64> = (0..samples.max(3))
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(f());
            start.elapsed().as_secs_f64()
        })
        .collect();
    Timing::of(&seconds).expect("at least three samples")
}

/// One row of the results table: Pellet against a peer on the same work.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Benchmark group, e.g. `formats`.
    pub group: &'static str,
    /// What is measured.
    pub name: String,
    /// The work, e.g. `1 M particles (40 MB)`.
    pub workload: String,
    /// Pellet's timing.
    pub pellet: Timing,
    /// The peer's name, e.g. `rmp-serde per element`.
    pub peer: String,
    /// The peer's timing, if the peer is available here.
    pub peer_timing: Option<Timing>,
    /// Extra facts (sizes, throughput).
    pub notes: String,
}

impl Row {
    /// Peer median over Pellet median: above 1 means Pellet is faster.
    pub fn speedup(&self) -> Option<f64> {
        self.peer_timing
            .as_ref()
            .map(|p| p.median_s / self.pellet.median_s)
    }
}

/// Formats seconds with a unit that keeps 3 significant figures readable.
pub fn human_time(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

/// A [`Row`] as read back from an earlier `benchmarks.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct SavedRow {
    group: String,
    name: String,
    workload: String,
    pellet: Timing,
    peer: String,
    peer_timing: Option<Timing>,
    notes: String,
}

impl From<SavedRow> for Row {
    fn from(r: SavedRow) -> Self {
        Self {
            // A handful of names per run of this short-lived program.
            group: Box::leak(r.group.into_boxed_str()),
            name: r.name,
            workload: r.workload,
            pellet: r.pellet,
            peer: r.peer,
            peer_timing: r.peer_timing,
            notes: r.notes,
        }
    }
}
