//! The pair contact in batches of [`LANES`] pairs, structure of arrays: one
//! loop over the lanes whose body has no early exit, so the compiler turns
//! it into AVX2 / AVX-512 instructions where [`dispatch`](super::dispatch)
//! compiles it for them, and into scalar code elsewhere. Both compile the
//! same source: add, sub, mul, div and sqrt round the same in a lane as in
//! a scalar, there is no fused multiply-add, and branches are selects, so
//! every path gives bit-identical results.
//!
//! The arithmetic is [`contact_force_damped`](crate::stages::forces) (the
//! GPU kernels' model) written lane-wise, in the same order.

use crate::stages::common::{ROLL_CDT, ROLL_NONE};

/// Pairs per batch (sixteen f32 lanes fill an AVX-512 register, two AVX2 ones).
pub const LANES: usize = 16;

/// One batch of pairs, as the first particle of each pair sees it.
#[derive(Debug, Clone, Copy, Default)]
pub struct PairLanes {
    /// First particle: position (m) and radius (m).
    pub pi: [[f32; LANES]; 4],
    /// Second particle: position and radius.
    pub pj: [[f32; LANES]; 4],
    /// Velocities, m/s.
    pub vi: [[f32; LANES]; 3],
    /// Velocities of the second particles, m/s.
    pub vj: [[f32; LANES]; 3],
    /// Angular velocities, rad/s.
    pub wi: [[f32; LANES]; 3],
    /// Angular velocities of the second particles, rad/s.
    pub wj: [[f32; LANES]; 3],
    /// Normal stiffness, N/m.
    pub kn: [f32; LANES],
    /// Tangential stiffness, N/m.
    pub kt: [f32; LANES],
    /// Friction coefficient.
    pub mu: [f32; LANES],
    /// Damping coefficient, N s/m.
    pub c: [f32; LANES],
    /// Stored tangential spring, m.
    pub xi: [[f32; LANES]; 3],
    /// Normal of coincident centres: +1 (along +y) when the first particle
    /// has the lower id, else -1.
    pub sign: [f32; LANES],
    /// Coefficient of rolling friction (rolling resistance only).
    pub mu_r: [f32; LANES],
    /// Stored rolling torque, N m (`epsd2` only).
    pub roll: [[f32; LANES]; 3],
}

