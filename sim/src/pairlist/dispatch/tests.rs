//! The wide builds against the portable ones: lane fills, prefilter, pair
//! forces, the Verlet update and the gravity start, bit for bit.

use super::*;
use crate::pairlist::lanes::{LANES, LaneIndex, LaneSources, Pending};

type Records = Vec<[f32; 4]>;

/// A build of [`prefilter_block`] (the dispatched one, or one width by itself).
type Prefilter = fn(&ListedBlock<'_>, usize, usize, &mut [&mut [f32]], bool, &mut Pending);

/// A build of [`verlet16`].
type Update = fn(
    &mut [[f32; 4]],
    &mut [[f32; 4]],
    &mut [[f32; 4]],
    &[[f32; 4]],
    &[[f32; 4]],
    &[[f32; 3]],
    &VerletStep,
) -> Option<f32>;

/// Particle records (positions, velocities, angular velocities) and a per-pair array.
fn sources(n: usize, pairs: usize) -> (Records, Records, Records, Vec<f32>) {
    let f = |k: usize, a: usize| (k * 7 + a) as f32 * 0.25 - 3.0;
    let rec = |s: usize| {
        (0..n)
            .map(|k| [f(k + s, 0), f(k + s, 1), f(k + s, 2), f(k + s, 3)])
            .collect()
    };
    (
        rec(0),
        rec(1),
        rec(2),
        (0..pairs).map(|k| f(k, 5)).collect(),
    )
}

/// The gathers load exactly what the portable fill loads, lane by lane.
#[test]
fn gathered_lanes_match_the_portable_fill() {
    let (pos, vel, angvel, per_pair) = sources(300, 500);
    let spring: Vec<Vec<f32>> = (0..3)
        .map(|a| per_pair.iter().map(|x| x + a as f32).collect())
        .collect();
    let src = LaneSources {
        pos: &pos,
        vel: &vel,
        angvel: &angvel,
        spring: [&spring[0], &spring[1], &spring[2]],
        uniform: None,
        uniform_damping: None,
        kn: &per_pair,
        kt: &spring[0],
        mu: &spring[1],
        damping: &spring[2],
        sign: &per_pair,
        roll: [&[], &[], &[]],
        uniform_mu_roll: None,
        mu_roll: &[],
    };
    for round in 0..50u32 {
        let mut idx = LaneIndex::default();
        for l in 0..LANES {
            let x = round * 31 + l as u32 * 17;
            idx.i[l] = x % 300;
            idx.j[l] = (x * 7 + 299) % 300;
            idx.local[l] = (x * 3) % 500;
            idx.pair[l] = (x * 11 + 499) % 500;
        }
        let (mut wide, mut portable) = (PairLanes::default(), PairLanes::default());
        fill_lanes(&src, &idx, &mut wide);
        fill_lanes_portable(&src, &idx, &mut portable);
        // The AVX2 fills too on a wider CPU, with and without the positions
        // (these from the portable fill, as the prefilter leaves them).
        let avx2: Vec<PairLanes> = eight_lane_fills(&src, &idx, &portable);
        // One pair of materials: the constants come from `uniform`.
        let one = LaneSources {
            uniform: Some([3.0, 2.0, 0.5]),
            uniform_damping: Some(0.25),
            damping: &[],
            kn: &[],
            kt: &[],
            mu: &[],
            ..src
        };
        let (mut wide1, mut portable1) = (PairLanes::default(), PairLanes::default());
        fill_lanes(&one, &idx, &mut wide1);
        fill_lanes_portable(&one, &idx, &mut portable1);
        assert!(wide1.kn == [3.0; LANES] && wide1.mu == [0.5; LANES]);
        assert!(wide1.c == [0.25; LANES] && portable1.c == [0.25; LANES]);
        assert_eq!(wide1.kt, portable1.kt);
        let bits = |b: &PairLanes| -> Vec<u32> {
            b.pi.iter()
                .chain(&b.pj)
                .chain(&b.vi)
                .chain(&b.vj)
                .chain(&b.wi)
                .chain(&b.wj)
                .chain(&b.xi)
                .chain([&b.kn, &b.kt, &b.mu, &b.c, &b.sign])
                .flat_map(|v| v.map(f32::to_bits))
                .collect()
        };
        assert_eq!(
            bits(&wide),
            bits(&portable),
            "round {round} ({})",
            simd_level()
        );
        for (k, b) in avx2.iter().enumerate() {
            assert_eq!(bits(b), bits(&portable), "round {round} (avx2 fill {k})");
        }
    }
}

/// The AVX2 fills of `idx` (with the positions, then without them on a
/// copy of `portable`), where the CPU has AVX2; none elsewhere.
fn eight_lane_fills(
    src: &LaneSources<'_>,
    idx: &LaneIndex,
    portable: &PairLanes,
) -> Vec<PairLanes> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            let mut with = PairLanes::default();
            let mut without = PairLanes {
                pi: portable.pi,
                pj: portable.pj,
                xi: portable.xi,
                sign: portable.sign,
                ..PairLanes::default()
            };
            // SAFETY: the CPU reports AVX2.
            unsafe {
                gather::gather256(src, idx, &mut with, true);
                gather::gather256(src, idx, &mut without, false);
            }
            return vec![with, without];
        }
    }
    let _ = (src, idx, portable);
    Vec::new()
}

