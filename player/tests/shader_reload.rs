//! Shader hot reload: an edited shader is validated with naga and its
//! pipelines rebuilt inside a wgpu error scope; a shader that fails (in naga,
//! or only when the pipeline is built) is an error and the old pipelines stay.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::render::{Camera, ColourMode, FrameRenderer, SPHERES_SHADER};
use pellet_player::sim::gpu::SIM_SHADER;
use pellet_player::sim::run::load_setup_cached;
use pellet_player::sim::{GridMode, SimSetup, Simulation};

fn ballpit() -> SimSetup {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/scenes/ballpit.toml");
    let cache = tempfile::tempdir().unwrap();
    load_setup_cached(&path, GridMode::Auto, Some(cache.path().to_path_buf())).unwrap()
}

/// Pixels that are pure red.
fn red_pixels(img: &image::RgbaImage) -> usize {
    img.pixels()
        .filter(|p| p[0] > 200 && p[1] < 40 && p[2] < 40)
        .count()
}

#[test]
fn the_renderer_swaps_a_valid_shader_and_keeps_the_old_one_on_errors() {
    let setup = ballpit();
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto).unwrap());
    let sim = Simulation::gpu(gpu, &setup).unwrap();
    let mut renderer = FrameRenderer::new(sim.gpu_sim().unwrap(), &setup, 96, 96).unwrap();
    let min = setup.grid.origin;
    let max: [f32; 3] =
        std::array::from_fn(|k| min[k] + setup.grid.dims[k] as f32 * setup.grid.cell_size);
    let camera = Camera::frame(min, max);
    let frame = |r: &FrameRenderer| r.render(&camera, ColourMode::ByBody, 2.0).unwrap();
    assert!(red_pixels(&frame(&renderer)) < 50);

    // An edit: every sphere pure red.
    let red = SPHERES_SHADER.replace(
        "out.colour = vec4<f32>(colour, 1.0);",
        "out.colour = vec4<f32>(1.0, 0.0, 0.0, 1.0);",
    );
    assert_ne!(red, SPHERES_SHADER);
    renderer.reload_shader(&red).unwrap();
    let reds = red_pixels(&frame(&renderer));
    assert!(reds > 500, "{reds} red pixels");

    // A syntax error: naga's report names the line; the red pipeline stays.
    let broken = format!("{red}\nfn broken( {{\n");
    let e = renderer.reload_shader(&broken).unwrap_err().to_string();
    assert!(e.starts_with("spheres.wgsl: "), "{e}");
    assert!(e.contains("fn broken("), "{e}");
    assert_eq!(red_pixels(&frame(&renderer)), reds);

    // Valid WGSL that only fails when the pipeline is built (the entry point
    // the pipeline needs is gone): caught by the error scope, not a panic.
    let renamed = red.replace("fn fs_main(", "fn fs_renamed(");
    let e = renderer.reload_shader(&renamed).unwrap_err().to_string();
    assert!(e.starts_with("spheres.wgsl: "), "{e}");
    assert_eq!(red_pixels(&frame(&renderer)), reds);

    // Back to the built-in shader.
    renderer.reload_shader(SPHERES_SHADER).unwrap();
    assert!(red_pixels(&frame(&renderer)) < 50);
}

#[test]
fn simulation_kernels_rebuild_from_an_edited_source() {
    let setup = ballpit();
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto).unwrap());
    let run = |sim: &mut Simulation| {
        sim.advance(20).unwrap();
        sim.snapshot().unwrap().positions.to_vec()
    };
    let builtin = run(&mut Simulation::gpu(gpu.clone(), &setup).unwrap());
    // An edit that changes nothing computed runs bit-identically.
    let edited = format!("{SIM_SHADER}\n// edited\n");
    let same = run(&mut Simulation::gpu_with_shader(gpu.clone(), &setup, &edited).unwrap());
    assert_eq!(builtin, same);
    // A syntax error, and a kernel gone missing: errors, never panics.
    let e = Simulation::gpu_with_shader(gpu.clone(), &setup, "fn nope(")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("sim.wgsl"), "{e}");
    let renamed = SIM_SHADER.replace("fn cell_keys(", "fn cell_keys_renamed(");
    assert_ne!(renamed, SIM_SHADER);
    let e = Simulation::gpu_with_shader(gpu, &setup, &renamed)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("sim.wgsl"), "{e}");
}
