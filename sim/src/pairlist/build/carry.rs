//! Contact history carried from one build to the next by persistent ids:
//! the old lists' nonzero springs and stored rolling torques, grouped by
//! the lower id of each pair (or by particle for walls).

use std::ops::Range;

use super::{NeighbourList, WallList};

/// Springs of the old list, grouped by the lower persistent id of each
/// pair: `(higher id, spring as the lower id sees it)`.
pub(super) struct CarriedSprings {
    start: Vec<u32>,
    entries: Vec<(u32, [f32; 3])>,
}

impl CarriedSprings {
    /// Groups `(owner id, other id, spring as the owner sees it)`.
    /// Ids run below `n_ids`; an entry may repeat (the same pair from two
    /// ranks, with the same value): the first is found.
    pub(super) fn new(n_ids: usize, springs: &[(u32, u32, [f32; 3])]) -> Self {
        let mut start = vec![0u32; n_ids + 1];
        for &(a, _, _) in springs {
            start[a as usize + 1] += 1;
        }
        for k in 0..n_ids {
            start[k + 1] += start[k];
        }
        let mut fill = start.clone();
        let mut entries = vec![(0, [0.0; 3]); springs.len()];
        for &(a, b, s) in springs {
            let slot = &mut fill[a as usize];
            entries[*slot as usize] = (b, s);
            *slot += 1;
        }
        Self { start, entries }
    }

    /// The spring `owner` had with `other`, as `owner` sees it.
    #[inline]
    pub(super) fn find(&self, owner: u32, other: u32) -> Option<[f32; 3]> {
        let (a, b) = (
            self.start[owner as usize] as usize,
            self.start[owner as usize + 1] as usize,
        );
        self.entries[a..b]
            .iter()
            .find(|(o, _)| *o == other)
            .map(|&(_, s)| s)
    }

    /// The spring between particles `a` and `b`, as `a` sees it.
    #[inline]
    pub(super) fn between(&self, a: u32, b: u32) -> [f32; 3] {
        if a < b {
            self.find(a, b).unwrap_or([0.0; 3])
        } else {
            self.find(b, a).map_or([0.0; 3], |s| s.map(|x| -x))
        }
    }
}

pub(super) fn nonzero(s: &[f32; 3]) -> bool {
    s.iter().any(|&x| x != 0.0)
}

/// The nonzero values (springs or stored rolling torques) of the old
/// list's pairs, the rows of particles `rows` then the wrap pairs, keyed by persistent ids as
/// the lower id sees them (negated for the other): what a build carries.
pub(super) fn old_pair_values(
    list: &NeighbourList,
    ids: &[u32],
    rows: Range<usize>,
    row_value: impl Fn(usize) -> [f32; 3],
    wrap_value: impl Fn(usize) -> [f32; 3],
) -> Vec<(u32, u32, [f32; 3])> {
    let mut out = Vec::new();
    let mut push = |a: u32, b: u32, v: [f32; 3]| {
        if nonzero(&v) {
            out.push(if a < b {
                (a, b, v)
            } else {
                (b, a, v.map(|x| -x))
            });
        }
    };
    for i in rows.start..rows.end.min(list.row.len().saturating_sub(1)) {
        for k in list.row[i] as usize..list.row[i + 1] as usize {
            push(ids[i], ids[list.partner[k] as usize], row_value(k));
        }
    }
    for (k, &[i, j]) in list.wraps.pair.iter().enumerate() {
        push(ids[i as usize], ids[j as usize], wrap_value(k));
    }
    out
}

/// The nonzero `values` (springs or stored rolling torques; empty: none)
/// of the old wall contacts of particles `rows`, keyed by particle id and wall.
pub(super) fn old_wall_values(
    wl: &WallList,
    ids: &[u32],
    rows: Range<usize>,
    values: &[[f32; 3]],
) -> Vec<(u32, u32, [f32; 3])> {
    let mut out = Vec::new();
    for i in rows.start..rows.end.min(wl.row.len().saturating_sub(1)) {
        for k in wl.row[i] as usize..wl.row[i + 1] as usize {
            if let Some(v) = values.get(k).filter(|v| nonzero(v)) {
                out.push((ids[i], wl.wall[k], *v));
            }
        }
    }
    out
}