/// The prefilters this CPU can run: the dispatched one, and the AVX2 one
/// by itself where the dispatched one is wider.
fn prefilters() -> Vec<(&'static str, Prefilter)> {
    let mut out: Vec<(&'static str, Prefilter)> = Vec::new();
    if has_wide_prefilter() {
        out.push((simd_level(), prefilter_block));
    }
    #[cfg(target_arch = "x86_64")]
    {
        if simd_level() == "avx512" && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU reports AVX2; the test's blocks keep to the
            // ranges `prefilter_block` asserts.
            out.push(("avx2", |src, k, end, springs, commit, pending| unsafe {
                prefilter::prefilter256(src, k, end, springs, commit, pending)
            }));
        }
    }
    out
}

/// The wide prefilter finds exactly the pairs the scalar test finds, in
/// order, with their positions, and clears exactly the others' springs.
#[test]
fn the_wide_prefilter_matches_the_scalar_test() {
    for (level, prefilter) in prefilters() {
        for period in [None, Some(0.031f32)] {
            prefilter_matches(level, prefilter, period);
        }
    }
}

/// [`the_wide_prefilter_matches_the_scalar_test`] for one build, with a
/// periodic x axis of length `period` (partners at the minimum image) or none.
fn prefilter_matches(level: &str, prefilter: Prefilter, period: Option<f32>) {
    let period = period.map(|l| ([l, 0.0, 0.0], [1.0 / l, 0.0, 0.0]));
    let n = 200usize;
    let pos: Vec<[f32; 4]> = (0..n)
        .map(|k| {
            let f = |m: usize| ((k * m + 7) % 97) as f32 * 0.0002;
            [f(13), f(29), f(41), 0.004 + (k % 5) as f32 * 0.001]
        })
        .collect();
    let base = 1000u32;
    let pairs = 150usize;
    let owner: Vec<u32> = (0..pairs).map(|k| base + (k / 3) as u32).collect();
    let partner: Vec<u32> = (0..pairs)
        .map(|k| base + ((k * 37 + 11) % n) as u32)
        .collect();
    let k0 = 5usize;
    for commit in [true, false] {
        let mut spring: Vec<Vec<f32>> = (0..3).map(|a| vec![1.0 + a as f32; pairs - k0]).collect();
        let mut pending = Pending::default();
        let mut found = Vec::new();
        let mut k = k0;
        while k < pairs {
            let stop = (k + LANES).min(pairs);
            let listed = ListedBlock {
                pos: &pos,
                owner: &owner,
                partner: &partner,
                base,
                k0,
                period,
                ahead: [&pos, &[], &pos, &[]],
            };
            let [sx, sy, sz] = &mut spring[..] else {
                unreachable!()
            };
            let mut springs = [&mut sx[..], &mut sy[..], &mut sz[..]];
            prefilter(&listed, k, stop, &mut springs, commit, &mut pending);
            for l in 0..pending.used {
                found.push((
                    pending.i[l],
                    pending.j[l],
                    pending.local[l],
                    pending.pair[l],
                    pending.pi[3][l],
                    pending.pj[0][l],
                ));
            }
            pending.used = 0;
            k = stop;
        }
        let mut want = Vec::new();
        for k in k0..pairs {
            let (i, j) = ((owner[k] - base) as usize, (partner[k] - base) as usize);
            let (pi, mut pj) = (pos[i], pos[j]);
            if let Some((l, inv)) = period {
                pj[0] = crate::pairlist::build::image_component(pi[0], pj[0], l[0], inv[0]);
            }
            let d = [pi[0] - pj[0], pi[1] - pj[1], pi[2] - pj[2]];
            let dist2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            let rsum = pi[3] + pj[3];
            if dist2 < rsum * rsum {
                want.push((i as u32, j as u32, (k - k0) as u32, k as u32, pi[3], pj[0]));
            } else if commit {
                assert!(
                    spring.iter().all(|s| s[k - k0] == 0.0),
                    "spring of {k} kept"
                );
                continue;
            }
            assert!(
                (0..3).all(|a| spring[a][k - k0] == 1.0 + a as f32),
                "spring of {k} changed"
            );
        }
        assert!(!want.is_empty() && want.len() < pairs - k0);
        let bits = |v: &[(u32, u32, u32, u32, f32, f32)]| -> Vec<(u32, u32, u32, u32, u32, u32)> {
            v.iter()
                .map(|&(i, j, l, k, r, x)| (i, j, l, k, r.to_bits(), x.to_bits()))
                .collect()
        };
        assert_eq!(bits(&found), bits(&want), "{level}, period {period:?}");
    }
}

