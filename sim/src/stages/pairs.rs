//! Stage `pairs`, CPU twin of `pairs.wgsl`: the GPU's neighbour list with
//! a skin: the skin check, the list save, the rebuild's commit, the pair
//! count and fill (springs carried by persistent ids), the partner index,
//! the pair forces and the per-particle sums, with the same kernel names,
//! the same walk over the 27 cells and the same order of every sum.
//!
//! The list is a half list in CSR: particle `i` owns the pairs `(i, j)`
//! with `j > i` in cell order (`pair_start[i]..pair_start[i + 1]`), and
//! finds the pairs it is the partner of through `low_index`
//! (`low_start[i]..low_start[i + 1]`). Each pair's force is computed once,
//! added to its owner and subtracted from its partner.
//!
//! The counting sort between `clear_cells` and `commit_reorder` is the
//! `sort` stage's ([`CpuSim::sort`]).

use super::common::{HERTZ, ROLL_EPSD2, ROLL_NONE, add, cross, dot, scale, sub};
use super::forces::{contact_force_full, pair_constants, rolling_torque};
use crate::cpu::CpuSim;
use crate::{Counter, ForceKind, NeighbourSink, for_each_neighbour};
use std::sync::atomic::Ordering;

/// The list buffers of the GPU pair-list path, on the host (field names
/// follow the WGSL bindings).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListBuffers {
    /// Positions at the last build.
    pub pos_ref: Vec<[f32; 4]>,
    /// Pairs each particle owns (`n + 1` entries, the last 0).
    pub row_count: Vec<u32>,
    /// Exclusive prefix sum of `row_count`: each row's first pair.
    pub pair_start: Vec<u32>,
    /// Pairs each particle is the partner of (`n + 1` entries).
    pub low_count: Vec<u32>,
    /// Exclusive prefix sum of `low_count`.
    pub low_start: Vec<u32>,
    /// Owner (current index) of each pair.
    pub pair_i: Vec<u32>,
    /// Partner (current index) of each pair.
    pub pair_j: Vec<u32>,
    /// `kn`, `kt`, `mu` and the damping of each pair (set at the build).
    pub pair_const: Vec<[f32; 4]>,
    /// Spring (m, owner's view) and partner id bits of each pair.
    pub pair_hist: Vec<[f32; 4]>,
    /// Force on the owner, N.
    pub pair_force: Vec<[f32; 4]>,
    /// `f_t x n`, N (times a radius: that particle's torque).
    pub pair_torque: Vec<[f32; 4]>,
    /// Pair index of each partner entry.
    pub low_index: Vec<u32>,
    /// Row starts of the list before the last rebuild.
    pub old_start: Vec<u32>,
    /// Springs of the list before the last rebuild.
    pub old_hist: Vec<[f32; 4]>,
    /// Spring with each wall, `wall_count` per particle.
    pub wall_hist: Vec<[f32; 4]>,
    /// Walls (below 32) within reach of each particle at the build, as bits.
    pub wall_mask: Vec<u32>,
    /// The copy a rebuild gathers wall springs from.
    pub wall_hist_old: Vec<[f32; 4]>,
    /// Stored rolling torque of each pair (`epsd2`, else empty).
    pub pair_roll: Vec<[f32; 4]>,
    /// Rolling torque `M` of each pair: the owner gets `-M`, the partner
    /// `+M` (rolling resistance, else empty).
    pub pair_roll_m: Vec<[f32; 4]>,
    /// Stored rolling torques of the list before the last rebuild (`epsd2`).
    pub old_roll: Vec<[f32; 4]>,
    /// Stored rolling torque with each wall, `wall_count` per particle (`epsd2`).
    pub wall_roll: Vec<[f32; 4]>,
    /// The copy a rebuild gathers them from (`epsd2`).
    pub wall_roll_old: Vec<[f32; 4]>,
    /// Whether the next [`CpuSim::list_gate`] rebuilds.
    pub rebuild: bool,
    /// Rebuilds so far.
    pub rebuilds: u32,
}

