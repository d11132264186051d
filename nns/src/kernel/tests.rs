//! The CPU search against brute force: borderline pairs, boxes, thread counts.

use super::super::cpu::{Lists, brute_force, search_all, search_box};
use super::super::grid::CellGrid;

fn points(n: usize, seed: u64) -> Vec<[f32; 3]> {
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..n)
        .map(|_| [next() * 4.0, next() * 3.0, next() * 5.0])
        .collect()
}

/// Per input index, the sorted list from `lists`.
fn by_id(lists: &Lists, n: usize) -> Vec<Option<Vec<u32>>> {
    let mut out = vec![None; n];
    let mut at = 0;
    for (&id, &c) in lists.ids.iter().zip(&lists.counts) {
        let mut l = lists.indices[at..at + c as usize].to_vec();
        l.sort_unstable();
        out[id as usize] = Some(l);
        at += c as usize;
    }
    out
}

/// Pairs of points a few f32 steps either side of `radius` apart, along
/// random directions, scattered through a box `spread` wide.
fn borderline(radius: f32, spread: f32) -> Vec<[f32; 3]> {
    let centres = points(1500, 3);
    let dirs = points(1500, 5);
    let mut pts = Vec::new();
    for (k, (a, d)) in centres.iter().zip(&dirs).enumerate() {
        let a = a.map(|v| v * spread);
        let d = d.map(|v| v - 2.0);
        let len = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt().max(1e-3);
        let step = 1.0 + ((k % 9) as f32 - 4.0) * f32::EPSILON;
        pts.push(a);
        pts.push(std::array::from_fn(|i| a[i] + d[i] / len * radius * step));
    }
    pts
}

#[test]
fn pairs_within_rounding_of_eps_are_decided_as_the_f64_sum_decides() {
    // An ordinary radius (the f32 test with borderline candidates
    // decided in f64) and radii whose squares leave the f32 test's
    // range (every candidate in f64).
    for (radius, spread) in [(0.45, 1.0), (3e-16, 1e-15), (2e15, 3e15)] {
        let pts = borderline(radius, spread);
        let eps2 = f64::from(radius) * f64::from(radius);
        let truth = brute_force(&pts, radius);
        let found: usize = truth.iter().map(Vec::len).sum();
        assert!(found > 0, "radius {radius}: some pairs");
        let grid = CellGrid::new(&pts, radius, 1 << 20, 2).expect("a grid");
        let all = search_all(&grid, eps2, 2);
        for (i, t) in truth.iter().enumerate() {
            let mut got = all.of(i).to_vec();
            got.sort_unstable();
            assert_eq!(&got, t, "radius {radius}, point {i}");
        }
    }
}

#[test]
fn half_shell_boxes_match_brute_force_on_any_thread_count() {
    let pts = points(3000, 7);
    let radius = 0.45;
    let eps2 = f64::from(radius) * f64::from(radius);
    let truth = brute_force(&pts, radius);
    let grid = CellGrid::new(&pts, radius, 1 << 20, 2).expect("a grid");
    let whole = search_box(&grid, [0; 3], grid.dims, eps2, 1);
    for threads in [2, 3, 5] {
        let again = search_box(&grid, [0; 3], grid.dims, eps2, threads);
        assert_eq!(again.ids, whole.ids);
        assert_eq!(again.counts, whole.counts);
        assert_eq!(again.indices, whole.indices, "{threads} threads");
    }
    for (i, l) in by_id(&whole, pts.len()).into_iter().enumerate() {
        assert_eq!(l.as_ref(), Some(&truth[i]), "point {i}");
    }
    // Straight into input order, on any thread count.
    let all = search_all(&grid, eps2, 1);
    for threads in [2, 3] {
        assert_eq!(search_all(&grid, eps2, threads), all, "{threads} threads");
    }
    for (i, t) in truth.iter().enumerate() {
        let mut got = all.of(i).to_vec();
        got.sort_unstable();
        assert_eq!(&got, t, "point {i}");
    }
    // A box in the middle and one on a corner: the lists of their points.
    let d = grid.dims;
    for (lo, hi) in [
        ([1, 1, 2], [d[0] - 2, d[1] - 1, d[2] - 3]),
        ([0, 0, 0], [3, 2, 4]),
    ] {
        let part = search_box(&grid, lo, hi, eps2, 2);
        let got = by_id(&part, pts.len());
        let mut seen = 0;
        for (i, l) in got.into_iter().enumerate() {
            if let Some(l) = l {
                assert_eq!(l, truth[i], "point {i} of box {lo:?}..{hi:?}");
                seen += 1;
            }
        }
        let cells: usize = (0..3).map(|k| (hi[k] - lo[k]) as usize).product();
        assert!(seen > 0 && cells > 0);
    }
}