/// An index past its slice panics instead of reading beyond it.
#[test]
#[should_panic(expected = "out of")]
fn an_index_out_of_range_panics() {
    let (pos, vel, angvel, per_pair) = sources(10, 10);
    let src = LaneSources {
        pos: &pos,
        vel: &vel,
        angvel: &angvel,
        spring: [&per_pair, &per_pair, &per_pair],
        uniform: None,
        uniform_damping: None,
        kn: &per_pair,
        kt: &per_pair,
        mu: &per_pair,
        damping: &per_pair,
        sign: &per_pair,
        roll: [&[], &[], &[]],
        uniform_mu_roll: None,
        mu_roll: &[],
    };
    let mut idx = LaneIndex::default();
    idx.j[5] = 10;
    let mut b = PairLanes::default();
    // The wide builds say "out of range", the portable one's slices "out of bounds".
    fill_lanes(&src, &idx, &mut b);
}

/// Random batches with touching, grazing, coincident, sliding and
/// sticking pairs: the wide build and the portable one agree bit for bit.
#[test]
fn wide_and_portable_builds_are_bit_identical() {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move |lo: f32, hi: f32| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        lo + (hi - lo) * ((seed >> 40) as f32 / (1u64 << 24) as f32)
    };
    for round in 0..200 {
        let mut b = PairLanes::default();
        for l in 0..LANES {
            for a in 0..3 {
                b.pi[a][l] = rnd(-0.02, 0.02);
                b.pj[a][l] = if round % 7 == 0 {
                    b.pi[a][l]
                } else {
                    rnd(-0.02, 0.02)
                };
                b.vi[a][l] = rnd(-2.0, 2.0);
                b.vj[a][l] = rnd(-2.0, 2.0);
                b.wi[a][l] = rnd(-50.0, 50.0);
                b.wj[a][l] = rnd(-50.0, 50.0);
                b.xi[a][l] = rnd(-1e-3, 1e-3);
            }
            b.pi[3][l] = rnd(0.005, 0.015);
            b.pj[3][l] = rnd(0.005, 0.015);
            b.kn[l] = rnd(1e3, 1e5);
            b.kt[l] = if l % 5 == 0 { 0.0 } else { rnd(1e2, 1e4) };
            b.mu[l] = rnd(0.0, 1.0);
            b.c[l] = rnd(0.0, 5.0);
            b.sign[l] = if l % 2 == 0 { 1.0 } else { -1.0 };
        }
        let hertz = round % 2 == 1;
        let roll = (round / 2) % 3;
        for l in 0..LANES {
            b.mu_r[l] = rnd(0.0, 0.5);
            for a in 0..3 {
                b.roll[a][l] = rnd(-1e-4, 1e-4);
            }
        }
        let (mut wide, mut portable) = (PairResults::default(), PairResults::default());
        pair_forces(&b, 1e-5, hertz, roll, &mut wide);
        pair_forces_portable(&b, 1e-5, hertz, roll, &mut portable);
        let bits = |r: &PairResults| -> Vec<u32> {
            r.f.iter()
                .chain(&r.tn)
                .chain(&r.xi)
                .chain(&r.m)
                .chain(&r.roll)
                .flat_map(|v| v.map(f32::to_bits))
                .collect()
        };
        assert_eq!(
            bits(&wide),
            bits(&portable),
            "round {round} ({})",
            simd_level()
        );
        assert_eq!(wide.touching, portable.touching);
    }
}