impl ListBuffers {
    /// Empty lists for `n` particles and `walls` walls; the first
    /// evaluation builds.
    pub fn new(n: usize, walls: usize) -> Self {
        Self {
            pos_ref: vec![[0.0; 4]; n],
            row_count: vec![0; n + 1],
            pair_start: vec![0; n + 1],
            low_count: vec![0; n + 1],
            low_start: vec![0; n + 1],
            old_start: vec![0; n + 1],
            wall_hist: vec![[0.0; 4]; n * walls],
            wall_mask: vec![0; n],
            wall_hist_old: vec![[0.0; 4]; n * walls],
            rebuild: true,
            ..Self::default()
        }
    }

    /// Listed pairs.
    pub fn pairs(&self) -> usize {
        self.pair_start.last().copied().unwrap_or(0) as usize
    }
}

/// Exclusive prefix sum (the two `scan_block` / `scan_add` passes).
fn scan(count: &[u32], start: &mut [u32]) {
    let mut sum = 0u32;
    for (s, c) in start.iter_mut().zip(count) {
        *s = sum;
        sum += c;
    }
}

impl CpuSim {
    /// Kernel `skin_check`: whether any particle moved more than half the
    /// skin since the last build (sets the list's rebuild flag).
    pub fn skin_check(&self, list: &mut ListBuffers) {
        let half = 0.5 * self.params.skin;
        for (p, r) in self.state.pos.iter().zip(&list.pos_ref) {
            let d = [p[0] - r[0], p[1] - r[1], p[2] - r[2]];
            if dot(d, d) > half * half {
                list.rebuild = true;
            }
        }
    }

    /// Kernel `list_gate`: whether this evaluation rebuilds (clears the flag).
    pub fn list_gate(&self, list: &mut ListBuffers) -> bool {
        let rebuild = std::mem::take(&mut list.rebuild);
        if rebuild {
            list.rebuilds += 1;
        }
        rebuild
    }

    /// Kernel `save_list`: keeps the list being replaced.
    pub fn save_list(&mut self, list: &mut ListBuffers) {
        // Free particles back into the box before the sort.
        if self.grid.is_periodic() {
            let grid = self.grid;
            for (p, m) in self.state.pos.iter_mut().zip(&self.state.meta) {
                if m[2] == u32::MAX {
                    *p = grid.wrap(*p);
                }
            }
        }
        list.old_start.clone_from(&list.pair_start);
        list.old_hist.clone_from(&list.pair_hist);
        list.wall_hist_old.clone_from(&list.wall_hist);
        if self.params.rolling_model == ROLL_EPSD2 {
            list.old_roll.clone_from(&list.pair_roll);
            list.wall_roll_old.clone_from(&list.wall_roll);
        }
    }

    /// Kernels `clear_cells` .. `reorder_particles` (+ `reorder_rk2`) and
    /// `commit_reorder` / `commit_rk2`: the counting sort, the build
    /// positions, the wall springs in the new order.
    pub fn list_sort(&mut self, list: &mut ListBuffers, rk2: bool) {
        // (Its history-slot gather has nothing to move: the springs live in the list.)
        self.sort(rk2);
        list.pos_ref.clone_from(&self.state.pos);
        let walls = self.params.wall_count as usize;
        let roll = self.params.rolling_model == ROLL_EPSD2;
        if roll && list.wall_roll.len() != list.wall_hist.len() {
            list.wall_roll = vec![[0.0; 4]; list.wall_hist.len()];
            list.wall_roll_old = vec![[0.0; 4]; list.wall_hist.len()];
        }
        for (k, &src) in self.sorted_index.iter().enumerate() {
            let src = src as usize;
            list.wall_hist[k * walls..(k + 1) * walls]
                .copy_from_slice(&list.wall_hist_old[src * walls..(src + 1) * walls]);
            if roll {
                list.wall_roll[k * walls..(k + 1) * walls]
                    .copy_from_slice(&list.wall_roll_old[src * walls..(src + 1) * walls]);
            }
            list.wall_mask[k] = self.walls_within_reach(k);
        }
    }

