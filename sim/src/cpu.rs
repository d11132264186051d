//! The CPU twin of `sim.wgsl`: the same kernels, with the same names, the
//! same data layout and the same order of every floating-point sum, run with
//! rayon. It is the oracle the GPU is tested against stage by stage, and
//! `--backend cpu` runs whole scenes with it.
//!
//! Differences that are allowed: the GPU may fuse multiply-adds and its
//! `sqrt` may differ in the last bit, so GPU and CPU agree to rounding, not
//! bit for bit. Integer stages (keys, counts, the sorted order) agree exactly.

use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;

use super::body::{BodyGpu, body_begin, body_end, body_particle, body_reduce};
use super::contact::{Acc, V3, bad, dot, interact_pair, interact_wall, scale};
use super::grid::GridSpec;
use super::setup::{FREE, PairParams, Params, SimSetup, WallParams, escaped_face};
use pellet_formats::scene::Integrator;

use super::{
    Counter, ForceKind, ForceMode, HostState, NUM_COUNTERS, NeighbourSink, for_each_neighbour,
};

/// Particles per rayon task.
const MIN_LEN: usize = 512;

/// The CPU twin's buffers; field names follow the WGSL bindings.
#[derive(Debug)]
pub struct CpuSim {
    /// Constant parameters.
    pub params: Params,
    /// The grid (`params` in typed form).
    pub grid: GridSpec,
    /// Material pair table.
    pub pairs: Vec<PairParams>,
    /// Walls.
    pub walls: Vec<WallParams>,
    /// Rigid bodies.
    pub bodies: Vec<BodyGpu>,
    /// Force on each body (sum over its particles), N.
    pub body_force: Vec<[f32; 4]>,
    /// Torque on each body about its centre of mass, N m.
    pub body_torque: Vec<[f32; 4]>,
    /// Current index of each particle id.
    pub inv_index: Vec<u32>,
    /// Particle state in the current (cell-sorted) order.
    pub state: HostState,
    /// RK2 start-of-step copies.
    pub pos0: Vec<[f32; 4]>,
    /// RK2 start-of-step velocities.
    pub vel0: Vec<[f32; 4]>,
    /// RK2 start-of-step angular velocities.
    pub angvel0: Vec<[f32; 4]>,
    /// History gathered into the new order, read by `compute_forces`.
    pub hist_count_old: Vec<u32>,
    /// History slots gathered into the new order.
    pub hist_old: Vec<[f32; 4]>,
    /// Cell key of each particle.
    pub keys: Vec<u32>,
    /// Particles per key (`num_keys + 1` entries, the last always 0).
    pub cell_count: Vec<AtomicU32>,
    /// Exclusive prefix sum of `cell_count`: first sorted slot of each key.
    pub cell_start: Vec<u32>,
    /// Scatter cursor per key.
    pub cursor: Vec<u32>,
    /// Old index of the particle at each sorted slot.
    pub sorted_index: Vec<u32>,
    /// Statistics and error counters (see [`Counter`]).
    pub counters: [AtomicU32; NUM_COUNTERS],
    /// Steps taken (the WGSL `clock`).
    pub step: u32,
    /// Time integrator.
    pub integrator: Integrator,
    scratch_f4: Vec<[f32; 4]>,
    scratch_u4: Vec<[u32; 4]>,
}

impl CpuSim {
    /// Buffers for `setup`, particles in input order, no history.
    pub fn new(setup: &SimSetup) -> Self {
        let params = setup.params();
        let n = setup.particles.len();
        let slots = setup.slots as usize;
        let keys = params.num_keys as usize;
        let counters = std::array::from_fn(|_| AtomicU32::new(0));
        let sim = Self {
            params,
            grid: setup.grid,
            pairs: setup.pairs.clone(),
            walls: setup.walls.clone(),
            bodies: setup.bodies.clone(),
            body_force: vec![[0.0; 4]; setup.bodies.len()],
            body_torque: vec![[0.0; 4]; setup.bodies.len()],
            inv_index: (0..n as u32).collect(),
            state: HostState::new(&setup.particles, setup.slots),
            pos0: Vec::new(),
            vel0: Vec::new(),
            angvel0: Vec::new(),
            hist_count_old: vec![0; n],
            hist_old: vec![[0.0; 4]; n * slots],
            keys: vec![0; n],
            cell_count: (0..=keys).map(|_| AtomicU32::new(0)).collect(),
            cell_start: vec![0; keys + 1],
            cursor: vec![0; keys],
            sorted_index: vec![0; n],
            counters,
            step: 0,
            integrator: setup.integrator,
            scratch_f4: Vec::new(),
            scratch_u4: Vec::new(),
        };
        sim.counters[Counter::NanStep as usize].store(u32::MAX, Ordering::Relaxed);
        sim.counters[Counter::NanId as usize].store(u32::MAX, Ordering::Relaxed);
        sim.counters[Counter::EscapeStep as usize].store(u32::MAX, Ordering::Relaxed);
        sim.counters[Counter::EscapeId as usize].store(u32::MAX, Ordering::Relaxed);
        sim
    }

