//! The neighbour-list build: particles sorted by cell, the half pair list
//! with its per-pair constants, the wall lists, the slabs, and the contact
//! history carried over from the last list by persistent ids.

use rayon::prelude::*;

use super::{MIN_LEN, PairListSim};
use crate::setup::{FREE, SimSetup};
use crate::stages::common::{HERTZ, ROLL_EPSD2, ROLL_NONE};
use crate::stages::forces::pair_constants;

/// Cell coordinates are clamped to `1..=COORD_MAX` (21 bits each, so that
/// three make a `u64` key and a neighbour's coordinate never underflows).
const COORD_MAX: i64 = (1 << 21) - 2;

/// Slabs aimed at per build: enough for two phases to balance on any
/// thread count this runs on, independent of it.
const TARGET_SLABS: usize = 64;

/// The half pair list (CSR by the first particle, in sorted order) and what
/// the build left for the steps until the next one.
#[derive(Debug, Clone, Default)]
pub struct NeighbourList {
    /// Cell edge, metres (`2 r_max + skin`; along a periodic axis a little
    /// more, so that a whole number of cells spans the period).
    pub cell_size: f32,
    origin: [f32; 3],
    /// Axes in key order, major first (the major one is never periodic).
    axes: [usize; 3],
    /// `1 / cell edge` along each world axis.
    inv_cell: [f32; 3],
    /// Cells along each world axis when it is periodic, else 0.
    wrap: [i64; 3],
    /// The period along each world axis (0 when not periodic), metres.
    pub period: [f32; 3],
    /// `1 / period` (0 when not periodic).
    pub inv_period: [f32; 3],
    /// Pairs of particle `i` are `row[i]..row[i + 1]`.
    pub row: Vec<u32>,
    /// First particle of each pair (the wide prefilter loads it by blocks).
    pub owner: Vec<u32>,
    /// Second particle of each pair (`j > i`).
    pub partner: Vec<u32>,
    /// Index of the pair's material pair in the pair table.
    pub material_pair: Vec<u32>,
    /// `kn`, `kt`, `mu` when every pair of the list has them (one pair of
    /// materials): then `kn`, `kt` and `mu` below are empty, and the lanes
    /// take these instead of streaming them per pair.
    pub uniform: Option<[f32; 3]>,
    /// The damping coefficient when every pair has the same (one material,
    /// equal masses): then `damping` below is empty.
    pub uniform_damping: Option<f32>,
    /// Normal stiffness of each pair, N/m.
    pub kn: Vec<f32>,
    /// Tangential stiffness of each pair, N/m.
    pub kt: Vec<f32>,
    /// Friction coefficient of each pair.
    pub mu: Vec<f32>,
    /// Normal (and tangential) damping coefficient of the pair, N s/m.
    pub damping: Vec<f32>,
    /// Normal of coincident centres along y: +1 when the first particle has
    /// the lower id, else -1.
    pub sign: Vec<f32>,
    /// Tangential spring of each pair as the first particle sees it, m
    /// (zero while the pair does not touch), one array per axis.
    pub spring: [Vec<f32>; 3],
    /// Stored rolling torque of each pair as the first particle gives it
    /// (N m; `epsd2` rolling resistance, else empty), one array per axis.
    pub roll: [Vec<f32>; 3],
    /// The rolling friction of every pair, when all have the same (then
    /// `mu_roll` is empty); `None` without rolling resistance.
    pub uniform_mu_roll: Option<f32>,
    /// Rolling friction per pair (rolling resistance with several values).
    pub mu_roll: Vec<f32>,
    /// Pairs across the periodic face of the major axis (a domain periodic
    /// on all three axes): they join the last layer to the first, so they
    /// are not in the slabs' rows but evaluated after them, in this order.
    pub wraps: WrapPairs,
    /// First particle of each slab, and `n` at the end.
    pub slab_start: Vec<u32>,
    /// First particle of each occupied layer of cells along the major axis,
    /// and `n` at the end: a pair reaches at most the next layer (block-wise
    /// stepping cuts its blocks here).
    pub layer_start: Vec<u32>,
    /// Most particles in one cell at the build.
    pub max_occupancy: u32,
}

/// The pairs of [`NeighbourList::wraps`], each with its constants and
/// history (as the rows keep them).
#[derive(Debug, Clone, Default)]
pub struct WrapPairs {
    /// First and second particle of each pair.
    pub pair: Vec<[u32; 2]>,
    /// `kn`, `kt`, `mu`, damping.
    pub constants: Vec<[f32; 4]>,
    /// Rolling friction (rolling resistance, else 0).
    pub mu_roll: Vec<f32>,
    /// Tangential spring as the first particle sees it, m.
    pub spring: Vec<[f32; 3]>,
    /// Stored rolling torque, N m (`epsd2`, else zero).
    pub roll: Vec<[f32; 3]>,
}

