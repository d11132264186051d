//! The build: the old lists' history by persistent ids, free particles
//! wrapped into a periodic box, the sort by cell, the slabs, then the half
//! pair list with its constants and the wall lists.

use std::ops::Range;

use rayon::prelude::*;

use super::carry::{CarriedSprings, old_pair_values, old_wall_values};
use super::{HALF_SHELL, ListedPair, WrapPairs, key};
use crate::pairlist::{MIN_LEN, PairListSim};
use crate::setup::FREE;
use crate::stages::common::{HERTZ, ROLL_EPSD2, ROLL_NONE};
use crate::stages::forces::pair_constants;

/// Slabs aimed at per build: enough for two phases to balance on any
/// thread count this runs on, independent of it.
pub(crate) const TARGET_SLABS: usize = 64;

/// The nonzero history of the old lists, by persistent ids: what a build
/// carries over (`(lower id, higher id, value as the lower id sees it)` for
/// pairs, `(particle id, wall, value)` for walls).
#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    /// Tangential springs of pairs, m.
    pub springs: Vec<(u32, u32, [f32; 3])>,
    /// Stored rolling torques of pairs (`epsd2`), N m.
    pub rolls: Vec<(u32, u32, [f32; 3])>,
    /// Tangential springs of wall contacts, m.
    pub wall_springs: Vec<(u32, u32, [f32; 3])>,
    /// Stored rolling torques of wall contacts, N m.
    pub wall_rolls: Vec<(u32, u32, [f32; 3])>,
}

/// The occupied cells of the sorted particles: their keys (ascending) and
/// first particles, `n` at the end.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cells {
    pub key: Vec<u64>,
    pub start: Vec<u32>,
}

/// Where a build cuts the sorted particles: the slabs' and the occupied
/// layers' first particles, `n` at the end of each.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cuts {
    pub slab_start: Vec<u32>,
    pub layer_start: Vec<u32>,
}

impl PairListSim {
    /// Sorts the particles by cell and builds the pair and wall lists,
    /// carrying every stretched spring over by persistent ids.
    pub fn rebuild(&mut self) {
        let n = self.state.len();
        let history = self.old_history(0..n);
        self.wrap_free_particles(0..n);
        let cells = self.sort_by_cell();
        let cuts = slabs_of(&cells, n);
        self.build_lists(&history, &cells, cuts, n);
    }

    /// The nonzero springs and stored rolling torques of the rows of
    /// particles `rows` (and of the wrap pairs, and the walls of those
    /// particles), by persistent ids.
    pub(crate) fn old_history(&self, rows: Range<usize>) -> History {
        let ids: Vec<u32> = self.state.meta.iter().map(|m| m[0]).collect();
        let list = &self.list;
        let springs = old_pair_values(
            list,
            &ids,
            rows.clone(),
            |k| [list.spring[0][k], list.spring[1][k], list.spring[2][k]],
            |k| list.wraps.spring[k],
        );
        let rolls = if self.params.rolling_model == ROLL_EPSD2 {
            old_pair_values(
                list,
                &ids,
                rows.clone(),
                |k| {
                    let r = &list.roll;
                    if r[0].is_empty() {
                        [0.0; 3]
                    } else {
                        [r[0][k], r[1][k], r[2][k]]
                    }
                },
                |k| list.wraps.roll[k],
            )
        } else {
            Vec::new()
        };
        let wl = &self.wall_list;
        History {
            springs,
            rolls,
            wall_springs: old_wall_values(wl, &ids, rows.clone(), &wl.spring),
            wall_rolls: old_wall_values(wl, &ids, rows, &wl.roll),
        }
    }

    /// Free particles `range` back into the box along periodic axes (their
    /// displacement restarts at the build; body particles follow their bodies).
    pub(crate) fn wrap_free_particles(&mut self, range: Range<usize>) {
        if !self.list.is_periodic() {
            return;
        }
        let (period, lo) = (self.list.period, self.params.domain_min);
        let s = &mut self.state;
        for (p, m) in s.pos[range.clone()].iter_mut().zip(&s.meta[range]) {
            if m[2] != FREE {
                continue;
            }
            for a in 0..3 {
                if period[a] > 0.0 {
                    let k = ((p[a] - lo[a]) / period[a]).floor();
                    if k != 0.0 && k.is_finite() {
                        p[a] -= k * period[a];
                    }
                }
            }
        }
    }

