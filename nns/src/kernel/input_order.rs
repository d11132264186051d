//! The whole grid's lists written straight into input order: counts and
//! offsets in input order, and each part's lists completed window by
//! window ([`WindowBack`]) and written whole at their places.

use super::shell::entry_index;
use super::{BoxIndex, HalfShell, list_lengths};
use crate::simd::{advise_huge_pages, huge_vec, huge_zeroed};

/// The lists of every point of the grid, from the half-shell passes over
/// the whole grid (box order is the sorted order, `ids` the grid's), as
/// CSR in input order: each point's list as in [`box_lists`](super::box_lists). Each part's
/// thread completes its points layer by layer (the earlier finders of a
/// layer's points lie in that layer and the one before, so a small buffer
/// per layer transposes them) and writes each list once, whole, at its
/// place in the output.
pub fn input_order_lists(bx: &BoxIndex, ids: &[u32], parts: &[HalfShell]) -> crate::Neighbours {
    let n = bx.len();
    let counts = list_lengths(bx, parts);
    let threads = parts.len().max(1);
    let chunk = n.div_ceil(threads).max(1);
    // Counts in input order: scattered by every thread at once (each index
    // is written once; relaxed atomic stores are plain stores on x86).
    let by_input: Vec<std::sync::atomic::AtomicU32> = {
        let mut v = Vec::with_capacity(n);
        advise_huge_pages(v.spare_capacity_mut());
        v.resize_with(n, || std::sync::atomic::AtomicU32::new(0));
        v
    };
    std::thread::scope(|scope| {
        for (mine, ids) in counts.chunks(chunk).zip(ids.chunks(chunk)) {
            let by_input = &by_input;
            scope.spawn(move || {
                for (&c, &id) in mine.iter().zip(ids) {
                    by_input[id as usize].store(c, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    // Their prefix sum, in parallel: each thread's total, then its run of
    // offsets from the totals before it.
    let load =
        |c: &std::sync::atomic::AtomicU32| u64::from(c.load(std::sync::atomic::Ordering::Relaxed));
    let totals: Vec<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = by_input
            .chunks(chunk)
            .map(|mine| scope.spawn(move || mine.iter().map(load).sum::<u64>()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("prefix threads do not panic"))
            .collect()
    });
    let at: u64 = totals.iter().sum();
    let mut offsets = huge_vec(n + 1, 0u64);
    offsets[n] = at;
    std::thread::scope(|scope| {
        let mut base = 0;
        for ((mine, out), total) in by_input
            .chunks(chunk)
            .zip(offsets.chunks_mut(chunk))
            .zip(&totals)
        {
            let from = base;
            base += total;
            scope.spawn(move || {
                let mut at = from;
                for (c, o) in mine.iter().zip(out) {
                    *o = at;
                    at += load(c);
                }
            });
        }
    });
    drop(by_input);
    // Each point's slot, in box order: random reads, but independent ones
    // in tight loops on every thread (the fill below then reads them in
    // order).
    let mut slots = huge_vec(n, 0u64);
    std::thread::scope(|scope| {
        for (mine, ids) in slots.chunks_mut(chunk).zip(ids.chunks(chunk)) {
            let offsets = &offsets;
            scope.spawn(move || {
                for (s, &id) in mine.iter_mut().zip(ids) {
                    *s = offsets[id as usize];
                }
            });
        }
    });
    let mut indices = huge_zeroed::<u32>(at as usize);
    {
        let out = crate::simd::DisjointLists::new(&mut indices);
        std::thread::scope(|scope| {
            for (k, part) in parts.iter().enumerate() {
                let before = k.checked_sub(1).map(|j| &parts[j]);
                let (out, slots, counts) = (&out, &slots, &counts);
                scope.spawn(move || {
                    let mut back = WindowBack::default();
                    let (mut z, mut lo) = (part.layers.0, 0);
                    while lo < part.len() {
                        // A window of whole layers, at least WINDOW_PAIRS pairs.
                        let mut hi = lo;
                        while hi < part.len()
                            && ((part.edge_at[hi] - part.edge_at[lo]) as usize) < WINDOW_PAIRS
                        {
                            z += 1;
                            hi = bx.layer_base(z) - part.first;
                        }
                        back.transpose(bx, before, part, (lo, hi), ids, counts);
                        for i in lo..hi {
                            let l = part.first + i;
                            // The slot of a list a few points ahead.
                            if let Some(&ahead) = slots.get(l + PREFETCH_AHEAD) {
                                out.prefetch(ahead as usize);
                                out.prefetch(ahead as usize + 15);
                            }
                            let written = out.write_list(
                                slots[l] as usize,
                                back.of(i - lo),
                                part.edges_of(i),
                                ids,
                                part.own_of(i),
                            );
                            assert_eq!(written, counts[l] as usize, "list length of point {l}");
                        }
                        lo = hi;
                    }
                });
            }
        });
    }
    crate::Neighbours { offsets, indices }
}

/// How many points ahead the output slot of a list is prefetched (the
/// slots follow the input order, so each is a cache miss).
const PREFETCH_AHEAD: usize = 64;

/// The earlier finders of a window of one part's points (whole layers,
/// in box order), transposed from the pairs found by the layer before the
/// window and by the window's own points. The buffers are kept from one
/// window to the next.
#[derive(Debug, Default)]
struct WindowBack {
    /// Window point `i`'s finders are `found[at[i]..at[i + 1]]`.
    at: Vec<usize>,
    /// The finders.
    found: Vec<u32>,
    /// Where each window point's next finder goes.
    cursor: Vec<u32>,
    /// Each pair's finder, pair by pair.
    finder: Vec<u32>,
}

/// Pairs found by a window of [`WindowBack`] at least (whole layers): its
/// buffers take 8 bytes per pair (32 MiB), so that memory stays bounded
/// on any input while each window's passes stay long and flat. (Small in
/// this crate's tests, so that their searches cross many windows.)
const WINDOW_PAIRS: usize = if cfg!(test) { 256 } else { 4 << 20 };

/// The last layer of the window of `part` that ends at point `hi` (an
/// index in the part, at the end of a layer).
fn window_last_layer(bx: &BoxIndex, part: &HalfShell, hi: usize) -> u32 {
    (part.layers.0..part.layers.1)
        .rev()
        .find(|&z| bx.layer_base(z) - part.first < hi)
        .expect("a window holds a point")
}

/// Entries [`WindowBack::transpose`] writes at once when it labels each
/// pair with its finder.
const LABEL: usize = 16;

impl WindowBack {
    /// The finders of `part`'s points `lo..hi` (indices in the part, whole
    /// layers; `before` is the part before).
    fn transpose(
        &mut self,
        bx: &BoxIndex,
        before: Option<&HalfShell>,
        part: &HalfShell,
        (lo, hi): (usize, usize),
        ids: &[u32],
        counts: &[u32],
    ) {
        let (len, first) = (hi - lo, part.first + lo);
        // Each point's finders: its list length less what it found.
        self.at.clear();
        self.at.push(0);
        let mut sum = 0;
        for i in lo..hi {
            sum += counts[part.first + i] as usize - part.found(i);
            self.at.push(sum);
        }
        if self.found.len() < sum {
            self.found.resize(sum, 0);
        }
        self.cursor.clear();
        self.cursor
            .extend(self.at[..len].iter().map(|&a| entry_index(a)));
        // Finders in the layer before the window (in this part, or the
        // last layer of the part before), in box order: the pairs they
        // found in the next layer.
        let layer_before = if lo > 0 {
            let z = (part.layers.0..part.layers.1)
                .find(|&z| bx.layer_base(z + 1) - part.first == lo)
                .expect("windows are whole layers");
            Some((part, bx.layer_base(z) - part.first, lo))
        } else {
            before.map(|b| (b, b.last_layer(bx), b.len()))
        };
        let (cursor, found) = (&mut self.cursor, &mut self.found);
        if let Some((src, l0, l1)) = layer_before {
            for l in l0..l1 {
                for &t in src.next_layer_edges(l) {
                    let c = &mut cursor[t as usize - first];
                    found[*c as usize] = ids[src.first + l];
                    *c += 1;
                }
            }
        }
        // Then the window's own pairs: before its last layer all of them,
        // in one flat pass (each pair labelled with its finder first,
        // sixteen labels at a time: no loop per point, whose varying length
        // the branch predictor would miss); in the last layer those within
        // it.
        let last = bx.layer_base(window_last_layer(bx, part, hi)) - part.first;
        let (base, end) = (part.edge_at[lo] as usize, part.edge_at[last] as usize);
        if self.finder.len() < end - base + LABEL {
            self.finder.resize(end - base + LABEL, 0);
        }
        for l in lo..last {
            let from = part.edge_at[l] as usize - base;
            let to = part.edge_at[l + 1] as usize - base;
            let id = ids[part.first + l];
            let mut e = from;
            loop {
                self.finder[e..e + LABEL].fill(id);
                e += LABEL;
                if e >= to {
                    break;
                }
            }
        }
        for (&t, &id) in part.edges[base..end].iter().zip(&self.finder) {
            let c = &mut cursor[t as usize - first];
            found[*c as usize] = id;
            *c += 1;
        }
        for l in last..hi {
            for &t in part.same_layer_edges(l) {
                let c = &mut cursor[t as usize - first];
                found[*c as usize] = ids[part.first + l];
                *c += 1;
            }
        }
    }

    /// The finders of the window's point `i`, in box order.
    fn of(&self, i: usize) -> &[u32] {
        &self.found[self.at[i]..self.at[i + 1]]
    }
}