    /// Current simulated time, seconds (`f32(step) * dt`, as the kernels see it).
    pub fn kernel_time(&self) -> f32 {
        self.step as f32 * self.params.dt
    }

    /// Resets the per-step counters.
    pub fn clear_step_counters(&self) {
        for c in [
            Counter::Contacts,
            Counter::WallContacts,
            Counter::MaxOccupancy,
        ] {
            self.counters[c as usize].store(0, Ordering::Relaxed);
        }
    }

    /// Counter value.
    pub fn counter(&self, c: Counter) -> u32 {
        self.counters[c as usize].load(Ordering::Relaxed)
    }

    /// Sorts and evaluates the first forces (velocity Verlet needs them
    /// before its first half kick).
    pub fn prime(&mut self) {
        self.sort(false);
        self.compute_forces(ForceKind::Prime);
        self.body_reduce();
    }

    /// Takes `steps` whole steps, kernels in the GPU's order.
    pub fn advance(&mut self, steps: u32) {
        for _ in 0..steps {
            self.clear_step_counters();
            match self.integrator {
                Integrator::VelocityVerlet => {
                    self.verlet_begin();
                    self.body_begin();
                    self.body_particles();
                    self.sort(false);
                    self.compute_forces(ForceKind::Commit);
                    self.verlet_end();
                    self.body_reduce();
                    self.body_end();
                    self.body_particles();
                }
                Integrator::Rk2 => {
                    self.sort(false);
                    self.compute_forces(ForceKind::Trial);
                    self.rk2_mid();
                    self.sort(true);
                    self.compute_forces(ForceKind::Commit);
                    self.rk2_end();
                }
            }
            self.step += 1;
        }
    }

    // ---- neighbour search: counting sort by cell -------------------------

    /// Kernel `cell_keys`: key of every particle, and particles per key.
    pub fn cell_keys(&mut self) {
        for c in &self.cell_count {
            c.store(0, Ordering::Relaxed);
        }
        let grid = self.grid;
        let counts = &self.cell_count;
        self.keys
            .par_iter_mut()
            .zip(self.state.pos.par_iter())
            .with_min_len(MIN_LEN)
            .for_each(|(key, p)| {
                *key = grid.cell_key(grid.cell_coord([p[0], p[1], p[2]]));
                counts[*key as usize].fetch_add(1, Ordering::Relaxed);
            });
    }

    /// Kernels `scan_block` + `scan_add`: exclusive prefix sum of the counts.
    pub fn scan_cells(&mut self) {
        let mut sum = 0u32;
        for (start, count) in self.cell_start.iter_mut().zip(&self.cell_count) {
            *start = sum;
            sum += count.load(Ordering::Relaxed);
        }
    }

    /// Kernel `scatter`: each particle takes a slot in its key's range. (The
    /// GPU takes slots in arbitrary order; `sort_cells` makes the order stable.)
    pub fn scatter(&mut self) {
        self.cursor.iter_mut().for_each(|c| *c = 0);
        for (i, &key) in self.keys.iter().enumerate() {
            let k = key as usize;
            let slot = self.cell_start[k] + self.cursor[k];
            self.cursor[k] += 1;
            self.sorted_index[slot as usize] = i as u32;
        }
    }

