//! Writes the results as `docs/BENCHMARKS.md` and JSON.

use std::fmt::Write as _;

use serde::Serialize;

use crate::cases::peers::Peer;
use crate::harness::{Row, human_time};

/// Where and when the benchmarks ran.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Logical cores.
    pub cores: usize,
    /// Memory, GiB.
    pub memory_gib: f64,
    /// GPU adapter, one line, or why there is none.
    pub adapter: String,
    /// UTC date and time of the run.
    pub date: String,
    /// Git commit of the measured tree.
    pub commit: String,
    /// The exact command.
    pub command: String,
}

/// Everything one run produced.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Where and when.
    pub machine: Machine,
    /// Peer programs found or missing.
    pub peers: Vec<Peer>,
    /// Results.
    pub rows: Vec<Row>,
}

impl Report {
    /// The Markdown page.
    pub fn to_markdown(&self) -> String {
        let m = &self.machine;
        let mut s = String::new();
        let _ = writeln!(s, "# Benchmarks\n");
        let _ = writeln!(
            s,
            "Written by `{}` on {}; do not edit by hand. Every row runs Pellet and its peer on the same work in the same run; times are medians. A ratio above 1 means Pellet is faster.\n",
            m.command, m.date
        );
        let _ = writeln!(s, "| machine | |\n|---|---|");
        let _ = writeln!(s, "| CPU | {} ({} logical cores) |", m.cpu, m.cores);
        let _ = writeln!(s, "| memory | {:.1} GiB |", m.memory_gib);
        let _ = writeln!(s, "| GPU adapter | {} |", m.adapter);
        let _ = writeln!(s, "| commit | `{}` |", m.commit);
        let _ = writeln!(s, "\n## Peers\n\n| peer | status |\n|---|---|");
        for p in &self.peers {
            let status = match &p.version {
                Some(v) => format!("installed: {v}"),
                None => format!("not installed here (`{}`); its rows are skipped", p.install),
            };
            let _ = writeln!(s, "| {} | {} |", p.name, status);
        }
        let mut group = "";
        for r in &self.rows {
            if r.group != group {
                group = r.group;
                let _ = writeln!(s, "\n## {group}\n");
                let _ = writeln!(
                    s,
                    "| benchmark | workload | Pellet (median) | peer | peer (median) | ratio | notes |\n|---|---|---|---|---|---|---|"
                );
            }
            let (peer_time, ratio) = match (&r.peer_timing, r.speedup()) {
                (Some(t), Some(x)) => (human_time(t.median_s), format!("{x:.2}x")),
                _ => ("not run".to_owned(), "-".to_owned()),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.name,
                r.workload,
                human_time(r.pellet.median_s),
                r.peer,
                peer_time,
                ratio,
                r.notes
            );
        }
        let _ = writeln!(
            s,
            "\nRaw samples (min, median, max, count) are in `docs/benchmarks.json`. Absolute GPU timings are quoted only from a real GPU; on this machine the adapter is software (lavapipe)."
        );
        s
    }
}