/// Where a batch's lanes are read from: the chunk's particle state (one
/// `[f32; 4]` per particle), the slab's springs (one array per axis) and
/// the list's per-pair constants.
#[derive(Debug, Clone, Copy)]
pub struct LaneSources<'a> {
    /// Positions and radii.
    pub pos: &'a [[f32; 4]],
    /// Velocities and inverse masses.
    pub vel: &'a [[f32; 4]],
    /// Angular velocities and inverse moments.
    pub angvel: &'a [[f32; 4]],
    /// Springs of the slab's pairs, per axis.
    pub spring: [&'a [f32]; 3],
    /// `kn`, `kt`, `mu` of every pair, when the list has one pair of
    /// materials (then the three arrays below are empty).
    pub uniform: Option<[f32; 3]>,
    /// The damping of every pair, when all have the same (then `damping`
    /// is empty).
    pub uniform_damping: Option<f32>,
    /// Normal stiffness per pair of the list.
    pub kn: &'a [f32],
    /// Tangential stiffness per pair.
    pub kt: &'a [f32],
    /// Friction per pair.
    pub mu: &'a [f32],
    /// Damping per pair.
    pub damping: &'a [f32],
    /// Coincident-centre sign per pair.
    pub sign: &'a [f32],
    /// Stored rolling torques of the slab's pairs, per axis (empty without
    /// `epsd2` rolling resistance).
    pub roll: [&'a [f32]; 3],
    /// The rolling friction of every pair, when all have the same (then
    /// `mu_roll` is empty).
    pub uniform_mu_roll: Option<f32>,
    /// Rolling friction per pair (empty without rolling resistance or when
    /// uniform).
    pub mu_roll: &'a [f32],
}

/// Which pair fills each lane: its owner and partner (indices into the
/// sources' particle arrays), its spring (into the slab's springs) and its
/// list entry (into the constants). Out-of-range indices panic.
#[derive(Debug, Clone, Copy, Default)]
pub struct LaneIndex {
    /// Owner of each lane's pair.
    pub i: [u32; LANES],
    /// Partner.
    pub j: [u32; LANES],
    /// Spring index in the slab.
    pub local: [u32; LANES],
    /// Index in the list.
    pub pair: [u32; LANES],
}

/// Fills the lanes of `b` from `src` at `idx` (the portable build; the
/// wide ones gather the same values).
pub fn fill(src: &LaneSources<'_>, idx: &LaneIndex, b: &mut PairLanes) {
    for l in 0..LANES {
        let (i, j) = (idx.i[l] as usize, idx.j[l] as usize);
        let (k, g) = (idx.local[l] as usize, idx.pair[l] as usize);
        for a in 0..4 {
            b.pi[a][l] = src.pos[i][a];
            b.pj[a][l] = src.pos[j][a];
        }
        for a in 0..3 {
            b.vi[a][l] = src.vel[i][a];
            b.vj[a][l] = src.vel[j][a];
            b.wi[a][l] = src.angvel[i][a];
            b.wj[a][l] = src.angvel[j][a];
            b.xi[a][l] = src.spring[a][k];
        }
        let [kn, kt, mu] = src
            .uniform
            .unwrap_or_else(|| [src.kn[g], src.kt[g], src.mu[g]]);
        b.kn[l] = kn;
        b.kt[l] = kt;
        b.mu[l] = mu;
        b.c[l] = src.uniform_damping.unwrap_or_else(|| src.damping[g]);
        b.sign[l] = src.sign[g];
    }
    fill_roll(src, idx, b);
}

/// The rolling lanes of `b` (friction and stored torque), when the list
/// has rolling resistance: a scalar loop the wide fills share.
#[inline]
pub fn fill_roll(src: &LaneSources<'_>, idx: &LaneIndex, b: &mut PairLanes) {
    if src.uniform_mu_roll.is_none() && src.mu_roll.is_empty() {
        return;
    }
    for l in 0..LANES {
        let g = idx.pair[l] as usize;
        b.mu_r[l] = src.uniform_mu_roll.unwrap_or_else(|| src.mu_roll[g]);
    }
    if !src.roll[0].is_empty() {
        for a in 0..3 {
            for l in 0..LANES {
                b.roll[a][l] = src.roll[a][idx.local[l] as usize];
            }
        }
    }
}

/// Touching pairs found by the wide prefilter and not yet evaluated, in
/// `front..used`, with each pair's indices ([`LaneIndex`] fields), both
/// particles' positions and radii, and the pair's stored spring. Batches
/// are taken from the front and the prefilter appends at `used`; the held
/// pairs move back to the start only when the room runs out
/// ([`Pending::make_room`]), once per several batches.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    /// Owner (chunk index).
    pub i: [u32; PENDING_LEN],
    /// Partner (chunk index).
    pub j: [u32; PENDING_LEN],
    /// Spring index in the slab.
    pub local: [u32; PENDING_LEN],
    /// Index in the list.
    pub pair: [u32; PENDING_LEN],
    /// Owner position and radius.
    pub pi: [[f32; PENDING_LEN]; 4],
    /// Partner position and radius.
    pub pj: [[f32; PENDING_LEN]; 4],
    /// Stored tangential spring, m.
    pub xi: [[f32; PENDING_LEN]; 3],
    /// First pair held.
    pub front: usize,
    /// End of the pairs held (where the prefilter appends).
    pub used: usize,
}

/// The lanes [`Pending`] appends into: the prefilter needs
/// `used + LANES <= PENDING_SPAN`.
pub const PENDING_SPAN: usize = 8 * LANES;

/// The length of [`Pending`]'s arrays: a batch past the span's end, so a
/// batch taken from any front in the span stays inside them.
pub const PENDING_LEN: usize = PENDING_SPAN + LANES;

impl Default for Pending {
    fn default() -> Self {
        Self {
            i: [0; PENDING_LEN],
            j: [0; PENDING_LEN],
            local: [0; PENDING_LEN],
            pair: [0; PENDING_LEN],
            pi: [[0.0; PENDING_LEN]; 4],
            pj: [[0.0; PENDING_LEN]; 4],
            xi: [[0.0; PENDING_LEN]; 3],
            front: 0,
            used: 0,
        }
    }
}