/// A small deterministic generator (xorshift) of floats in `[-1, 1)`.
fn noise(seed: &mut u32) -> f32 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 17;
    *seed ^= *seed << 5;
    (*seed >> 8) as f32 / (1u32 << 23) as f32 - 1.0
}

/// The scalar update of `verlet16`, written out: closing and opening
/// kicks, drift, the checks and the squared displacement.
fn scalar_verlet(
    x: &mut [f32; 4],
    v: &mut [f32; 4],
    w: &mut [f32; 4],
    f: &[f32; 4],
    t: &[f32; 4],
    r: &[f32; 3],
    s: &VerletStep,
) -> (bool, f32) {
    for _ in 0..2 {
        let (sv, sw) = (v[3] * s.h, w[3] * s.h);
        for a in 0..3 {
            v[a] += f[a] * sv;
            w[a] += t[a] * sw;
        }
    }
    for a in 0..3 {
        x[a] += v[a] * s.dt;
    }
    let bad = (0..3).any(|a| {
        !x[a].is_finite()
            || !v[a].is_finite()
            || !w[a].is_finite()
            || x[a] < s.lo[a] - x[3]
            || x[a] > s.hi[a] + x[3]
    });
    let d: [f32; 3] = std::array::from_fn(|a| x[a] - r[a]);
    (bad, d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
}

/// The sixteen-lane update gives the scalar update's bits, and stores
/// nothing when one lane goes non-finite or escapes.
#[test]
fn wide_update_matches_the_scalar_one() {
    let mut builds: Vec<(&str, Update)> = Vec::new();
    if has_wide_update() {
        builds.push((simd_level(), verlet16));
    }
    #[cfg(target_arch = "x86_64")]
    {
        if simd_level() == "avx512" && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU reports AVX2; the test's slices hold sixteen
            // records (seventeen references), as `verlet16` asserts.
            builds.push(("avx2", |x, v, w, f, t, r, s| unsafe {
                update::verlet256(x, v, w, f, t, r, s)
            }));
        }
    }
    if builds.is_empty() {
        eprintln!("no AVX2: the wide update is not used on this CPU");
    }
    for (level, update) in builds {
        update_matches(level, update);
    }
}

