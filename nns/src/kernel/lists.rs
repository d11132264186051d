//! The flat passes over the half-shell passes' pairs that count each
//! point's list and write the box's lists in box order.

use super::{BoxIndex, HalfShell};
use crate::simd::huge_zeroed;

/// Calls `found(t, l)` for each pair that a point `l` of `part`'s last
/// layer (`last_layer_only`) or of the whole part recorded with a later
/// point `t` of the box, in increasing `l`.
fn each_edge(
    bx: &BoxIndex,
    part: &HalfShell,
    last_layer_only: bool,
    mut found: impl FnMut(usize, usize),
) {
    let from = if last_layer_only {
        bx.layer_base(part.layers.1 - 1) - part.first
    } else {
        0
    };
    for i in from..part.len() {
        for &t in part.edges_of(i) {
            found(t as usize, part.first + i);
        }
    }
}

/// Each point's list length, in box order: what it found outside the box,
/// what it found later in the box, and how many earlier points (of its
/// part, or of the last layer of the part before) found it. `parts` cover
/// the box's layers one after another, each at least one layer; each part
/// is counted by its own thread.
pub fn list_lengths(bx: &BoxIndex, parts: &[HalfShell]) -> Vec<u32> {
    let mut counts = huge_zeroed::<u32>(bx.len());
    std::thread::scope(|scope| {
        let mut rest: &mut [u32] = &mut counts;
        for (k, part) in parts.iter().enumerate() {
            let (mine, tail) = std::mem::take(&mut rest).split_at_mut(part.len());
            rest = tail;
            let before = k.checked_sub(1).map(|j| &parts[j]);
            scope.spawn(move || {
                for (i, c) in mine.iter_mut().enumerate() {
                    *c = part.found(i) as u32;
                }
                let first = part.first;
                // Partners in the same layer are in this part, and so are
                // those in the next layer, but from the part's last layer;
                // the last layer of the part before reaches this part's first.
                // Before the last layer, every partner counts: one flat pass
                // over those pairs (no loop per point, whose varying length
                // the branch predictor would miss).
                let last = part.last_layer(bx);
                for &t in &part.edges[..part.edge_at[last] as usize] {
                    mine[t as usize - first] += 1;
                }
                for i in last..part.len() {
                    for &t in part.same_layer_edges(i) {
                        mine[t as usize - first] += 1;
                    }
                }
                if let Some(b) = before {
                    for i in b.last_layer(bx)..b.len() {
                        for &t in b.next_layer_edges(i) {
                            mine[t as usize - first] += 1;
                        }
                    }
                }
            });
        }
    });
    counts
}

/// Writes the list of box point `l` after its earlier finders: the later
/// points it found, then those outside the box. `ids[local]` is a box
/// point's input index.
#[inline(always)]
fn write_found(part: &HalfShell, i: usize, ids: &[u32], out: &mut [u32]) {
    let edges = part.edges_of(i);
    let own = part.own_of(i);
    let (fwd, rest) = out.split_at_mut(edges.len());
    for (o, &t) in fwd.iter_mut().zip(edges) {
        *o = ids[t as usize];
    }
    rest[..own.len()].copy_from_slice(own);
}

/// The box's lists in box order (CSR with the points' input indices): each
/// point's list is the earlier points of the box that found it, in box
/// order, then the later points it found, then those outside the box. The
/// result does not depend on how the layers were cut into parts; each
/// part's lists are written by its own thread.
pub fn box_lists(bx: &BoxIndex, ids: &[u32], parts: &[HalfShell]) -> crate::cpu::Lists {
    let counts = list_lengths(bx, parts);
    let mut offsets = Vec::with_capacity(counts.len() + 1);
    let mut at = 0usize;
    offsets.push(0);
    for &c in &counts {
        at += c as usize;
        offsets.push(at);
    }
    let mut indices = vec![0u32; at];
    std::thread::scope(|scope| {
        let mut rest: &mut [u32] = &mut indices;
        for (k, part) in parts.iter().enumerate() {
            let (first, end) = (part.first, part.end());
            let (mine, tail) =
                std::mem::take(&mut rest).split_at_mut(offsets[end] - offsets[first]);
            rest = tail;
            let offsets = &offsets[first..=end];
            let counts = &counts[first..end];
            let before = k.checked_sub(1).map(|j| &parts[j]);
            scope.spawn(move || {
                let base = offsets[0];
                let mut cursor: Vec<usize> = offsets[..offsets.len() - 1]
                    .iter()
                    .map(|&o| o - base)
                    .collect();
                // The earlier points that found each point, in box order.
                let mut back = |t: usize, l: usize| {
                    if t >= first && t < end {
                        let c = &mut cursor[t - first];
                        mine[*c] = ids[l];
                        *c += 1;
                    }
                };
                if let Some(b) = before {
                    each_edge(bx, b, true, &mut back);
                }
                each_edge(bx, part, false, &mut back);
                // Then what each point found itself.
                for i in 0..part.len() {
                    let at = cursor[i];
                    let to = offsets[i + 1] - base;
                    debug_assert!(to - at <= counts[i] as usize);
                    write_found(part, i, ids, &mut mine[at..to]);
                }
            });
        }
    });
    crate::cpu::Lists {
        ids: ids.to_vec(),
        counts,
        indices,
    }
}
