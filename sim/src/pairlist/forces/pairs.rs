//! The pair kernel over one slab's rows: each listed pair once, applied
//! to both particles, its spring updated in place (scalar and wide lanes).

use super::chunks::Chunk;
use crate::ForceMode;
use crate::pairlist::build::image_component;
use crate::pairlist::dispatch;
use crate::pairlist::lanes::{
    LANES, LaneIndex, LaneRecords, LaneSources, PairLanes, PairResults, Pending,
};
use crate::stages::common::ROLL_NONE;
use crate::stages::common::V3;

/// `pj` at the minimum image of `pi` (`NeighbourList::image_of`), or as it
/// is without periods.
#[inline(always)]
pub(super) fn image(period: Option<([f32; 3], [f32; 3])>, pi: &[f32; 4], pj: [f32; 4]) -> [f32; 4] {
    let Some((period, inv)) = period else {
        return pj;
    };
    let mut out = pj;
    for a in 0..3 {
        out[a] = image_component(pi[a], pj[a], period[a], inv[a]);
    }
    out
}

/// Every lane's new spring (the lanes give touching pairs their extended
/// spring, the others zero), to the first `used` lanes' spring slots: one
/// copy per axis when those slots are consecutive (lanes from the wide
/// prefilter, where every listed pair of a run touched), else lane by lane.
#[inline(always)]
fn store_springs(
    spring: &mut [&mut [f32]; 3],
    local: &[u32; LANES],
    used: usize,
    xi: &[[f32; LANES]; 3],
) {
    let first = local[0] as usize;
    if used > 0
        && local[..used]
            .windows(2)
            .all(|w| w[1] == w[0].wrapping_add(1))
    {
        for a in 0..3 {
            spring[a][first..first + used].copy_from_slice(&xi[a][..used]);
        }
        return;
    }
    for l in 0..used {
        let k = local[l] as usize;
        for a in 0..3 {
            spring[a][k] = xi[a][l];
        }
    }
}

/// `a + b`, element by element.
#[inline(always)]
fn add4(a: [f32; 4], b: [f32; 4]) -> [f32; 4] {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]
}

/// `a - b`, element by element.
#[inline(always)]
fn sub4(a: [f32; 4], b: [f32; 4]) -> [f32; 4] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3]]
}

#[inline(always)]
pub(super) fn xyz(v: &[f32; 4]) -> V3 {
    [v[0], v[1], v[2]]
}

/// What a batch's evaluation leaves: the lanes' results, and the same as
/// records for the scatter.
#[derive(Default)]
pub(super) struct BatchOut {
    lanes: PairResults,
    rec: LaneRecords,
}

/// The read-only inputs of the pair kernel.
pub(super) struct PairInputs<'a> {
    pub(super) row: &'a [u32],
    pub(super) uniform: Option<[f32; 3]>,
    pub(super) uniform_damping: Option<f32>,
    pub(super) owner: &'a [u32],
    pub(super) partner: &'a [u32],
    pub(super) kn: &'a [f32],
    pub(super) kt: &'a [f32],
    pub(super) mu: &'a [f32],
    pub(super) damping: &'a [f32],
    pub(super) sign: &'a [f32],
    pub(super) mode: ForceMode,
    /// Hertz-Mindlin contacts.
    pub(super) hertz: bool,
    /// Rolling resistance (`ROLL_*`).
    pub(super) roll: u32,
    /// Periods and their inverses (periodic domains): partners at the
    /// minimum image.
    pub(super) period: Option<([f32; 3], [f32; 3])>,
    pub(super) uniform_mu_roll: Option<f32>,
    pub(super) mu_roll: &'a [f32],
}