    /// Kernel `sort_cells`: orders each key's particles by persistent id, and
    /// records the largest occupancy.
    pub fn sort_cells(&mut self) {
        let meta = &self.state.meta;
        let mut max_occupancy = 0u32;
        for k in 0..self.params.num_keys as usize {
            let (start, end) = (self.cell_start[k] as usize, self.cell_start[k + 1] as usize);
            max_occupancy = max_occupancy.max((end - start) as u32);
            let seg = &mut self.sorted_index[start..end];
            for a in 1..seg.len() {
                let v = seg[a];
                let id = meta[v as usize][0];
                let mut b = a;
                while b > 0 && meta[seg[b - 1] as usize][0] > id {
                    seg[b] = seg[b - 1];
                    b -= 1;
                }
                seg[b] = v;
            }
        }
        self.counters[Counter::MaxOccupancy as usize].fetch_max(max_occupancy, Ordering::Relaxed);
    }

    /// Kernel `reorder_particles`: gathers particle data into sorted order.
    pub fn reorder_particles(&mut self) {
        let idx = &self.sorted_index;
        let s = &mut self.state;
        let f4 = &mut self.scratch_f4;
        gather(&mut s.pos, idx, f4);
        gather(&mut s.vel, idx, f4);
        gather(&mut s.angvel, idx, f4);
        gather(&mut s.meta, idx, &mut self.scratch_u4);
        gather(&mut s.local, idx, f4);
        for (k, m) in s.meta.iter().enumerate() {
            self.inv_index[m[0] as usize] = k as u32;
        }
    }

    // ---- rigid bodies -----------------------------------------------------

    /// Kernel `body_begin`.
    pub fn body_begin(&mut self) {
        body_begin(
            &mut self.bodies,
            &self.body_force,
            &self.body_torque,
            self.params.dt,
        );
    }

    /// Kernel `body_end`.
    pub fn body_end(&mut self) {
        body_end(
            &mut self.bodies,
            &self.body_force,
            &self.body_torque,
            self.params.dt,
        );
    }

    /// Kernel `body_particles`: body particles follow their bodies.
    pub fn body_particles(&mut self) {
        if self.bodies.is_empty() {
            return;
        }
        let bodies = &self.bodies;
        let s = &mut self.state;
        s.pos
            .par_iter_mut()
            .zip(s.vel.par_iter_mut())
            .zip(s.angvel.par_iter_mut())
            .zip(s.meta.par_iter().zip(s.local.par_iter()))
            .with_min_len(MIN_LEN)
            .for_each(|(((p, v), w), (m, l))| {
                if m[2] != FREE {
                    body_particle(&bodies[m[2] as usize], l, p, v, w);
                }
            });
        self.check_nan();
    }

    /// Kernel `body_reduce`: every body's force and torque.
    pub fn body_reduce(&mut self) {
        let s = &self.state;
        let (inv, bodies) = (&self.inv_index, &self.bodies);
        let sums: Vec<([f32; 4], [f32; 4])> = bodies
            .par_iter()
            .map(|b| body_reduce(b, inv, &s.pos, &s.force, &s.torque))
            .collect();
        for (k, (f, t)) in sums.into_iter().enumerate() {
            self.body_force[k] = f;
            self.body_torque[k] = t;
        }
    }

    /// Kernel `reorder_rk2`: gathers the RK2 start-of-step copies.
    pub fn reorder_rk2(&mut self) {
        let idx = &self.sorted_index;
        let f4 = &mut self.scratch_f4;
        gather(&mut self.pos0, idx, f4);
        gather(&mut self.vel0, idx, f4);
        gather(&mut self.angvel0, idx, f4);
    }

    /// Kernel `reorder_history`: gathers the used history slots into
    /// `hist_old` / `hist_count_old` in sorted order.
    pub fn reorder_history(&mut self) {
        let slots = self.params.slots as usize;
        let idx = &self.sorted_index;
        let src_count = &self.state.hist_count;
        let src = &self.state.hist;
        self.hist_count_old
            .par_iter_mut()
            .zip(self.hist_old.par_chunks_mut(slots))
            .enumerate()
            .with_min_len(MIN_LEN)
            .for_each(|(k, (count, dst))| {
                let from = idx[k] as usize;
                let c = src_count[from];
                *count = c;
                let c = c as usize;
                dst[..c].copy_from_slice(&src[from * slots..from * slots + c]);
            });
    }

    /// The whole counting sort, in kernel order.
    pub fn sort(&mut self, rk2: bool) {
        self.cell_keys();
        self.scan_cells();
        self.scatter();
        self.sort_cells();
        self.reorder_particles();
        if rk2 {
            self.reorder_rk2();
        }
        self.reorder_history();
    }