    /// Sorts the particles by cell key, then by id, and returns the
    /// occupied cells.
    pub(crate) fn sort_by_cell(&mut self) -> Cells {
        let n = self.state.len();
        // Sort by cell (major axis first), then by id: the order depends on
        // the positions only.
        let list = &self.list;
        let mut order: Vec<(u64, u32, u32)> = self
            .state
            .pos
            .par_iter()
            .zip(self.state.meta.par_iter())
            .enumerate()
            .with_min_len(MIN_LEN)
            .map(|(k, (p, m))| (key(list.coords(p)), m[0], k as u32))
            .collect();
        order.par_sort_unstable();
        let idx: Vec<u32> = order.iter().map(|o| o.2).collect();
        let s = &mut self.state;
        let permute = |v: &mut Vec<[f32; 4]>| *v = idx.iter().map(|&k| v[k as usize]).collect();
        permute(&mut s.pos);
        permute(&mut s.vel);
        permute(&mut s.angvel);
        permute(&mut s.force);
        permute(&mut s.torque);
        permute(&mut s.local);
        s.meta = idx.iter().map(|&k| s.meta[k as usize]).collect();
        s.hist_count = vec![0; n];
        for (k, m) in s.meta.iter().enumerate() {
            self.inv_index[m[0] as usize] = k as u32;
        }

        // Occupied cells: their keys and first particles.
        let mut cell_key = Vec::new();
        let mut cell_start = Vec::new();
        for (k, o) in order.iter().enumerate() {
            if cell_key.last() != Some(&o.0) {
                cell_key.push(o.0);
                cell_start.push(k as u32);
            }
        }
        cell_start.push(n as u32);
        Cells {
            key: cell_key,
            start: cell_start,
        }
    }

    /// Builds the pair list of the rows of particles `..rows_end` (the rest
    /// get empty rows: another rank's particles, only read), the wall lists
    /// of the particles this engine updates, with `history` carried over,
    /// on the sorted particles of `cells`, cut by `cuts`.
    pub(crate) fn build_lists(
        &mut self,
        history: &History,
        cells: &Cells,
        cuts: Cuts,
        rows_end: usize,
    ) {
        let n = self.state.len();
        let ids = self.id_count;
        let carried = CarriedSprings::new(ids, &history.springs);
        let roll_model = self.params.rolling_model;
        let keep_roll = roll_model == ROLL_EPSD2;
        let carried_rolls = CarriedSprings::new(ids, &history.rolls);
        let carried_walls = CarriedSprings::new(ids, &history.wall_springs);
        let carried_wall_rolls = CarriedSprings::new(ids, &history.wall_rolls);
        let own = self.own_range();
        let (cell_key, cell_start) = (&cells.key, &cells.start);
        // Cells whose particles have rows (the cells past `rows_end` are
        // another rank's first layer, read by these rows only).
        let row_cells = cell_start.partition_point(|&s| (s as usize) < rows_end);
        let max_occupancy = cell_start
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0);
        let Cuts {
            slab_start,
            layer_start,
        } = cuts;
        let s = &mut self.state;
        let list = &self.list;

