//! The native GPU path's positions after N steps of a baked folder, as the
//! browser steps it (a first evaluation, then batches of 25): the reference
//! the browser test compares with.
//! `cargo run -p pellet-web --example native_positions -- BAKED_DIR STEPS > positions.json`
//! prints one JSON array, `x, y, z, r` per particle in id order.

use std::sync::Arc;

use pellet_gpu::{BackendChoice, Gpu};
use pellet_sim::gpu::GpuSim;
use pellet_web::load::{FolderFetch, load_baked};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(steps)) = (args.get(1), args.get(2)) else {
        return Err("usage: native_positions BAKED_DIR STEPS".into());
    };
    let steps: u32 = steps.parse()?;
    let loaded = pollster::block_on(load_baked(&FolderFetch, dir))?;
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto)?);
    let mut sim = GpuSim::new(gpu, &loaded.setup)?;
    sim.prime()?;
    let mut done = 0;
    while done < steps {
        let batch = (steps - done).min(25);
        sim.advance(batch)?;
        done += batch;
    }
    let state = sim.download()?;
    let n = state.pos.len();
    let mut by_id = vec![0.0f32; n * 4];
    for (p, m) in state.pos.iter().zip(&state.meta) {
        let id = m[0] as usize;
        by_id[id * 4..id * 4 + 4].copy_from_slice(p);
    }
    println!("{}", serde_json::to_string(&by_id)?);
    Ok(())
}