    /// Kernel function `walls_within_reach`: walls (below 32) closer than
    /// the radius plus the skin, as bits; none for immovable particles.
    fn walls_within_reach(&self, k: usize) -> u32 {
        let (p, v) = (self.state.pos[k], self.state.vel[k]);
        if v[3].is_nan() || v[3] <= 0.0 {
            return 0;
        }
        let mut mask = 0;
        for (w, wall) in self.walls.iter().enumerate().take(32) {
            if dot(wall.normal, [p[0], p[1], p[2]]) - wall.offset < p[3] + self.params.skin {
                mask |= 1 << w;
            }
        }
        mask
    }

    /// Kernel function `listed`: closer than `r_i + r_j + skin`, not of one
    /// body, not both immovable.
    fn listed(&self, i: usize, j: usize) -> bool {
        let s = &self.state;
        let (pi, pj) = (s.pos[i], s.pos[j]);
        let d = self
            .grid
            .min_image([pi[0] - pj[0], pi[1] - pj[1], pi[2] - pj[2]]);
        let reach = pi[3] + pj[3] + self.params.skin;
        if dot(d, d) >= reach * reach {
            return false;
        }
        let (mi, mj) = (s.meta[i], s.meta[j]);
        if mi[2] != u32::MAX && mi[2] == mj[2] {
            return false;
        }
        s.vel[i][3] + s.vel[j][3] != 0.0
    }