        // The half pair list: for each particle, every later particle in
        // its own cell and in the 13 cells after it in key order.
        let skin = self.skin;
        let pos = &s.pos;
        let vel = &s.vel;
        let meta = &s.meta;
        let m = self.params.material_count;
        let table = &self.pairs;
        let hertz = self.params.contact_model == HERTZ;
        let cells: Vec<usize> = (0..row_cells.min(cell_key.len())).collect();
        let periodic = self.list.is_periodic();
        let find = |k: u64| cell_key.partition_point(|&x| x < k);
        // One output vector per block of 256 cells (not per cell: small
        // scenes rebuild often, and allocations would dominate).
        let major_cells = list.wrap[list.axes[0]];
        let rows: Vec<(Vec<ListedPair>, Vec<ListedPair>)> = cells
            .par_chunks(256)
            .map(|block| {
                let mut out = Vec::new();
                let mut wrapped = Vec::new();
                for &c in block {
                    let k = cell_key[c];
                    let (a, b, cc) = (
                        (k >> 42) as i64,
                        ((k >> 21) & 0x1F_FFFF) as i64,
                        (k & 0x1F_FFFF) as i64,
                    );
                    // Key ranges of the half shell, in key order.
                    let ranges = [
                        (key([a, b, cc + 1]), key([a, b, cc + 1])),
                        (key([a, b + 1, cc - 1]), key([a, b + 1, cc + 1])),
                        (key([a + 1, b - 1, cc - 1]), key([a + 1, b - 1, cc + 1])),
                        (key([a + 1, b, cc - 1]), key([a + 1, b, cc + 1])),
                        (key([a + 1, b + 1, cc - 1]), key([a + 1, b + 1, cc + 1])),
                    ];
                    let mut spans: Vec<(usize, usize, bool)> = ranges
                        .iter()
                        .map(|&(lo, hi)| {
                            let (x, y) = (find(lo), find(hi + 1));
                            (cell_start[x] as usize, cell_start[y] as usize, false)
                        })
                        .collect();
                    if periodic {
                        // The same 13 cells one by one, coordinates wrapped
                        // along the periodic axes (a wrapped key range is not
                        // contiguous).
                        spans.clear();
                        for (da, db, dc) in HALF_SHELL {
                            let c = [a + da, b + db, cc + dc];
                            let c = std::array::from_fn(|k| {
                                let d = list.wrap[list.axes[k]];
                                if d > 0 {
                                    (c[k] - 1).rem_euclid(d) + 1
                                } else {
                                    c[k]
                                }
                            });
                            let x = find(key(c));
                            if x < cell_key.len() && cell_key[x] == key(c) {
                                // Across the major axis' periodic face: a wrap pair.
                                let across = major_cells > 0 && a + da > major_cells;
                                spans.push((
                                    cell_start[x] as usize,
                                    cell_start[x + 1] as usize,
                                    across,
                                ));
                            }
                        }
                    }
                    let (first, end) = (cell_start[c] as usize, cell_start[c + 1] as usize);
                    for i in first..end {
                        let (pi, vi, mi) = (pos[i], vel[i], meta[i]);
                        // A row of the previous rank's last layer keeps only
                        // its partners this rank owns: the pairs among that
                        // rank's particles move none of this rank's, and
                        // that rank evaluates them itself.
                        let from = if i < own.start { own.start } else { 0 };
                        let cell = std::iter::once((i + 1, end, false));
                        for (j0, j1, across) in cell.chain(spans.iter().copied()) {
                            for j in j0.max(from)..j1 {
                                let (pj, vj, mj) = (pos[j], vel[j], meta[j]);
                                let reach = pi[3] + pj[3] + skin;
                                let pj = if periodic { list.image_of(&pi, pj) } else { pj };
                                let d = [pi[0] - pj[0], pi[1] - pj[1], pi[2] - pj[2]];
                                if d[0] * d[0] + d[1] * d[1] + d[2] * d[2] >= reach * reach {
                                    continue;
                                }
                                if mi[2] != FREE && mi[2] == mj[2] {
                                    continue; // one rigid body
                                }
                                if vi[3] + vj[3] == 0.0 {
                                    continue; // two immovable particles
                                }
                                let pp = mi[1] * m + mj[1];
                                let pair = &table[pp as usize];
                                let m_eff = 1.0 / (vi[3] + vj[3]);
                                let r_eff = pi[3] * pj[3] / (pi[3] + pj[3]);
                                let k = pair_constants(pair, hertz, r_eff, m_eff);
                                let spring = carried.between(mi[0], mj[0]);
                                let roll = if keep_roll {
                                    carried_rolls.between(mi[0], mj[0])
                                } else {
                                    [0.0; 3]
                                };
                                let entry = (i as u32, j as u32, pp, k, spring, roll);
                                if across {
                                    wrapped.push(entry);
                                } else {
                                    out.push(entry);
                                }
                            }
                        }
                    }
                }
                (out, wrapped)
            })
            .collect();
        let (rows, wrapped): (Vec<Vec<ListedPair>>, Vec<Vec<ListedPair>>) =
            rows.into_iter().unzip();
        let total: usize = rows.iter().map(Vec::len).sum();
        let list = &mut self.list;
        list.row.clear();
        list.row.resize(n + 1, 0);
        list.owner.clear();
        list.partner.clear();
        list.material_pair.clear();
        list.kn.clear();
        list.kt.clear();
        list.mu.clear();
        list.damping.clear();
        list.sign.clear();
        list.spring.iter_mut().for_each(Vec::clear);
        list.roll.iter_mut().for_each(Vec::clear);
        list.mu_roll.clear();
        // Rolling friction depends on the materials only.
        let first_mr = rows
            .iter()
            .flatten()
            .next()
            .map(|r| table[r.2 as usize].mu_roll);
        list.uniform_mu_roll = if roll_model == ROLL_NONE {
            None
        } else {
            first_mr.filter(|&m| {
                rows.iter()
                    .flatten()
                    .all(|r| table[r.2 as usize].mu_roll.to_bits() == m.to_bits())
            })
        };
        let per_pair_mu_roll = roll_model != ROLL_NONE && list.uniform_mu_roll.is_none();
        list.partner.reserve(total);
        // Constants every pair shares (one pair of materials; with Hertz,
        // one radius too) are kept once.
        let bits3 = |k: &[f32; 4]| [k[0].to_bits(), k[1].to_bits(), k[2].to_bits()];
        let first = rows.iter().flatten().next().map(|r| r.3);
        let uniform = first.filter(|f| rows.iter().flatten().all(|r| bits3(&r.3) == bits3(f)));
        list.uniform = uniform.map(|k| [k[0], k[1], k[2]]);
        let uniform_damping = first.map(|k| k[3]).filter(|&c| {
            rows.iter()
                .flatten()
                .all(|r| r.3[3].to_bits() == c.to_bits())
        });
        list.uniform_damping = uniform_damping;
        for (i, j, pp, k, spring, roll) in rows.into_iter().flatten() {
            if keep_roll {
                for (a, m) in roll.iter().enumerate() {
                    list.roll[a].push(*m);
                }
            }
            if per_pair_mu_roll {
                list.mu_roll.push(table[pp as usize].mu_roll);
            }
            list.row[i as usize + 1] += 1;
            list.owner.push(i);
            list.partner.push(j);
            list.material_pair.push(pp);
            if uniform.is_none() {
                list.kn.push(k[0]);
                list.kt.push(k[1]);
                list.mu.push(k[2]);
            }
            if uniform_damping.is_none() {
                list.damping.push(k[3]);
            }
            list.sign
                .push(if meta[i as usize][0] < meta[j as usize][0] {
                    1.0
                } else {
                    -1.0
                });
            for (a, s) in spring.iter().enumerate() {
                list.spring[a].push(*s);
            }
        }
        for i in 0..n {
            list.row[i + 1] += list.row[i];
        }
        let wraps = &mut list.wraps;
        *wraps = WrapPairs::default();
        for (i, j, pp, k, spring, roll) in wrapped.into_iter().flatten() {
            wraps.pair.push([i, j]);
            wraps.constants.push(k);
            wraps.mu_roll.push(table[pp as usize].mu_roll);
            wraps.spring.push(spring);
            wraps.roll.push(roll);
        }
        list.slab_start = slab_start;
        list.layer_start = layer_start;
        list.max_occupancy = max_occupancy;