impl Pending {
    /// Pairs held.
    #[inline(always)]
    pub fn held(&self) -> usize {
        self.used - self.front
    }

    /// Copies the first [`LANES`] held pairs (or all, if fewer) into `idx`
    /// and the positions and springs of `b`, and drops them; returns how
    /// many. Every copy is a whole [`LANES`] elements (a few vector moves,
    /// no call): the lanes past the taken pairs carry other entries, valid
    /// indices of the same chunk (or the arrays' zeros), and are ignored.
    #[inline(always)]
    pub fn take(&mut self, idx: &mut LaneIndex, b: &mut PairLanes) -> usize {
        let n = self.held().min(LANES);
        let at = self.front;
        // `front <= used <= PENDING_SPAN`, so a batch from `front` lies inside.
        let head = |v: &[u32; PENDING_LEN]| -> [u32; LANES] { std::array::from_fn(|l| v[at + l]) };
        let headf = |v: &[f32; PENDING_LEN]| -> [f32; LANES] { std::array::from_fn(|l| v[at + l]) };
        idx.i = head(&self.i);
        idx.j = head(&self.j);
        idx.local = head(&self.local);
        idx.pair = head(&self.pair);
        for a in 0..4 {
            b.pi[a] = headf(&self.pi[a]);
            b.pj[a] = headf(&self.pj[a]);
        }
        for a in 0..3 {
            b.xi[a] = headf(&self.xi[a]);
        }
        self.front += n;
        n
    }

    /// Moves the held pairs to the start of the arrays when fewer than
    /// [`LANES`] lanes of room are left, so the prefilter may append again.
    #[inline(always)]
    pub fn make_room(&mut self) {
        if self.used + LANES <= PENDING_SPAN {
            return;
        }
        let held = self.front..self.used;
        self.i.copy_within(held.clone(), 0);
        self.j.copy_within(held.clone(), 0);
        self.local.copy_within(held.clone(), 0);
        self.pair.copy_within(held.clone(), 0);
        for a in 0..4 {
            self.pi[a].copy_within(held.clone(), 0);
            self.pj[a].copy_within(held.clone(), 0);
        }
        for a in 0..3 {
            self.xi[a].copy_within(held.clone(), 0);
        }
        self.used -= self.front;
        self.front = 0;
    }
}

/// A batch's results as one `[f32; 4]` record per lane, the shape of the
/// force and torque arrays the scatter adds them to: the force on the
/// first particle, and `ft x n` times each particle's radius (the torques
/// of the pair's tangential force). The fourth elements are `+0`, so
/// adding or subtracting a record leaves a sum's fourth element (`+0`
/// from the start) as it is. The products are the scalar scatter's
/// (`tn * r`, one rounding), so the sums get the same bits.
#[derive(Debug, Clone, Copy)]
pub struct LaneRecords {
    /// Force on the first particle, N.
    pub f: [[f32; 4]; LANES],
    /// `tn * r_i`: the tangential torque on the first particle, N m.
    pub ti: [[f32; 4]; LANES],
    /// `tn * r_j`: the tangential torque on the second particle, N m.
    pub tj: [[f32; 4]; LANES],
}

impl Default for LaneRecords {
    fn default() -> Self {
        Self {
            f: [[0.0; 4]; LANES],
            ti: [[0.0; 4]; LANES],
            tj: [[0.0; 4]; LANES],
        }
    }
}

/// [`LaneRecords`] of `out` (radii from `b`), the portable build; the wide
/// ones transpose the same values in registers.
pub fn lane_records(b: &PairLanes, out: &PairResults, rec: &mut LaneRecords) {
    for l in 0..LANES {
        let (ri, rj) = (b.pi[3][l], b.pj[3][l]);
        rec.f[l] = [out.f[0][l], out.f[1][l], out.f[2][l], 0.0];
        rec.ti[l] = [out.tn[0][l] * ri, out.tn[1][l] * ri, out.tn[2][l] * ri, 0.0];
        rec.tj[l] = [out.tn[0][l] * rj, out.tn[1][l] * rj, out.tn[2][l] * rj, 0.0];
    }
}