    // ---- contacts ---------------------------------------------------------

    /// Kernel `compute_forces`: contact and wall forces, torques, gravity,
    /// and the new contact history of every particle.
    pub fn compute_forces(&mut self, kind: ForceKind) {
        let params = self.params;
        let mode = kind.mode(params.dt);
        let grid = self.grid;
        let slots = params.slots as usize;
        let time = self.kernel_time();
        let s = &mut self.state;
        let (pos, vel, angvel, meta) = (&s.pos, &s.vel, &s.angvel, &s.meta);
        let (pairs, walls) = (&self.pairs, &self.walls);
        let (hist_count_old, hist_old) = (&self.hist_count_old, &self.hist_old);
        let cell_start = &self.cell_start;
        let counters = &self.counters;
        s.force
            .par_iter_mut()
            .zip(s.torque.par_iter_mut())
            .zip(s.hist.par_chunks_mut(slots))
            .zip(s.hist_count.par_iter_mut())
            .enumerate()
            .with_min_len(MIN_LEN)
            .for_each(|(i, (((force, torque), hist), hist_count))| {
                let pi = pos[i];
                let vi = vel[i];
                let m_i = if vi[3] > 0.0 { 1.0 / vi[3] } else { 0.0 };
                let old = &hist_old[i * slots..i * slots + hist_count_old[i] as usize];
                let mut acc = Acc {
                    force: scale(
                        [params.gravity[0], params.gravity[1], params.gravity[2]],
                        m_i,
                    ),
                    ..Acc::default()
                };
                let mut sink = ForceSink {
                    i,
                    acc: &mut acc,
                    pos,
                    vel,
                    angvel,
                    meta,
                    pairs,
                    params: &params,
                    mode,
                    old,
                    hist,
                };
                for_each_neighbour(&grid, cell_start, pos, i, &mut sink);
                for (w, wall) in walls.iter().enumerate() {
                    if vi[3] > 0.0 && time < wall.remove_at {
                        interact_wall(
                            w, wall, &pi, &vi, &angvel[i], meta[i][1], pairs, &params, mode, old,
                            hist, &mut acc,
                        );
                    }
                }
                *force = [acc.force[0], acc.force[1], acc.force[2], 0.0];
                *torque = [acc.torque[0], acc.torque[1], acc.torque[2], 0.0];
                if mode.commit {
                    *hist_count = acc.new_count;
                } else {
                    hist[..old.len()].copy_from_slice(old);
                    *hist_count = old.len() as u32;
                }
                counters[Counter::Contacts as usize].fetch_add(acc.touching, Ordering::Relaxed);
                counters[Counter::WallContacts as usize]
                    .fetch_add(acc.wall_touching, Ordering::Relaxed);
                if acc.overflow > 0 {
                    counters[Counter::Overflows as usize]
                        .fetch_add(acc.overflow, Ordering::Relaxed);
                }
            });
    }

    // ---- integration ------------------------------------------------------

    fn report_nan(&self, i: usize) {
        let prev = self.counters[Counter::NanStep as usize].fetch_min(self.step, Ordering::Relaxed);
        if prev >= self.step {
            self.counters[Counter::NanId as usize]
                .fetch_min(self.state.meta[i][0], Ordering::Relaxed);
        }
    }

    fn report_escape(&self, i: usize) {
        let prev =
            self.counters[Counter::EscapeStep as usize].fetch_min(self.step, Ordering::Relaxed);
        if prev >= self.step {
            self.counters[Counter::EscapeId as usize]
                .fetch_min(self.state.meta[i][0], Ordering::Relaxed);
        }
    }

    /// The non-finite and escape checks of the kernels' `check_finite`.
    fn check_nan(&self) {
        let s = &self.state;
        let p = &self.params;
        let out =
            |i: usize| escaped_face(s.pos[i], p.domain_min, p.domain_max, p.closed_faces).is_some();
        let nan = |i: usize| bad(xyz(&s.pos[i])) || bad(xyz(&s.vel[i])) || bad(xyz(&s.angvel[i]));
        let bad_index = (0..s.len())
            .into_par_iter()
            .with_min_len(MIN_LEN)
            .find_first(|&i| nan(i) || out(i));
        if let Some(first) = bad_index {
            for i in first..s.len() {
                if nan(i) {
                    self.report_nan(i);
                }
                if out(i) {
                    self.report_escape(i);
                }
            }
        }
    }

