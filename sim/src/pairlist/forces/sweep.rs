//! The order of a step's chunk operations: one sweep along the slabs, cut
//! into strips for the threads.
//!
//! A chunk operation is `(parity, (k, e))`: in the even phase (`0`) the
//! chunk of slabs `k..e` is started (gravity, walls) and the rows of slab
//! `k` are evaluated; in the odd phase (`1`) the rows of slab `k` are
//! evaluated and slabs `k..e` updated (`e == 0`: slab 0 alone, updated
//! only). Every particle's sum runs in one order: its start, then for an
//! even slab the rows of its own slab and then of the slab before, for an
//! odd slab the rows of the slab before and then of its own.
//!
//! Two phases over the whole domain keep that order, and so does one sweep
//! that runs each even chunk and then the odd chunk ending at it (its rows
//! and both slabs' updates, now final): the sweep reads each slab from
//! memory once per step instead of once per phase. Threads each sweep a
//! strip of whole slabs; the odd chunk across a cut reads both strips'
//! slabs, so it waits for a second, short phase.

/// A chunk operation: phase parity and the chunk `(k, e)`.
pub(super) type Op = (usize, (usize, usize));

/// One thread's share of a step: the slabs `slabs.0..slabs.1` and the
/// operations on them, in order.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Strip {
    pub(super) slabs: (usize, usize),
    pub(super) ops: Vec<Op>,
}

/// The chunks of each phase, as the two-phase stepping had them: `slabs`
/// local slabs, the first of global parity `first_slab % 2`.
pub(super) fn phase(parity: usize, slabs: usize, first_slab: usize) -> Vec<(usize, usize)> {
    let first = (parity + first_slab) % 2;
    let mut chosen: Vec<(usize, usize)> = (first..slabs)
        .step_by(2)
        .map(|k| (k, (k + 2).min(slabs)))
        .collect();
    if parity == 1 && slabs > 0 && first_slab.is_multiple_of(2) {
        chosen.insert(0, (0, 0));
    }
    chosen
}

/// The sweep: each even chunk, then the odd chunk that ends at it (the
/// chunk `(k - 1, k + 1)`, or slab 0 alone when slab 0 is even), then any
/// odd chunk left at the end.
pub(super) fn sweep(slabs: usize, first_slab: usize) -> Vec<Op> {
    let (even, odd) = (phase(0, slabs, first_slab), phase(1, slabs, first_slab));
    let mut order = Vec::with_capacity(even.len() + odd.len());
    let mut next_odd = odd.iter().peekable();
    for &(k, e) in &even {
        order.push((0, (k, e)));
        while let Some(&&(ko, eo)) = next_odd.peek() {
            let before = if eo == 0 { k == 0 } else { ko < k };
            if !before {
                break;
            }
            order.push((1, (ko, eo)));
            next_odd.next();
        }
    }
    order.extend(next_odd.map(|&c| (1, c)));
    order
}