/// What a batch gives: per lane the force on the first particle, `ft x n`
/// (times a radius, the torque on either particle), the new spring, and
/// whether the pair touches.
#[derive(Debug, Clone, Copy, Default)]
pub struct PairResults {
    /// Force on the first particle, N.
    pub f: [[f32; LANES]; 3],
    /// Tangential force cross the normal, N.
    pub tn: [[f32; LANES]; 3],
    /// New tangential spring, m.
    pub xi: [[f32; LANES]; 3],
    /// Whether the pair touches.
    pub touching: [bool; LANES],
    /// Rolling resistance torque `M`, N m: the first particle gets `-M`,
    /// the second `+M`.
    pub m: [[f32; LANES]; 3],
    /// New stored rolling torque, N m (`epsd2`).
    pub roll: [[f32; LANES]; 3],
}

/// The contact of every lane, extending springs over `dt_hist` seconds.
/// `HERTZ`: the lanes' `kn`, `kt`, `c` are Hertz-Mindlin coefficients,
/// scaled by the overlap in each contact ([`contact_stiffness`](crate::stages::forces::contact_stiffness)).
/// `ROLL`: the rolling resistance ([`rolling_torque`](crate::stages::forces::rolling_torque)),
/// `ROLL_NONE`, `ROLL_EPSD2` or `ROLL_CDT`.
#[inline(always)]
pub fn pair_forces<const HERTZ: bool, const ROLL: u32>(
    b: &PairLanes,
    dt_hist: f32,
    out: &mut PairResults,
) {
    for l in 0..LANES {
        let d = [
            b.pi[0][l] - b.pj[0][l],
            b.pi[1][l] - b.pj[1][l],
            b.pi[2][l] - b.pj[2][l],
        ];
        let dist2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        let rsum = b.pi[3][l] + b.pj[3][l];
        let touching = dist2 < rsum * rsum;
        let dist = dist2.sqrt();
        let positive = dist > 0.0;
        let inv = 1.0 / if positive { dist } else { 1.0 };
        let n = [
            if positive { d[0] * inv } else { 0.0 },
            if positive { d[1] * inv } else { b.sign[l] },
            if positive { d[2] * inv } else { 0.0 },
        ];
        let delta = rsum - dist;
        let vr = [
            b.vi[0][l] - b.vj[0][l],
            b.vi[1][l] - b.vj[1][l],
            b.vi[2][l] - b.vj[2][l],
        ];
        let (ri, rj) = (b.pi[3][l], b.pj[3][l]);
        let wsum = [
            b.wi[0][l] * ri + b.wj[0][l] * rj,
            b.wi[1][l] * ri + b.wj[1][l] * rj,
            b.wi[2][l] * ri + b.wj[2][l] * rj,
        ];
        // contact_stiffness, then contact_force_damped, lane-wise.
        let (kn, kt, c, ct) = if HERTZ {
            // Non-touching lanes (delta <= 0) are discarded below.
            let s = if delta > 0.0 { delta } else { 0.0 }.sqrt();
            let q = s.sqrt();
            let (kn0, kt0) = (b.kn[l], b.kt[l]);
            let ratio = kt0 * (2.0 / 3.0) / if kn0 > 0.0 { kn0 } else { 1.0 };
            let cn = b.c[l] * q;
            (kn0 * s, kt0 * s, cn, cn * ratio.sqrt())
        } else {
            (b.kn[l], b.kt[l], b.c[l], b.c[l])
        };
        let vn = vr[0] * n[0] + vr[1] * n[1] + vr[2] * n[2];
        let wxn = [
            wsum[1] * n[2] - wsum[2] * n[1],
            wsum[2] * n[0] - wsum[0] * n[2],
            wsum[0] * n[1] - wsum[1] * n[0],
        ];
        let vc = [vr[0] - wxn[0], vr[1] - wxn[1], vr[2] - wxn[2]];
        let vcn = vc[0] * n[0] + vc[1] * n[1] + vc[2] * n[2];
        let vt = [vc[0] - n[0] * vcn, vc[1] - n[1] * vcn, vc[2] - n[2] * vcn];
        let fn_mag = kn * delta - c * vn;
        let xo = [b.xi[0][l], b.xi[1][l], b.xi[2][l]];
        let xon = xo[0] * n[0] + xo[1] * n[1] + xo[2] * n[2];
        let xi_rot = [xo[0] - n[0] * xon, xo[1] - n[1] * xon, xo[2] - n[2] * xon];
        let xi = [
            xi_rot[0] + vt[0] * dt_hist,
            xi_rot[1] + vt[1] * dt_hist,
            xi_rot[2] + vt[2] * dt_hist,
        ];
        let ft = [
            xi[0] * -kt - vt[0] * ct,
            xi[1] * -kt - vt[1] * ct,
            xi[2] * -kt - vt[2] * ct,
        ];
        let ft_max = b.mu[l] * fn_mag.abs();
        let ft2 = ft[0] * ft[0] + ft[1] * ft[1] + ft[2] * ft[2];
        let capped = ft2 > ft_max * ft_max;
        let ratio = ft_max / if capped { ft2.sqrt() } else { 1.0 };
        let ftc = [ft[0] * ratio, ft[1] * ratio, ft[2] * ratio];
        let kt_inv = -1.0 / if kt > 0.0 { kt } else { 1.0 };
        let xic = [
            if kt > 0.0 {
                (ftc[0] + vt[0] * ct) * kt_inv
            } else {
                0.0
            },
            if kt > 0.0 {
                (ftc[1] + vt[1] * ct) * kt_inv
            } else {
                0.0
            },
            if kt > 0.0 {
                (ftc[2] + vt[2] * ct) * kt_inv
            } else {
                0.0
            },
        ];
        let ft = if capped { ftc } else { ft };
        let xi = if capped { xic } else { xi };
        let f = [
            n[0] * fn_mag + ft[0],
            n[1] * fn_mag + ft[1],
            n[2] * fn_mag + ft[2],
        ];
        let tn = [
            ft[1] * n[2] - ft[2] * n[1],
            ft[2] * n[0] - ft[0] * n[2],
            ft[0] * n[1] - ft[1] * n[0],
        ];
        for a in 0..3 {
            out.f[a][l] = if touching { f[a] } else { 0.0 };
            out.tn[a][l] = if touching { tn[a] } else { 0.0 };
            out.xi[a][l] = if touching { xi[a] } else { 0.0 };
        }
        out.touching[l] = touching;
        if ROLL != ROLL_NONE {
            // rolling_torque, lane-wise: the relative spin without its
            // twisting part.
            let wr = [
                b.wi[0][l] - b.wj[0][l],
                b.wi[1][l] - b.wj[1][l],
                b.wi[2][l] - b.wj[2][l],
            ];
            let wrn = wr[0] * n[0] + wr[1] * n[1] + wr[2] * n[2];
            let wt = [wr[0] - n[0] * wrn, wr[1] - n[1] * wrn, wr[2] - n[2] * wrn];
            let r_eff = ri * rj / (ri + rj);
            let (m, stored) = if ROLL == ROLL_CDT {
                let w2 = wt[0] * wt[0] + wt[1] * wt[1] + wt[2] * wt[2];
                let moving = w2 > 0.0;
                let s = b.mu_r[l] * (kn * delta) * r_eff / if moving { w2.sqrt() } else { 1.0 };
                let m = [wt[0] * s, wt[1] * s, wt[2] * s];
                (if moving { m } else { [0.0; 3] }, [0.0; 3])
            } else {
                let kr = kt * r_eff * r_eff;
                let h = dt_hist * kr;
                let m = [
                    b.roll[0][l] + wt[0] * h,
                    b.roll[1][l] + wt[1] * h,
                    b.roll[2][l] + wt[2] * h,
                ];
                let cap = fn_mag.abs() * r_eff * b.mu_r[l];
                let m2 = m[0] * m[0] + m[1] * m[1] + m[2] * m[2];
                let over = m2 > cap * cap;
                let ratio = cap / if over { m2.sqrt() } else { 1.0 };
                let mc = [m[0] * ratio, m[1] * ratio, m[2] * ratio];
                let m = if over { mc } else { m };
                (m, m)
            };
            for a in 0..3 {
                out.m[a][l] = if touching { m[a] } else { 0.0 };
                out.roll[a][l] = if touching { stored[a] } else { 0.0 };
            }
        }
    }
}