    /// Kernel `verlet_begin`: half kick with the last forces, then drift.
    pub fn verlet_begin(&mut self) {
        let half = 0.5 * self.params.dt;
        let dt = self.params.dt;
        let s = &mut self.state;
        s.pos
            .par_iter_mut()
            .zip(s.vel.par_iter_mut())
            .zip(s.angvel.par_iter_mut())
            .zip(s.force.par_iter().zip(s.torque.par_iter()))
            .zip(s.meta.par_iter())
            .with_min_len(MIN_LEN)
            .for_each(|((((p, v), w), (f, t)), m)| {
                if m[2] != FREE {
                    return;
                }
                kick(v, f, half);
                kick(w, t, half);
                for a in 0..3 {
                    p[a] += v[a] * dt;
                }
            });
        self.check_nan();
    }

    /// Kernel `verlet_end`: the second half kick with the new forces.
    pub fn verlet_end(&mut self) {
        let half = 0.5 * self.params.dt;
        let s = &mut self.state;
        s.vel
            .par_iter_mut()
            .zip(s.angvel.par_iter_mut())
            .zip(s.force.par_iter().zip(s.torque.par_iter()))
            .zip(s.meta.par_iter())
            .with_min_len(MIN_LEN)
            .for_each(|(((v, w), (f, t)), m)| {
                if m[2] == FREE {
                    kick(v, f, half);
                    kick(w, t, half);
                }
            });
        self.check_nan();
    }

    /// Kernel `rk2_mid`: saves the start of the step, moves to the midpoint.
    pub fn rk2_mid(&mut self) {
        let half = 0.5 * self.params.dt;
        let s = &mut self.state;
        self.pos0.clone_from(&s.pos);
        self.vel0.clone_from(&s.vel);
        self.angvel0.clone_from(&s.angvel);
        s.pos
            .par_iter_mut()
            .zip(s.vel.par_iter_mut())
            .zip(s.angvel.par_iter_mut())
            .zip(s.force.par_iter().zip(s.torque.par_iter()))
            .with_min_len(MIN_LEN)
            .for_each(|(((p, v), w), (f, t))| {
                for a in 0..3 {
                    p[a] += v[a] * half;
                }
                kick(v, f, half);
                kick(w, t, half);
            });
        self.check_nan();
    }

    /// Kernel `rk2_end`: the full step from the start with midpoint rates.
    pub fn rk2_end(&mut self) {
        let dt = self.params.dt;
        let s = &mut self.state;
        s.pos
            .par_iter_mut()
            .zip(s.vel.par_iter_mut())
            .zip(s.angvel.par_iter_mut())
            .zip(self.pos0.par_iter().zip(self.vel0.par_iter()))
            .zip(self.angvel0.par_iter())
            .zip(s.force.par_iter().zip(s.torque.par_iter()))
            .with_min_len(MIN_LEN)
            .for_each(|(((((p, v), w), (p0, v0)), w0), (f, t))| {
                for a in 0..3 {
                    p[a] = p0[a] + v[a] * dt;
                }
                let vm = v[3];
                let wm = w[3];
                for a in 0..3 {
                    v[a] = v0[a] + f[a] * (vm * dt);
                    w[a] = w0[a] + t[a] * (wm * dt);
                }
            });
        self.check_nan();
    }
}

#[inline]
fn xyz(v: &[f32; 4]) -> V3 {
    [v[0], v[1], v[2]]
}

/// `v.xyz += f.xyz * (v.w * h)` (velocity and angular velocity kicks).
#[inline]
fn kick(v: &mut [f32; 4], f: &[f32; 4], h: f32) {
    let s = v[3] * h;
    for a in 0..3 {
        v[a] += f[a] * s;
    }
}

/// `src` permuted by `idx` (`out[k] = src[idx[k]]`), through `scratch`,
/// which keeps its allocation from step to step.
fn gather<T: Copy + Send + Sync>(src: &mut Vec<T>, idx: &[u32], scratch: &mut Vec<T>) {
    scratch.clear();
    scratch.par_extend(
        idx.par_iter()
            .with_min_len(MIN_LEN * 4)
            .map(|&i| src[i as usize]),
    );
    std::mem::swap(src, scratch);
}