/// [`wide_update_matches_the_scalar_one`] for one build.
fn update_matches(level: &str, verlet16: Update) {
    let mut seed = 0x1234_5678;
    let step = VerletStep {
        h: 0.5e-3,
        dt: 1e-3,
        lo: [-1.0, f32::NEG_INFINITY, -1.0],
        hi: [1.0, 2.0, f32::INFINITY],
    };
    for case in 0..200 {
        let mut rec = |scale: f32, w: f32| -> Vec<[f32; 4]> {
            (0..LANES)
                .map(|_| {
                    let n = [noise(&mut seed), noise(&mut seed), noise(&mut seed)];
                    [n[0] * scale, n[1] * scale, n[2] * scale, w]
                })
                .collect()
        };
        let mut x = rec(0.5, 0.01);
        let mut v = rec(3.0, 95.0);
        let mut w = rec(50.0, 2.4e5);
        let mut f = rec(1.0, 0.0);
        let t = rec(1e-3, 0.0);
        let x_ref: Vec<[f32; 3]> = (0..=LANES)
            .map(|k| {
                let p = x.get(k).copied().unwrap_or([0.0; 4]);
                [p[0] + 1e-3 * noise(&mut seed), p[1], p[2]]
            })
            .collect();
        // Some blocks go wrong in one lane: non-finite, or escaped.
        let lane = case % LANES;
        match case % 4 {
            1 => f[lane][1] = f32::INFINITY,
            2 => x[lane][0] = 1.5,
            _ => {}
        }
        let (mut xs, mut vs, mut ws) = (x.clone(), v.clone(), w.clone());
        let mut any_bad = false;
        let mut max_d2 = 0.0f32;
        for k in 0..LANES {
            let (bad, d2) = scalar_verlet(
                &mut xs[k], &mut vs[k], &mut ws[k], &f[k], &t[k], &x_ref[k], &step,
            );
            any_bad |= bad;
            max_d2 = max_d2.max(d2);
        }
        let (x0, v0, w0) = (x.clone(), v.clone(), w.clone());
        let got = verlet16(&mut x, &mut v, &mut w, &f, &t, &x_ref, &step);
        if any_bad {
            assert_eq!(got, None, "{level}, case {case}");
            assert!(x == x0 && v == v0 && w == w0, "stored after a bad lane");
            continue;
        }
        let bits =
            |r: &Vec<[f32; 4]>| -> Vec<u32> { r.iter().flatten().map(|x| x.to_bits()).collect() };
        assert_eq!(
            got.map(f32::to_bits),
            Some(max_d2.to_bits()),
            "{level}, case {case}"
        );
        assert_eq!(bits(&x), bits(&xs), "{level}, positions, case {case}");
        assert_eq!(bits(&v), bits(&vs), "{level}, velocities, case {case}");
        assert_eq!(bits(&w), bits(&ws), "{level}, spins, case {case}");
    }
}

/// Gravity on sixteen particles gives the scalar start's bits,
/// immovable and non-finite inverse masses included.
#[test]
fn wide_gravity_matches_the_scalar_start() {
    let g = [0.3, -9.81, 1e-3];
    let mut seed = 99;
    let mut v: Vec<[f32; 4]> = (0..LANES)
        .map(|_| [0.0, 0.0, 0.0, 100.0 * (noise(&mut seed) + 1.0)])
        .collect();
    v[3][3] = 0.0;
    v[4][3] = -0.0;
    v[5][3] = f32::NAN;
    v[6][3] = f32::INFINITY;
    v[7][3] = 1e-30;
    let check = |level: &str, force: &[[f32; 4]], torque: &[[f32; 4]]| {
        for k in 0..LANES {
            let m = if v[k][3] > 0.0 { 1.0 / v[k][3] } else { 0.0 };
            let want = [g[0] * m, g[1] * m, g[2] * m, 0.0].map(f32::to_bits);
            assert_eq!(force[k].map(f32::to_bits), want, "{level}, lane {k}");
            assert_eq!(torque[k].map(f32::to_bits), [0; 4], "{level}, lane {k}");
        }
    };
    let mut force = vec![[7.0; 4]; LANES];
    let mut torque = vec![[7.0; 4]; LANES];
    if !gravity16(&v, &mut force, &mut torque, g) {
        eprintln!("no AVX2: the wide start is not used on this CPU");
        return;
    }
    check(simd_level(), &force, &torque);
    #[cfg(target_arch = "x86_64")]
    {
        if simd_level() == "avx512" {
            let mut force = vec![[7.0; 4]; LANES];
            let mut torque = vec![[7.0; 4]; LANES];
            // SAFETY: AVX-512F implies AVX2 here (`simd_cap`); sixteen
            // records in each slice.
            unsafe { update::gravity256(&v, &mut force, &mut torque, g) };
            check("avx2", &force, &torque);
        }
    }
}