/// Wall contacts within reach of each particle (CSR by particle).
#[derive(Debug, Clone, Default)]
pub struct WallList {
    /// Walls of particle `i` are `row[i]..row[i + 1]`.
    pub row: Vec<u32>,
    /// Wall index.
    pub wall: Vec<u32>,
    /// The contact's constants with that wall (`[kn, kt, mu, damping]`,
    /// [`pair_constants`]: the wall's radius and mass are the particle's).
    pub constants: Vec<[f32; 4]>,
    /// Tangential spring, m (zero while not touching).
    pub spring: Vec<[f32; 3]>,
    /// Stored rolling torque, N m (`epsd2`, else empty).
    pub roll: Vec<[f32; 3]>,
    /// Rolling friction with that wall (rolling resistance, else empty).
    pub mu_roll: Vec<f32>,
}

impl NeighbourList {
    /// An empty list whose cells suit `setup`.
    pub fn new(setup: &SimSetup) -> Self {
        let r_max = setup
            .particles
            .pos
            .iter()
            .map(|p| p[3])
            .fold(0.0f32, f32::max);
        let cell_size = (2.0 * r_max + setup.skin.max(0.0)).max(f32::MIN_POSITIVE);
        // The longest non-periodic axis of the domain is the major one: the
        // most slabs, and a pair reaches at most the next layer along it.
        let extent: [f32; 3] = std::array::from_fn(|a| setup.domain_max[a] - setup.domain_min[a]);
        let periodic = |a: usize| setup.periodic & (1 << a) != 0;
        let mut axes = [2, 1, 0];
        axes.sort_by(|&a, &b| {
            periodic(a)
                .cmp(&periodic(b))
                .then(extent[b].total_cmp(&extent[a]))
                .then(b.cmp(&a))
        });
        let wrap: [i64; 3] = std::array::from_fn(|a| {
            if periodic(a) {
                ((extent[a] / cell_size).floor() as i64).max(1)
            } else {
                0
            }
        });
        let inv_cell = std::array::from_fn(|a| {
            if wrap[a] > 0 {
                wrap[a] as f32 / extent[a]
            } else {
                1.0 / cell_size
            }
        });
        let period = std::array::from_fn(|a| if periodic(a) { extent[a] } else { 0.0 });
        let inv_period = std::array::from_fn(|a| if periodic(a) { 1.0 / extent[a] } else { 0.0 });
        Self {
            cell_size,
            origin: setup.domain_min,
            axes,
            inv_cell,
            wrap,
            period,
            inv_period,
            ..Self::default()
        }
    }

    /// Cell coordinates (major, middle, minor) of a position.
    #[inline]
    fn coords(&self, p: &[f32; 4]) -> [i64; 3] {
        self.axes.map(|a| {
            let c = ((p[a] - self.origin[a]) * self.inv_cell[a]).floor();
            // NaN and huge values clamp to the edge cells (caught by the
            // non-finite and escape checks, never by an overflow here).
            if c.is_nan() {
                1
            } else if self.wrap[a] > 0 {
                // A periodic axis: cells 1..=D, wrapped (body particles are
                // not wrapped into the box, free ones only at a build).
                (c.clamp(-1e15, 1e15) as i64).rem_euclid(self.wrap[a]) + 1
            } else {
                (c as i64).saturating_add(1).clamp(1, COORD_MAX)
            }
        })
    }

    /// Whether the major axis is periodic (a domain periodic on all three):
    /// then pairs across its face are [`NeighbourList::wraps`].
    pub fn major_periodic(&self) -> bool {
        self.wrap[self.axes[0]] > 0
    }

    /// Whether any axis is periodic.
    pub fn is_periodic(&self) -> bool {
        self.period.iter().any(|&l| l > 0.0)
    }

    /// `pj` moved by whole periods so that `pi - pj` is the minimum image
    /// (the arithmetic of the force lanes: subtract, multiply, round half
    /// to even, multiply, add).
    #[inline]
    pub fn image_of(&self, pi: &[f32; 4], pj: [f32; 4]) -> [f32; 4] {
        let mut out = pj;
        for a in 0..3 {
            out[a] = image_component(pi[a], pj[a], self.period[a], self.inv_period[a]);
        }
        out
    }

    /// Number of listed pairs.
    pub fn len(&self) -> usize {
        self.partner.len()
    }

    /// Whether no pairs are listed.
    pub fn is_empty(&self) -> bool {
        self.partner.is_empty()
    }
}

#[inline]
fn key(c: [i64; 3]) -> u64 {
    ((c[0] as u64) << 42) | ((c[1] as u64) << 21) | c[2] as u64
}

/// The 13 cells after a cell in key order (major, middle, minor offsets):
/// the half shell a pair is listed from.
const HALF_SHELL: [(i64, i64, i64); 13] = [
    (0, 0, 1),
    (0, 1, -1),
    (0, 1, 0),
    (0, 1, 1),
    (1, -1, -1),
    (1, -1, 0),
    (1, -1, 1),
    (1, 0, -1),
    (1, 0, 0),
    (1, 0, 1),
    (1, 1, -1),
    (1, 1, 0),
    (1, 1, 1),
];

/// One pair at the build: `(i, j, material pair, constants, spring,
/// stored rolling torque)`.
type ListedPair = (u32, u32, u32, [f32; 4], [f32; 3], [f32; 3]);