impl PairInputs<'_> {
    /// Every pair of the rows of particles `first..end`, in batches of
    /// [`LANES`] consecutive touching pairs; the chunk's slices start at
    /// particle `base`, its springs at pair `row[first]`. Each pair's force
    /// goes to both particles, pair by pair in list order.
    pub(super) fn slab(&self, first: usize, end: usize, base: usize, c: &mut Chunk<'_>) -> u32 {
        if dispatch::has_wide_prefilter() {
            return self.slab_wide(first, end, base, c);
        }
        let mode = self.mode;
        let k0 = self.row[first] as usize;
        let mut touching = 0;
        let mut batch = PairLanes::default();
        let mut out = BatchOut::default();
        let mut idx = LaneIndex::default();
        let mut used = 0;
        for i in first - base..end - base {
            let (a, b) = (self.row[i + base] as usize, self.row[i + base + 1] as usize);
            if a == b {
                continue;
            }
            let pi = c.pos[i];
            for k in a..b {
                let j = self.partner[k] as usize - base;
                let pj = image(self.period, &pi, c.pos[j]);
                // The lanes' own test, done first: listed pairs that do not
                // touch only lose their spring (as the lanes would give them).
                let d = [pi[0] - pj[0], pi[1] - pj[1], pi[2] - pj[2]];
                let dist2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                let rsum = pi[3] + pj[3];
                let local = k - k0;
                let touching_now = dist2 < rsum * rsum; // false for NaN, as in the lanes
                if !touching_now {
                    if mode.commit {
                        for a in 0..3 {
                            c.spring[a][local] = 0.0;
                        }
                        for r in c.roll.iter_mut().filter(|r| !r.is_empty()) {
                            r[local] = 0.0;
                        }
                    }
                    continue;
                }
                idx.i[used] = i as u32;
                idx.j[used] = j as u32;
                idx.local[used] = local as u32;
                idx.pair[used] = k as u32;
                used += 1;
                if used == LANES {
                    touching += self.flush(&mut batch, &idx, used, &mut out, c, true);
                    used = 0;
                }
            }
        }
        if used > 0 {
            touching += self.flush(&mut batch, &idx, used, &mut out, c, true);
        }
        touching
    }

    /// [`PairInputs::slab`] with the touching test sixteen listed pairs at a
    /// time (AVX-512): the same touching pairs in the same order, so the
    /// same batches and the same bits.
    pub(super) fn slab_wide(
        &self,
        first: usize,
        end: usize,
        base: usize,
        c: &mut Chunk<'_>,
    ) -> u32 {
        let (k0, k1) = (self.row[first] as usize, self.row[end] as usize);
        let mut touching = 0;
        let mut batch = PairLanes::default();
        let mut out = BatchOut::default();
        let mut idx = LaneIndex::default();
        let mut pending = Pending::default();
        let mut k = k0;
        while k < k1 {
            let stop = (k + LANES).min(k1);
            {
                let listed = dispatch::ListedBlock {
                    pos: c.pos,
                    owner: self.owner,
                    partner: self.partner,
                    base: base as u32,
                    k0,
                    period: self.period,
                    ahead: [c.vel, c.angvel, c.force, c.torque],
                };
                let [sx, sy, sz] = &mut c.spring;
                let [rx, ry, rz] = &mut c.roll;
                // The springs, and the stored rolling torques when kept:
                // cleared for the listed pairs that do not touch.
                let mut springs = [
                    &mut **sx, &mut **sy, &mut **sz, &mut **rx, &mut **ry, &mut **rz,
                ];
                let arrays = if springs[3].is_empty() { 3 } else { 6 };
                dispatch::prefilter_block(
                    &listed,
                    k,
                    stop,
                    &mut springs[..arrays],
                    self.mode.commit,
                    &mut pending,
                );
            }
            while pending.held() >= LANES {
                let used = pending.take(&mut idx, &mut batch);
                touching += self.flush(&mut batch, &idx, used, &mut out, c, false);
            }
            pending.make_room();
            k = stop;
        }
        while pending.held() > 0 {
            let used = pending.take(&mut idx, &mut batch);
            touching += self.flush(&mut batch, &idx, used, &mut out, c, false);
        }
        touching
    }

    /// Gathers the first `used` lanes of `idx` (the rest repeat earlier,
    /// valid pairs and are ignored), evaluates them and adds each pair's
    /// force to both particles, lane by lane in list order. A run of lanes
    /// with one owner keeps the owner's sums in registers, added in the same
    /// order (so the same bits) as through memory; its partners are all
    /// later particles, never the owner. `positions`: gather the positions
    /// too (false when the wide prefilter put them in the lanes).
    #[inline]
    pub(super) fn flush(
        &self,
        batch: &mut PairLanes,
        idx: &LaneIndex,
        used: usize,
        out: &mut BatchOut,
        c: &mut Chunk<'_>,
        positions: bool,
    ) -> u32 {
        // The rolling torques only where a scene has rolling resistance:
        // the scatter loop of the others stays as it was.
        if self.roll == ROLL_NONE {
            self.flush_with::<false>(batch, idx, used, out, c, positions)
        } else {
            self.flush_with::<true>(batch, idx, used, out, c, positions)
        }
    }

    /// [`PairInputs::flush`], with (`ROLL`) or without rolling torques (a
    /// function of its own, as the scatter was before rolling resistance:
    /// inlined into the slab loops it measured slower).
    #[inline(never)]
    pub(super) fn flush_with<const ROLL: bool>(
        &self,
        batch: &mut PairLanes,
        idx: &LaneIndex,
        used: usize,
        out: &mut BatchOut,
        c: &mut Chunk<'_>,
        positions: bool,
    ) -> u32 {
        let mode = self.mode;
        let src = LaneSources {
            pos: c.pos,
            vel: c.vel,
            angvel: c.angvel,
            spring: [&c.spring[0][..], &c.spring[1][..], &c.spring[2][..]],
            uniform: self.uniform,
            uniform_damping: self.uniform_damping,
            kn: self.kn,
            kt: self.kt,
            mu: self.mu,
            damping: self.damping,
            sign: self.sign,
            roll: [&c.roll[0][..], &c.roll[1][..], &c.roll[2][..]],
            uniform_mu_roll: self.uniform_mu_roll,
            mu_roll: self.mu_roll,
        };
        if positions {
            dispatch::fill_lanes(&src, idx, batch);
            if let Some((period, inv)) = self.period {
                // The partners at the minimum image, as the wide prefilter
                // puts them in the lanes.
                for l in 0..LANES {
                    for a in 0..3 {
                        batch.pj[a][l] =
                            image_component(batch.pi[a][l], batch.pj[a][l], period[a], inv[a]);
                    }
                }
            }
        } else {
            dispatch::fill_lanes_but_positions(&src, idx, batch);
        }
        let BatchOut { lanes: out, rec } = out;
        dispatch::pair_forces(batch, mode.dt_hist, self.hertz, self.roll, out);
        dispatch::lane_records(batch, out, rec);
        let roll = ROLL;
        let keep_roll = ROLL && !c.roll[0].is_empty();
        if mode.commit {
            store_springs(&mut c.spring, &idx.local, used, &out.xi);
        }
        let mut touching = 0;
        let mut owner = usize::MAX;
        let (mut fi, mut ti) = ([0.0f32; 4], [0.0f32; 4]);
        for l in 0..used {
            let (i, j, k) = (idx.i[l] as usize, idx.j[l] as usize, idx.local[l] as usize);
            if !out.touching[l] {
                if mode.commit && keep_roll {
                    for a in 0..3 {
                        c.roll[a][k] = 0.0;
                    }
                }
                continue;
            }
            if i != owner {
                if owner != usize::MAX {
                    c.force[owner] = fi;
                    c.torque[owner] = ti;
                }
                owner = i;
                fi = c.force[i];
                ti = c.torque[i];
            }
            // Whole records (four-wide adds; the fourth elements stay +0).
            fi = add4(fi, rec.f[l]);
            ti = add4(ti, rec.ti[l]);
            // The partner's two records read, summed and written whole.
            let (fj, mut tj) = (sub4(c.force[j], rec.f[l]), add4(c.torque[j], rec.tj[l]));
            if roll {
                for a in 0..3 {
                    tj[a] += out.m[a][l];
                }
            }
            c.force[j] = fj;
            c.torque[j] = tj;
            if roll {
                for a in 0..3 {
                    ti[a] -= out.m[a][l];
                }
            }
            touching += 1;
            if mode.commit && keep_roll {
                for a in 0..3 {
                    c.roll[a][k] = out.roll[a][l];
                }
            }
        }
        if owner != usize::MAX {
            c.force[owner] = fi;
            c.torque[owner] = ti;
        }
        touching
    }
}
