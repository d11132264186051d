//! The per-phase chunks of whole slabs: each chunk's particle state,
//! springs and wall history as disjoint mutable slices.

/// `v` cut into the disjoint, ascending index ranges `ranges`.
pub(super) fn split_ranges<'a, T>(
    mut v: &'a mut [T],
    ranges: &[(usize, usize)],
) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(ranges.len());
    let mut offset = 0;
    for &(a, b) in ranges {
        let rest = std::mem::take(&mut v);
        let (_, rest) = rest.split_at_mut(a - offset);
        let (mid, rest) = rest.split_at_mut(b - a);
        out.push(mid);
        v = rest;
        offset = b;
    }
    out
}

/// One chunk of whole slabs: the particle state and springs it owns while
/// a phase runs.
pub(super) struct Chunk<'a> {
    /// First particle.
    pub(super) base: usize,
    pub(super) pos: &'a mut [[f32; 4]],
    pub(super) vel: &'a mut [[f32; 4]],
    pub(super) angvel: &'a mut [[f32; 4]],
    pub(super) force: &'a mut [[f32; 4]],
    pub(super) torque: &'a mut [[f32; 4]],
    /// Springs (per axis) of the rows of the chunk's first slab.
    pub(super) spring: [&'a mut [f32]; 3],
    /// Stored rolling torques (per axis) of those rows (empty without
    /// `epsd2` rolling resistance).
    pub(super) roll: [&'a mut [f32]; 3],
    /// Wall springs of all the chunk's particles (even phase).
    pub(super) wall_spring: &'a mut [[f32; 3]],
    /// Their stored rolling torques (empty without `epsd2`).
    pub(super) wall_roll: &'a mut [[f32; 3]],
}

impl Chunk<'_> {
    /// The part of this chunk for the particles `range`, the springs
    /// `pairs` and the wall springs `walls` (global indices, inside the
    /// chunk; the chunk's own springs start at pair `pair0`, its wall
    /// springs at `wall0`). An empty range gives empty slices.
    pub(super) fn part(
        &mut self,
        (pair0, wall0): (usize, usize),
        range: (usize, usize),
        pairs: (usize, usize),
        walls: (usize, usize),
    ) -> Chunk<'_> {
        let cut = |(a, b): (usize, usize), origin: usize| {
            if b > a { a - origin..b - origin } else { 0..0 }
        };
        let (r, p, w) = (cut(range, self.base), cut(pairs, pair0), cut(walls, wall0));
        // History that is not kept stays empty.
        fn kept<T>(v: &mut [T], r: std::ops::Range<usize>) -> &mut [T] {
            if v.is_empty() { v } else { &mut v[r] }
        }
        let [sx, sy, sz] = &mut self.spring;
        let [rx, ry, rz] = &mut self.roll;
        Chunk {
            base: range.0,
            pos: &mut self.pos[r.clone()],
            vel: &mut self.vel[r.clone()],
            angvel: &mut self.angvel[r.clone()],
            force: &mut self.force[r.clone()],
            torque: &mut self.torque[r],
            spring: [&mut sx[p.clone()], &mut sy[p.clone()], &mut sz[p.clone()]],
            roll: [kept(rx, p.clone()), kept(ry, p.clone()), kept(rz, p)],
            wall_spring: &mut self.wall_spring[w.clone()],
            wall_roll: kept(&mut self.wall_roll[..], w),
        }
    }
}

/// The particle arrays a phase splits into chunks.
pub(super) struct Particles<'a> {
    pub(super) pos: &'a mut [[f32; 4]],
    pub(super) vel: &'a mut [[f32; 4]],
    pub(super) angvel: &'a mut [[f32; 4]],
    pub(super) force: &'a mut [[f32; 4]],
    pub(super) torque: &'a mut [[f32; 4]],
}

/// Per-pair and per-wall-contact history a phase splits with the chunks.
pub(super) struct History<'a> {
    pub(super) spring: [&'a mut [f32]; 3],
    pub(super) roll: [&'a mut [f32]; 3],
    pub(super) wall_spring: &'a mut [[f32; 3]],
    pub(super) wall_roll: &'a mut [[f32; 3]],
}

/// `v` cut as [`split_ranges`] does, or into empty slices when `v` is empty
/// (history that is not kept).
pub(super) fn split_or_empty<'a, T>(v: &'a mut [T], ranges: &[(usize, usize)]) -> Vec<&'a mut [T]> {
    if v.is_empty() {
        ranges.iter().map(|_| <&mut [T]>::default()).collect()
    } else {
        split_ranges(v, ranges)
    }
}

/// The chunks of `ranges` (ascending, disjoint particle ranges), each
/// with the springs of `pair_ranges` and wall springs of `wall_ranges`.
pub(super) fn chunks<'a>(
    s: Particles<'a>,
    history: History<'a>,
    ranges: &[(usize, usize)],
    pair_ranges: &[(usize, usize)],
    wall_ranges: &[(usize, usize)],
) -> Vec<Chunk<'a>> {
    let History {
        spring,
        roll,
        wall_spring,
        wall_roll,
    } = history;
    let mut pos = split_ranges(s.pos, ranges).into_iter();
    let mut vel = split_ranges(s.vel, ranges).into_iter();
    let mut angvel = split_ranges(s.angvel, ranges).into_iter();
    let mut force = split_ranges(s.force, ranges).into_iter();
    let mut torque = split_ranges(s.torque, ranges).into_iter();
    let [sx, sy, sz] = spring;
    let mut springs = split_ranges(sx, pair_ranges)
        .into_iter()
        .zip(split_ranges(sy, pair_ranges))
        .zip(split_ranges(sz, pair_ranges))
        .map(|((x, y), z)| [x, y, z]);
    let [rx, ry, rz] = roll;
    let mut rolls = split_or_empty(rx, pair_ranges)
        .into_iter()
        .zip(split_or_empty(ry, pair_ranges))
        .zip(split_or_empty(rz, pair_ranges))
        .map(|((x, y), z)| [x, y, z]);
    let mut walls = split_ranges(wall_spring, wall_ranges).into_iter();
    let mut wall_rolls = split_or_empty(wall_roll, wall_ranges).into_iter();
    ranges
        .iter()
        .filter_map(|&(base, _)| {
            Some(Chunk {
                base,
                pos: pos.next()?,
                vel: vel.next()?,
                angvel: angvel.next()?,
                force: force.next()?,
                torque: torque.next()?,
                spring: springs.next()?,
                roll: rolls.next()?,
                wall_spring: walls.next()?,
                wall_roll: wall_rolls.next()?,
            })
        })
        .collect()
}
