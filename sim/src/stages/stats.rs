//! Stage `stats`, CPU twin of `stats.wgsl`: kinetic energy and the largest
//! speed, and the energy and momentum sums the physics tests check.

use super::common::dot;
use crate::cpu::CpuSim;
use crate::setup::PairParams;
use crate::{HostState, NeighbourSink, for_each_neighbour};

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