/// The sweep cut into at most `threads` strips of about equal particle
/// counts (`starts`: each slab's first particle, `slabs + 1` entries;
/// no strips without slabs), and the odd chunks across the cuts, each a
/// strip of its own two slabs for the second phase. A cut falls before an
/// even chunk `(k, ..)` with `k >= 2`, two slabs past the last: the chunks
/// across cuts touch disjoint slabs.
pub(super) fn strips(
    starts: &[u32],
    first_slab: usize,
    threads: usize,
) -> (Vec<Strip>, Vec<Strip>) {
    let slabs = starts.len().saturating_sub(1);
    if slabs == 0 {
        return (Vec::new(), Vec::new());
    }
    let order = sweep(slabs, first_slab);
    let (p0, total) = (starts[0] as usize, (starts[slabs] - starts[0]) as usize);
    let mut cuts = Vec::new();
    let mut last_k = 0;
    for i in 1..order.len() {
        let want = cuts.len() + 1;
        if want >= threads.max(1) {
            break;
        }
        let (parity, (k, _)) = order[i];
        // A cut before the even chunk `(k, ..)`; the next operation is the
        // odd chunk `(k - 1, k + 1)`, which moves to the second phase.
        let across = order
            .get(i + 1)
            .is_some_and(|&(p, (ko, eo))| p == 1 && eo != 0 && ko + 1 == k);
        let far = cuts.is_empty() || k >= last_k + 2;
        let due = (starts[k] as usize - p0) * threads >= total * want;
        if parity == 0 && k >= 2 && across && far && due {
            cuts.push(i);
            last_k = k;
        }
    }
    let mut strips = Vec::with_capacity(cuts.len() + 1);
    let mut deferred = Vec::with_capacity(cuts.len());
    let mut from = 0;
    for (c, &end) in cuts.iter().chain(std::iter::once(&order.len())).enumerate() {
        let mut ops = Vec::with_capacity(end - from);
        for (i, &op) in order.iter().enumerate().take(end).skip(from) {
            if c > 0 && i == from + 1 {
                let (_, (k, e)) = op;
                deferred.push(Strip {
                    slabs: (k, e),
                    ops: vec![op],
                });
            } else {
                ops.push(op);
            }
        }
        let first = if c == 0 { 0 } else { order[from].1.0 };
        let last = cuts.get(c).map_or(slabs, |&i| order[i].1.0);
        strips.push(Strip {
            slabs: (first, last),
            ops,
        });
        from = end;
    }
    (strips, deferred)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which operations write each slab's particles, in order: the sums'
    /// order (`0` start, then the rows of slab `r` as `r + 1`), and the
    /// update last.
    fn per_slab(slabs: usize, ops: &[Op]) -> Vec<Vec<usize>> {
        let mut seen = vec![Vec::new(); slabs];
        for &(parity, (k, e)) in ops {
            let chunk = if e == 0 { 0..1 } else { k..e };
            if parity == 0 {
                for s in chunk.clone() {
                    seen[s].push(0);
                }
            }
            if e != 0 {
                for s in [k, k + 1] {
                    if s < slabs {
                        seen[s].push(k + 1);
                    }
                }
            }
            if parity == 1 {
                for s in chunk {
                    seen[s].push(usize::MAX);
                }
            }
        }
        seen
    }

    #[test]
    fn the_sweep_and_the_strips_keep_the_phases_order() {
        for slabs in 1..12 {
            for first_slab in 0..2 {
                let phases: Vec<Op> = (0..2)
                    .flat_map(|p| phase(p, slabs, first_slab).into_iter().map(move |c| (p, c)))
                    .collect();
                let want = per_slab(slabs, &phases);
                assert_eq!(per_slab(slabs, &sweep(slabs, first_slab)), want);
                let starts: Vec<u32> = (0..=slabs as u32).map(|s| 10 * s).collect();
                for threads in 1..5 {
                    let (strips, deferred) = strips(&starts, first_slab, threads);
                    assert!(strips.len() <= threads && deferred.len() + 1 == strips.len());
                    // Strips cover the slabs in order; each operation stays
                    // inside its strip.
                    assert_eq!(strips[0].slabs.0, 0);
                    assert_eq!(strips.last().expect("a strip").slabs.1, slabs);
                    for w in strips.windows(2) {
                        assert_eq!(w[0].slabs.1, w[1].slabs.0);
                    }
                    for s in &strips {
                        for &(_, (k, e)) in &s.ops {
                            let end = if e == 0 { 1 } else { e };
                            assert!(k >= s.slabs.0 && end <= s.slabs.1, "{s:?}");
                        }
                    }
                    // Phase one's strips in any interleaving, then phase two.
                    let mut all: Vec<Op> = strips.iter().flat_map(|s| s.ops.clone()).collect();
                    all.extend(deferred.iter().flat_map(|s| s.ops.clone()));
                    assert_eq!(
                        per_slab(slabs, &all),
                        want,
                        "{slabs} {first_slab} {threads}"
                    );
                    for w in deferred.windows(2) {
                        assert!(
                            w[0].slabs.1 <= w[1].slabs.0,
                            "deferred chunks overlap: {deferred:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn strips_split_the_particles_about_evenly() {
        let starts: Vec<u32> = (0..=80).map(|s| 1000 * s).collect();
        let (strips, deferred) = strips(&starts, 0, 2);
        assert_eq!(strips.len(), 2);
        assert_eq!(
            deferred,
            vec![Strip {
                slabs: (39, 41),
                ops: vec![(1, (39, 41))]
            }]
        );
        assert_eq!(strips[0].slabs, (0, 40));
    }
}
