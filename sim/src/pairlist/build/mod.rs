//! The neighbour-list build: particles sorted by cell, the half pair list
//! with its per-pair constants, the wall lists, the slabs, and the contact
//! history carried over from the last list by persistent ids.

use crate::setup::SimSetup;

mod carry;
mod lists;

pub(crate) use lists::{Cuts, History, TARGET_SLABS, slabs_of};

/// Cell coordinates are clamped to `1..=COORD_MAX` (21 bits each, so that
/// three make a `u64` key and a neighbour's coordinate never underflows).
const COORD_MAX: i64 = (1 << 21) - 2;

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
    pub(crate) fn coords(&self, p: &[f32; 4]) -> [i64; 3] {
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
pub(crate) fn key(c: [i64; 3]) -> u64 {
    ((c[0] as u64) << 42) | ((c[1] as u64) << 21) | c[2] as u64
}

/// The 13 cells after a cell in key order (major, middle, minor offsets):
/// the half shell a pair is listed from.
/// One pair at the build: `(i, j, material pair, constants, spring,
/// stored rolling torque)`.
type ListedPair = (u32, u32, u32, [f32; 4], [f32; 3], [f32; 3]);

pub(super) const HALF_SHELL: [(i64, i64, i64); 13] = [
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