/// Springs of the old list, grouped by the lower persistent id of each
/// pair: `(higher id, spring as the lower id sees it)`.
struct CarriedSprings {
    start: Vec<u32>,
    entries: Vec<(u32, [f32; 3])>,
}

impl CarriedSprings {
    /// Groups `(owner id, other id, spring as the owner sees it)`.
    fn new(n_ids: usize, springs: Vec<(u32, u32, [f32; 3])>) -> Self {
        let mut start = vec![0u32; n_ids + 1];
        for &(a, _, _) in &springs {
            start[a as usize + 1] += 1;
        }
        for k in 0..n_ids {
            start[k + 1] += start[k];
        }
        let mut fill = start.clone();
        let mut entries = vec![(0, [0.0; 3]); springs.len()];
        for (a, b, s) in springs {
            let slot = &mut fill[a as usize];
            entries[*slot as usize] = (b, s);
            *slot += 1;
        }
        Self { start, entries }
    }

    /// The spring `owner` had with `other`, as `owner` sees it.
    #[inline]
    fn find(&self, owner: u32, other: u32) -> Option<[f32; 3]> {
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
    fn between(&self, a: u32, b: u32) -> [f32; 3] {
        if a < b {
            self.find(a, b).unwrap_or([0.0; 3])
        } else {
            self.find(b, a).map_or([0.0; 3], |s| s.map(|x| -x))
        }
    }
}

fn nonzero(s: &[f32; 3]) -> bool {
    s.iter().any(|&x| x != 0.0)
}

/// `pj` along one axis moved by whole periods `l` (inverse `inv`) to the
/// minimum image of `pi`: `pj + round((pi - pj) / l) l`, rounding half to even
/// (the wide prefilter's arithmetic); unchanged when `l` is 0 (not periodic).
#[inline(always)]
pub(super) fn image_component(pi: f32, pj: f32, l: f32, inv: f32) -> f32 {
    if l > 0.0 {
        pj + ((pi - pj) * inv).round_ties_even() * l
    } else {
        pj
    }
}

/// The nonzero values (springs or stored rolling torques) of the old
/// list's pairs, its rows then its wrap pairs, keyed by persistent ids as
/// the lower id sees them (negated for the other): what a build carries.
fn old_pair_values(
    list: &NeighbourList,
    ids: &[u32],
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
    for i in 0..list.row.len().saturating_sub(1) {
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
/// of the old wall contacts, keyed by particle id and wall.
fn old_wall_values(wl: &WallList, ids: &[u32], values: &[[f32; 3]]) -> Vec<(u32, u32, [f32; 3])> {
    let mut out = Vec::new();
    for i in 0..wl.row.len().saturating_sub(1) {
        for k in wl.row[i] as usize..wl.row[i + 1] as usize {
            if let Some(v) = values.get(k).filter(|v| nonzero(v)) {
                out.push((ids[i], wl.wall[k], *v));
            }
        }
    }
    out
}

impl PairListSim {
    /// Sorts the particles by cell and builds the pair and wall lists,
    /// carrying every stretched spring over by persistent ids.
    pub fn rebuild(&mut self) {
        let n = self.state.len();
        let ids = |meta: &[[u32; 4]]| -> Vec<u32> { meta.iter().map(|m| m[0]).collect() };

        // Springs of the old lists, by persistent id.
        let old_ids = ids(&self.state.meta);
        let list = &self.list;
        let carried = CarriedSprings::new(
            n,
            old_pair_values(
                list,
                &old_ids,
                |k| [list.spring[0][k], list.spring[1][k], list.spring[2][k]],
                |k| list.wraps.spring[k],
            ),
        );
        let roll_model = self.params.rolling_model;
        let keep_roll = roll_model == ROLL_EPSD2;
        let rolls = if keep_roll {
            old_pair_values(
                list,
                &old_ids,
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
        let carried_rolls = CarriedSprings::new(n, rolls);
        let wl = &self.wall_list;
        let carried_walls = CarriedSprings::new(n, old_wall_values(wl, &old_ids, &wl.spring));
        let carried_wall_rolls = CarriedSprings::new(n, old_wall_values(wl, &old_ids, &wl.roll));

        // Free particles back into the box along periodic axes (their
        // displacement restarts here; body particles follow their bodies).
        if self.list.is_periodic() {
            let (period, lo) = (self.list.period, self.params.domain_min);
            for (p, m) in self.state.pos.iter_mut().zip(&self.state.meta) {
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
        let max_occupancy = cell_start
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0);

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

        // The half pair list: for each particle, every later particle in
        // its own cell and in the 13 cells after it in key order.
        let skin = self.skin;
        let pos = &s.pos;
        let vel = &s.vel;
        let meta = &s.meta;
        let m = self.params.material_count;
        let table = &self.pairs;
        let hertz = self.params.contact_model == HERTZ;
        let cells: Vec<usize> = (0..cell_key.len()).collect();
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
                        let own = std::iter::once((i + 1, end, false));
                        for (j0, j1, across) in own.chain(spans.iter().copied()) {
                            for j in j0..j1 {
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
            if v[3] > 0.0 {
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