    /// The listed partners of `i` in walk order, split into later (owned)
    /// and earlier (partner-of) ones.
    fn walk_neighbours(&self, i: usize) -> (Vec<u32>, Vec<u32>) {
        struct Walk<'a> {
            sim: &'a CpuSim,
            i: usize,
            up: Vec<u32>,
            low: Vec<u32>,
        }
        impl NeighbourSink for Walk<'_> {
            fn visit(&mut self, j: usize) {
                if j == self.i || !self.sim.listed(self.i, j) {
                    return;
                }
                if j > self.i {
                    self.up.push(j as u32);
                } else {
                    self.low.push(j as u32);
                }
            }
        }
        let mut walk = Walk {
            sim: self,
            i,
            up: Vec::new(),
            low: Vec::new(),
        };
        for_each_neighbour(&self.grid, &self.cell_start, &self.state.pos, i, &mut walk);
        (walk.up, walk.low)
    }

    /// Kernel function `carried_entry`: where the old list held the pair
    /// `(i, j)`, and `1` when in the old row of `i` (`-1` in the row of
    /// `j`: its values negated for `i`'s view); `None` when not listed.
    fn carried_entry(&self, list: &ListBuffers, i: usize, j: usize) -> Option<(usize, f32)> {
        let meta = &self.state.meta;
        let (id_i, id_j) = (meta[i][0], meta[j][0]);
        let (oi, oj) = (self.sorted_index[i] as usize, self.sorted_index[j] as usize);
        let row = |o: usize| list.old_start[o] as usize..list.old_start[o + 1] as usize;
        row(oi)
            .find(|&p| list.old_hist[p][3].to_bits() == id_j)
            .map(|p| (p, 1.0))
            .or_else(|| {
                row(oj)
                    .find(|&p| list.old_hist[p][3].to_bits() == id_i)
                    .map(|p| (p, -1.0))
            })
    }

    /// Kernel function `pair_constants`: `kn`, `kt`, `mu` and the damping
    /// of the pair `(i, j)`.
    fn pair_constants(&self, i: usize, j: usize) -> [f32; 4] {
        let s = &self.state;
        let pair = &self.pairs[(s.meta[i][1] * self.params.material_count + s.meta[j][1]) as usize];
        let (ri, rj) = (s.pos[i][3], s.pos[j][3]);
        pair_constants(
            pair,
            self.params.contact_model == HERTZ,
            ri * rj / (ri + rj),
            1.0 / (s.vel[i][3] + s.vel[j][3]),
        )
    }

    /// Kernels `pair_count`, the two prefix sums, `pair_fill` and
    /// `pair_fill_low`: the new list.
    pub fn pair_build(&self, list: &mut ListBuffers) {
        let n = self.state.pos.len();
        let walks: Vec<(Vec<u32>, Vec<u32>)> = (0..n).map(|i| self.walk_neighbours(i)).collect();
        for (i, (up, low)) in walks.iter().enumerate() {
            list.row_count[i] = up.len() as u32;
            list.low_count[i] = low.len() as u32;
        }
        scan(&list.row_count, &mut list.pair_start);
        scan(&list.low_count, &mut list.low_start);
        let total = list.pairs();
        list.pair_i = vec![0; total];
        list.pair_j = vec![0; total];
        list.pair_const = vec![[0.0; 4]; total];
        list.pair_hist = vec![[0.0; 4]; total];
        list.pair_force = vec![[0.0; 4]; total];
        list.pair_torque = vec![[0.0; 4]; total];
        list.low_index = vec![0; total];
        let rolling = self.params.rolling_model;
        list.pair_roll = if rolling == ROLL_EPSD2 {
            vec![[0.0; 4]; total]
        } else {
            Vec::new()
        };
        list.pair_roll_m = if rolling == ROLL_NONE {
            Vec::new()
        } else {
            vec![[0.0; 4]; total]
        };
        for (i, (up, _)) in walks.iter().enumerate() {
            for (t, &j) in up.iter().enumerate() {
                let p = list.pair_start[i] as usize + t;
                list.pair_i[p] = i as u32;
                list.pair_j[p] = j;
                list.pair_const[p] = self.pair_constants(i, j as usize);
                // The spring (and stored rolling torque) the old list held,
                // in i's view.
                let carried = self.carried_entry(list, i, j as usize);
                let view = |v: [f32; 4]| {
                    carried.map_or([0.0; 3], |(_, sign)| {
                        [v[0] * sign, v[1] * sign, v[2] * sign]
                    })
                };
                let s = view(carried.map_or([0.0; 4], |(q, _)| list.old_hist[q]));
                list.pair_hist[p] = [
                    s[0],
                    s[1],
                    s[2],
                    f32::from_bits(self.state.meta[j as usize][0]),
                ];
                if rolling == ROLL_EPSD2 {
                    let m = view(carried.map_or([0.0; 4], |(q, _)| list.old_roll[q]));
                    list.pair_roll[p] = [m[0], m[1], m[2], 0.0];
                }
            }
        }
        for (i, (_, low)) in walks.iter().enumerate() {
            for (t, &j) in low.iter().enumerate() {
                let row =
                    list.pair_start[j as usize] as usize..list.pair_start[j as usize + 1] as usize;
                let found = row
                    .clone()
                    .find(|&p| list.pair_j[p] == i as u32)
                    .unwrap_or(0);
                list.low_index[list.low_start[i] as usize + t] = found as u32;
            }
        }
    }

    /// Kernel `pair_forces`: each listed pair once, from its owner's row.
    pub fn pair_forces(&self, list: &mut ListBuffers, kind: ForceKind) {
        let params = self.params;
        let mode = kind.mode(params.dt);
        let s = &self.state;
        let mut touching = 0u32;
        for i in 0..s.pos.len() {
            let (pi, vi, wi, mi) = (s.pos[i], s.vel[i], s.angvel[i], s.meta[i]);
            for p in list.pair_start[i] as usize..list.pair_start[i + 1] as usize {
                let j = list.pair_j[p] as usize;
                let pj = s.pos[j];
                let d = self
                    .grid
                    .min_image([pi[0] - pj[0], pi[1] - pj[1], pi[2] - pj[2]]);
                let dist2 = dot(d, d);
                let rsum = pi[3] + pj[3];
                let h = list.pair_hist[p];
                let rolling = params.rolling_model;
                if dist2 >= rsum * rsum {
                    list.pair_force[p] = [0.0; 4];
                    list.pair_torque[p] = [0.0; 4];
                    if rolling != ROLL_NONE {
                        list.pair_roll_m[p] = [0.0; 4];
                    }
                    if mode.commit {
                        list.pair_hist[p] = [0.0, 0.0, 0.0, h[3]];
                        if rolling == ROLL_EPSD2 {
                            list.pair_roll[p] = [0.0; 4];
                        }
                    }
                    continue;
                }
                let vj = s.vel[j];
                let dist = dist2.sqrt();
                let n = if dist > 0.0 {
                    scale(d, 1.0 / dist)
                } else if mi[0] < h[3].to_bits() {
                    [0.0, 1.0, 0.0]
                } else {
                    [0.0, -1.0, 0.0]
                };
                let delta = rsum - dist;
                let wj = s.angvel[j];
                let vr = [vi[0] - vj[0], vi[1] - vj[1], vi[2] - vj[2]];
                let wsum = add(
                    scale([wi[0], wi[1], wi[2]], pi[3]),
                    scale([wj[0], wj[1], wj[2]], pj[3]),
                );
                let c = contact_force_full(
                    n,
                    delta,
                    vr,
                    wsum,
                    list.pair_const[p],
                    params.contact_model == HERTZ,
                    [h[0], h[1], h[2]],
                    mode.dt_hist,
                );
                let (f, xi) = (c.force, c.xi);
                let arm = cross(c.ft, n);
                list.pair_force[p] = [f[0], f[1], f[2], 0.0];
                list.pair_torque[p] = [arm[0], arm[1], arm[2], 0.0];
                if mode.commit {
                    list.pair_hist[p] = [xi[0], xi[1], xi[2], h[3]];
                }
                if rolling != ROLL_NONE {
                    let mj = s.meta[j];
                    let mu_roll =
                        self.pairs[(mi[1] * params.material_count + mj[1]) as usize].mu_roll;
                    let stored = if rolling == ROLL_EPSD2 {
                        let r = list.pair_roll[p];
                        [r[0], r[1], r[2]]
                    } else {
                        [0.0; 3]
                    };
                    let w_rel = [wi[0] - wj[0], wi[1] - wj[1], wi[2] - wj[2]];
                    let (m, new) = rolling_torque(
                        rolling,
                        n,
                        w_rel,
                        c.kt,
                        c.kn_delta,
                        c.fn_mag,
                        pi[3] * pj[3] / rsum,
                        mu_roll,
                        stored,
                        mode.dt_hist,
                    );
                    list.pair_roll_m[p] = [m[0], m[1], m[2], 0.0];
                    if mode.commit && rolling == ROLL_EPSD2 {
                        list.pair_roll[p] = [new[0], new[1], new[2], 0.0];
                    }
                }
                touching += 1;
            }
        }
        self.counters[Counter::Contacts as usize].fetch_add(2 * touching, Ordering::Relaxed);
    }

    /// Kernel `particle_forces`: gravity, the particle's pairs in list
    /// order, then its walls; the new wall springs.
    pub fn particle_forces(&mut self, list: &mut ListBuffers, kind: ForceKind) {
        let params = self.params;
        let mode = kind.mode(params.dt);
        let time = self.kernel_time();
        let walls = params.wall_count as usize;
        let mut wall_touching = 0u32;
        let s = &mut self.state;
        for i in 0..s.pos.len() {
            let (pi, vi, wi) = (s.pos[i], s.vel[i], s.angvel[i]);
            let mut f = if vi[3] > 0.0 {
                scale(params.gravity, 1.0 / vi[3])
            } else {
                [0.0; 3]
            };
            let mut t = [0.0f32; 3];
            let first3 = |v: [f32; 4]| [v[0], v[1], v[2]];
            let rolling = params.rolling_model;
            for p in list.pair_start[i] as usize..list.pair_start[i + 1] as usize {
                f = add(f, first3(list.pair_force[p]));
                t = add(t, scale(first3(list.pair_torque[p]), pi[3]));
                if rolling != ROLL_NONE {
                    t = sub(t, first3(list.pair_roll_m[p]));
                }
            }
            for q in list.low_start[i] as usize..list.low_start[i + 1] as usize {
                let p = list.low_index[q] as usize;
                f = sub(f, first3(list.pair_force[p]));
                t = add(t, scale(first3(list.pair_torque[p]), pi[3]));
                if rolling != ROLL_NONE {
                    t = add(t, first3(list.pair_roll_m[p]));
                }
            }
            let mask = list.wall_mask[i];
            let reached = (0..walls).filter(|&w| w >= 32 || mask & (1 << w) != 0);
            for w in reached {
                let wall = &self.walls[w];
                let slot = i * walls + w;
                let mut xi = [0.0; 3];
                let mut roll_new = [0.0; 3];
                let delta = pi[3] - (dot(wall.normal, first3(pi)) - wall.offset);
                if vi[3] > 0.0 && time < wall.remove_at && delta > 0.0 {
                    let pair = &self.pairs
                        [(s.meta[i][1] * params.material_count + wall.material) as usize];
                    let hertz = params.contact_model == HERTZ;
                    let k = pair_constants(pair, hertz, pi[3], 1.0 / vi[3]);
                    let c = contact_force_full(
                        wall.normal,
                        delta,
                        first3(vi),
                        scale(first3(wi), pi[3]),
                        k,
                        hertz,
                        first3(list.wall_hist[slot]),
                        mode.dt_hist,
                    );
                    f = add(f, c.force);
                    t = add(t, scale(cross(c.ft, wall.normal), pi[3]));
                    xi = c.xi;
                    if rolling != ROLL_NONE {
                        let stored = if rolling == ROLL_EPSD2 {
                            first3(list.wall_roll[slot])
                        } else {
                            [0.0; 3]
                        };
                        let (m, new) = rolling_torque(
                            rolling,
                            wall.normal,
                            first3(wi),
                            c.kt,
                            c.kn_delta,
                            c.fn_mag,
                            pi[3],
                            pair.mu_roll,
                            stored,
                            mode.dt_hist,
                        );
                        t = sub(t, m);
                        roll_new = new;
                    }
                    wall_touching += 1;
                }
                if mode.commit {
                    list.wall_hist[slot] = [xi[0], xi[1], xi[2], 0.0];
                    if rolling == ROLL_EPSD2 {
                        list.wall_roll[slot] = [roll_new[0], roll_new[1], roll_new[2], 0.0];
                    }
                }
            }
            s.force[i] = [f[0], f[1], f[2], 0.0];
            s.torque[i] = [t[0], t[1], t[2], 0.0];
        }
        self.counters[Counter::WallContacts as usize].fetch_add(wall_touching, Ordering::Relaxed);
    }

    /// One force evaluation of the pair-list path, kernels in the GPU's
    /// order (`rk2`: RK2's second evaluation, which also gathers the
    /// start-of-step copies).
    pub fn pair_evaluate(&mut self, list: &mut ListBuffers, kind: ForceKind, rk2: bool) {
        self.skin_check(list);
        if self.list_gate(list) {
            self.save_list(list);
            self.list_sort(list, rk2);
            self.pair_build(list);
        }
        self.pair_forces(list, kind);
        self.particle_forces(list, kind);
    }

    /// The pair-list path's first evaluation (the build, then forces).
    pub fn pair_prime(&mut self, list: &mut ListBuffers) {
        self.pair_evaluate(list, ForceKind::Prime, false);
        self.body_reduce();
    }

    /// `steps` whole steps of the pair-list path, kernels in the GPU's order.
    pub fn pair_advance(&mut self, list: &mut ListBuffers, steps: u32) {
        use pellet_formats::scene::Integrator;
        for _ in 0..steps {
            self.clear_step_counters();
            match self.integrator {
                Integrator::VelocityVerlet => {
                    self.verlet_begin();
                    self.body_begin();
                    self.body_particles();
                    self.pair_evaluate(list, ForceKind::Commit, false);
                    self.verlet_end();
                    self.body_reduce();
                    self.body_end();
                    self.body_particles();
                }
                Integrator::Rk2 => {
                    self.pair_evaluate(list, ForceKind::Trial, false);
                    self.rk2_mid();
                    self.pair_evaluate(list, ForceKind::Commit, true);
                    self.rk2_end();
                }
            }
            self.step += 1;
        }
    }
}
