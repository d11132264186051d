//! [`Plan`]: how one build cuts the scene over the ranks. Every rank
//! computes it from the same global count of particles per occupied layer
//! of cells, so every rank computes the same plan:
//!
//! - **slabs** exactly as one rank cuts them (whole layers, about
//!   `n / TARGET_SLABS` particles each, independent of the rank count), so
//!   each slab's phase, and so every particle's sum, is the same on any
//!   number of ranks;
//! - **ranks** own runs of whole slabs, placed by particle count (as
//!   LIGGGHTS' `balance`);
//! - **halos**: a rank also reads the previous rank's last layer (whose
//!   rows reach its first particles) and the next rank's first layer
//!   (which its last rows reach). A pair reaches at most the next layer.

use std::ops::Range;

use crate::pairlist::TARGET_SLABS;

/// The cut of one build.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Occupied layers (the major cell coordinate), ascending.
    pub layers: Vec<u64>,
    /// Particles in each.
    pub counts: Vec<u64>,
    /// Index (into `layers`) of each slab's first layer, and `layers.len()` at the end.
    pub slab_layer: Vec<usize>,
    /// The slabs each rank owns.
    pub rank_slabs: Vec<Range<usize>>,
}

/// Where one layer's particles go at a build.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Destinations {
    /// The rank that owns them.
    pub owner: usize,
    /// The rank that reads them as the first layer after its own.
    pub reader_before: Option<usize>,
    /// The rank that reads them as the last layer before its own.
    pub reader_after: Option<usize>,
}

impl Destinations {
    /// Every rank, owner first.
    pub fn ranks(&self) -> impl Iterator<Item = usize> {
        std::iter::once(self.owner)
            .chain(self.reader_before)
            .chain(self.reader_after)
    }
}

impl Plan {
    /// The plan for `histogram` (`(layer, particles)`, any order, layers may
    /// repeat: they are summed) over `ranks` ranks.
    pub fn new(mut histogram: Vec<(u64, u64)>, ranks: usize) -> Self {
        histogram.sort_unstable();
        let mut layers: Vec<u64> = Vec::new();
        let mut counts: Vec<u64> = Vec::new();
        for (layer, count) in histogram {
            if layers.last() == Some(&layer) {
                if let Some(c) = counts.last_mut() {
                    *c += count;
                }
            } else if count > 0 {
                layers.push(layer);
                counts.push(count);
            }
        }
        // The one-rank rule (`pairlist::slabs_of`): a new slab at the first
        // layer that starts at least `target` particles after the slab's start.
        let n: u64 = counts.iter().sum();
        let target = n.div_ceil(TARGET_SLABS as u64).max(1);
        let mut slab_layer = Vec::new();
        let mut slab_first = 0u64;
        let mut before = 0u64;
        for (k, &c) in counts.iter().enumerate() {
            if k == 0 {
                slab_layer.push(0);
            } else if before - slab_first >= target {
                slab_layer.push(k);
                slab_first = before;
            }
            before += c;
        }
        slab_layer.push(layers.len());
        let slabs = slab_layer.len() - 1;
        // Particles before each slab.
        let mut cum = vec![0u64; slabs + 1];
        for s in 0..slabs {
            cum[s + 1] = cum[s] + counts[slab_layer[s]..slab_layer[s + 1]].iter().sum::<u64>();
        }
        // Rank r starts at the slab boundary nearest r n / ranks.
        let ranks = ranks.max(1);
        let mut bounds = vec![0usize];
        for r in 1..ranks {
            let ideal = (n as u128 * r as u128 / ranks as u128) as u64;
            let lo = *bounds.last().unwrap_or(&0);
            let best = (lo..=slabs)
                .min_by_key(|&s| (cum[s].abs_diff(ideal), s))
                .unwrap_or(lo);
            bounds.push(best);
        }
        bounds.push(slabs);
        let rank_slabs = bounds.windows(2).map(|w| w[0]..w[1]).collect();
        Self {
            layers,
            counts,
            slab_layer,
            rank_slabs,
        }
    }

