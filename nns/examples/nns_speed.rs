//! Times the CPU search's phases on generated points:
//! `cargo run --release -p pellet-nns --example nns_speed -- [N] [RADIUS] [DIST] [THREADS]`.

use std::time::Instant;

use pellet_nns::cpu::search_all;
use pellet_nns::grid::CellGrid;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let radius: f32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0.6);
    let dist = args.get(3).map_or("uniform", String::as_str);
    let threads: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(2);
    let points = pellet_nns::generate::generate(dist, n, 1).expect("distribution");
    let eps2 = f64::from(radius) * f64::from(radius);
    println!("simd {}", pellet_nns::simd_level());
    // The CPU path plans nothing: an empty table.
    let table = pellet_formats::assets::OverlapTable {
        method: Default::default(),
        samples: 0,
        seed: 0,
        ratios: Vec::new().into(),
        offsets: Vec::new().into(),
        values: Vec::new().into(),
        stderr: Vec::new().into(),
    };
    for _ in 0..3 {
        let options = pellet_nns::NnsOptions {
            radius,
            threads,
            ..Default::default()
        };
        let (_, r) = pellet_nns::search(&points, &options, &table, None).expect("a search");
        println!(
            "search(): {:.1} ms = grid {:.1} + search {:.1} + assemble {:.1}: {:.2} M q/s",
            r.total_s * 1e3,
            r.phases.grid_s * 1e3,
            r.phases.search_s * 1e3,
            r.phases.assemble_s * 1e3,
            r.queries_per_s / 1e6
        );
    }
    for _ in 0..5 {
        let t = Instant::now();
        let grid =
            CellGrid::new(&points, radius, (n as u64 * 4).max(1 << 16), threads).expect("a grid");
        let t_grid = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let lists = search_all(&grid, eps2, threads);
        let t_search = t.elapsed().as_secs_f64();
        println!(
            "grid {:.1} ms, search {:.1} ms ({} neighbours): {:.2} M q/s lists included",
            t_grid * 1e3,
            t_search * 1e3,
            lists.indices.len(),
            n as f64 / (t_grid + t_search) / 1e6
        );
    }
}