        // Walls within reach of each movable particle.
        let walls = &self.walls;
        let wl = &mut self.wall_list;
        wl.row.clear();
        wl.row.push(0);
        wl.wall.clear();
        wl.constants.clear();
        wl.spring.clear();
        wl.roll.clear();
        wl.mu_roll.clear();
        for i in 0..n {
            let (p, v, mi) = (pos[i], vel[i], meta[i]);
            // Another rank's particles are only read: their walls are that rank's.
            if v[3] > 0.0 && own.contains(&i) {
                for (w, wall) in walls.iter().enumerate() {
                    let dist =
                        wall.normal[0] * p[0] + wall.normal[1] * p[1] + wall.normal[2] * p[2]
                            - wall.offset;
                    if dist < p[3] + skin {
                        let pair = &table[(mi[1] * m + wall.material) as usize];
                        wl.wall.push(w as u32);
                        wl.constants
                            .push(pair_constants(pair, hertz, p[3], 1.0 / v[3]));
                        wl.spring
                            .push(carried_walls.find(mi[0], w as u32).unwrap_or([0.0; 3]));
                        if keep_roll {
                            wl.roll
                                .push(carried_wall_rolls.find(mi[0], w as u32).unwrap_or([0.0; 3]));
                        }
                        if roll_model != ROLL_NONE {
                            wl.mu_roll.push(pair.mu_roll);
                        }
                    }
                }
            }
            wl.row.push(wl.wall.len() as u32);
        }

        self.x_ref = pos.iter().map(|p| [p[0], p[1], p[2]]).collect();
        self.max_disp2 = 0.0;
        self.rebuilds += 1;
    }
}

/// The single-rank cut: slabs of whole layers of the major axis, about
/// `n / TARGET_SLABS` particles each, and every occupied layer.
pub(crate) fn slabs_of(cells: &Cells, n: usize) -> Cuts {
    let (cell_key, cell_start) = (&cells.key, &cells.start);
    // Slabs: whole layers of the major axis, about n / TARGET_SLABS
    // particles each.
    let target = n.div_ceil(TARGET_SLABS).max(1);
    let mut slab_start = vec![0u32];
    let mut layer_start = vec![0u32];
    let mut layer = cell_key.first().map(|k| k >> 42);
    for (c, &k) in cell_key.iter().enumerate() {
        if Some(k >> 42) != layer {
            layer = Some(k >> 42);
            let first = cell_start[c];
            layer_start.push(first);
            if (first - slab_start[slab_start.len() - 1]) as usize >= target {
                slab_start.push(first);
            }
        }
    }
    slab_start.push(n as u32);
    layer_start.push(n as u32);

    Cuts {
        slab_start,
        layer_start,
    }
}