    /// Number of slabs.
    pub fn slabs(&self) -> usize {
        self.slab_layer.len().saturating_sub(1)
    }

    /// Index of `layer` in [`Plan::layers`] (every particle's layer is there).
    pub fn layer_index(&self, layer: u64) -> Option<usize> {
        self.layers.binary_search(&layer).ok()
    }

    /// The layers (indices) rank `r` owns.
    pub fn rank_layers(&self, r: usize) -> Range<usize> {
        let s = &self.rank_slabs[r];
        self.slab_layer[s.start]..self.slab_layer[s.end]
    }

    /// Particles rank `r` owns.
    pub fn rank_particles(&self, r: usize) -> u64 {
        self.counts[self.rank_layers(r)].iter().sum()
    }

    /// The nearest rank before `r` that owns particles.
    pub fn previous(&self, r: usize) -> Option<usize> {
        (0..r).rev().find(|&q| !self.rank_slabs[q].is_empty())
    }

    /// The nearest rank after `r` that owns particles.
    pub fn next(&self, r: usize) -> Option<usize> {
        (r + 1..self.rank_slabs.len()).find(|&q| !self.rank_slabs[q].is_empty())
    }

    /// The rank owning layer index `li`.
    pub fn owner(&self, li: usize) -> usize {
        // The first rank whose layers end after `li` (empty ranks end where
        // the previous one does, so they are never it).
        self.rank_slabs
            .iter()
            .position(|s| self.slab_layer[s.end] > li && !s.is_empty())
            .unwrap_or(0)
    }

    /// Where the particles of layer index `li` go.
    pub fn destinations(&self, li: usize) -> Destinations {
        let owner = self.owner(li);
        let own = self.rank_layers(owner);
        Destinations {
            owner,
            reader_before: (li == own.start).then(|| self.previous(owner)).flatten(),
            reader_after: (li + 1 == own.end).then(|| self.next(owner)).flatten(),
        }
    }

    /// The largest rank's particles over the mean (1: perfectly balanced).
    pub fn imbalance(&self) -> f64 {
        let n: u64 = self.counts.iter().sum();
        let ranks = self.rank_slabs.len().max(1);
        let max = (0..self.rank_slabs.len())
            .map(|r| self.rank_particles(r))
            .max()
            .unwrap_or(0);
        if n == 0 {
            1.0
        } else {
            max as f64 * ranks as f64 / n as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_match_one_rank_and_ranks_balance() {
        // 200 layers of 10 particles: 2000 particles, target 32 per slab,
        // so a slab every 4 layers (the first at 40 particles).
        let hist: Vec<(u64, u64)> = (0..200).map(|l| (l + 5, 10)).collect();
        let plan = Plan::new(hist.clone(), 3);
        assert_eq!(plan.slabs(), 50);
        assert!(plan.slab_layer.windows(2).all(|w| w[1] - w[0] == 4));
        let owned: u64 = (0..3).map(|r| plan.rank_particles(r)).sum();
        assert_eq!(owned, 2000);
        assert!(plan.imbalance() < 1.05, "{}", plan.imbalance());
        // The same cut whatever the rank count.
        assert_eq!(Plan::new(hist.clone(), 1).slab_layer, plan.slab_layer);
        // The first layer of rank 1 is read by rank 0, its last by rank 2.
        let own = plan.rank_layers(1);
        let d = plan.destinations(own.start);
        assert_eq!(
            (d.owner, d.reader_before, d.reader_after),
            (1, Some(0), None)
        );
        let d = plan.destinations(own.end - 1);
        assert_eq!(
            (d.owner, d.reader_before, d.reader_after),
            (1, None, Some(2))
        );
        // Halves of the histogram from two ranks sum to the same plan.
        let mut split = hist.clone();
        split.extend(hist.iter().map(|&(l, _)| (l, 0)));
        assert_eq!(Plan::new(split, 3), plan);
        // More ranks than slabs: the extra ones own nothing.
        let small = Plan::new(vec![(1, 5), (2, 5)], 4);
        let owned: u64 = (0..4).map(|r| small.rank_particles(r)).sum();
        assert_eq!(owned, 10);
    }
}
