//! Shader hot reload: an edited shader is validated with naga and its
//! pipelines rebuilt inside a wgpu error scope; a shader that fails (in naga,
//! or only when the pipeline is built) is an error and the old pipelines stay.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::render::{Camera, ColourMode, FrameRenderer, SPHERES_SHADER};
use pellet_player::sim::run::load_setup_cached;
use pellet_player::sim::stages::SimShaders;
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
fn the_sphere_shader_validates_offline() {
    pellet_player::gpu::validate_wgsl("spheres.wgsl", SPHERES_SHADER)
        .unwrap_or_else(|e| panic!("{e}"));
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
    let mut edited = SimShaders::builtin();
    let forces = format!("{}\n// edited\n", edited.get("forces.wgsl").unwrap());
    assert!(edited.set("forces.wgsl", forces));
    let same = run(&mut Simulation::gpu_with_shaders(gpu.clone(), &setup, &edited).unwrap());
    assert_eq!(builtin, same);
    // A syntax error, and a kernel gone missing: errors naming the file,
    // never panics.
    let mut broken = SimShaders::builtin();
    assert!(broken.set("integrate.wgsl", "fn nope(".to_string()));
    let e = Simulation::gpu_with_shaders(gpu.clone(), &setup, &broken)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("integrate.wgsl"), "{e}");
    let mut renamed = SimShaders::builtin();
    let sort = renamed.get("sort.wgsl").unwrap();
    let sort_renamed = sort.replace("fn cell_keys(", "fn cell_keys_renamed(");
    assert_ne!(sort_renamed, sort);
    assert!(renamed.set("sort.wgsl", sort_renamed));
    let e = Simulation::gpu_with_shaders(gpu, &setup, &renamed)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("sort.wgsl") && e.contains("cell_keys"), "{e}");
}