/// The per-particle body of `compute_forces`, called for each candidate.
struct ForceSink<'a, 'b> {
    i: usize,
    acc: &'b mut Acc,
    pos: &'a [[f32; 4]],
    vel: &'a [[f32; 4]],
    angvel: &'a [[f32; 4]],
    meta: &'a [[u32; 4]],
    pairs: &'a [PairParams],
    params: &'a Params,
    mode: ForceMode,
    old: &'a [[f32; 4]],
    hist: &'b mut [[f32; 4]],
}

impl NeighbourSink for ForceSink<'_, '_> {
    #[inline(always)]
    fn visit(&mut self, j: usize) {
        interact_pair(
            self.i,
            j,
            self.pos,
            self.vel,
            self.angvel,
            self.meta,
            self.pairs,
            self.params,
            self.mode,
            self.old,
            self.hist,
            self.acc,
        );
    }
}

/// Kinetic energy (translational + rotational), joules, summed in f64 in
/// particle order, and the largest speed, m/s.
pub fn kinetic_energy(state: &HostState) -> (f64, f64) {
    let mut ke = 0.0f64;
    let mut vmax = 0.0f64;
    for (v, w) in state.vel.iter().zip(&state.angvel) {
        let v2 = f64::from(v[0]).powi(2) + f64::from(v[1]).powi(2) + f64::from(v[2]).powi(2);
        let w2 = f64::from(w[0]).powi(2) + f64::from(w[1]).powi(2) + f64::from(w[2]).powi(2);
        if v[3] > 0.0 {
            ke += 0.5 * v2 / f64::from(v[3]);
        }
        if w[3] > 0.0 {
            ke += 0.5 * w2 / f64::from(w[3]);
        }
        vmax = vmax.max(v2.sqrt());
    }
    (ke, vmax)
}

/// Elastic energy of all normal springs (particle pairs counted once, and
/// walls), joules. Tangential springs are not included.
pub fn spring_energy(sim: &CpuSim) -> f64 {
    struct Pe<'a> {
        i: usize,
        pos: &'a [[f32; 4]],
        meta: &'a [[u32; 4]],
        pairs: &'a [PairParams],
        m: usize,
        e: f64,
    }
    impl NeighbourSink for Pe<'_> {
        fn visit(&mut self, j: usize) {
            if j <= self.i {
                return;
            }
            let (a, b) = (self.pos[self.i], self.pos[j]);
            let d = [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
            let dist = f64::from(dot(d, d)).sqrt();
            let delta = f64::from(a[3] + b[3]) - dist;
            if delta > 0.0 {
                let pair =
                    self.pairs[self.meta[self.i][1] as usize * self.m + self.meta[j][1] as usize];
                self.e += 0.5 * f64::from(pair.kn) * delta * delta;
            }
        }
    }
    let s = &sim.state;
    let m = sim.params.material_count as usize;
    let time = sim.kernel_time();
    let mut total = 0.0;
    for i in 0..s.len() {
        let mut pe = Pe {
            i,
            pos: &s.pos,
            meta: &s.meta,
            pairs: &sim.pairs,
            m,
            e: 0.0,
        };
        for_each_neighbour(&sim.grid, &sim.cell_start, &s.pos, i, &mut pe);
        total += pe.e;
        for wall in &sim.walls {
            if time >= wall.remove_at {
                continue;
            }
            let p = s.pos[i];
            let dist = f64::from(dot(wall.normal, [p[0], p[1], p[2]]) - wall.offset);
            let delta = f64::from(p[3]) - dist;
            if delta > 0.0 {
                let pair = sim.pairs[s.meta[i][1] as usize * m + wall.material as usize];
                total += 0.5 * f64::from(pair.kn) * delta * delta;
            }
        }
    }
    total
}

/// Total linear momentum, kg m/s, summed in f64.
pub fn momentum(state: &HostState) -> [f64; 3] {
    let mut p = [0.0f64; 3];
    for v in state.vel.iter().filter(|v| v[3] > 0.0) {
        let m = 1.0 / f64::from(v[3]);
        for a in 0..3 {
            p[a] += m * f64::from(v[a]);
        }
    }
    p
}
