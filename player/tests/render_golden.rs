//! Golden images: small frames of fixed scenes after fixed steps, compared
//! with approved PNGs in `player/tests/golden/` with a tolerance. On a
//! mismatch the actual frame and a difference image are written to
//! `target/golden-failures/`. Re-approve after an intended change with
//! `PELLET_BLESS_IMAGES=1 cargo test -p pellet-player --test render_golden`.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pellet_player::gpu::{BackendChoice, Gpu};
use pellet_player::render::{Camera, ColourMode, FrameRenderer};
use pellet_player::sim::run::load_setup_cached;
use pellet_player::sim::{GridMode, Simulation};

/// Largest per-channel difference counted as equal (software rasterizers
/// may round edges differently), and the share of pixels allowed beyond it.
const CHANNEL_TOLERANCE: u8 = 24;
const PIXEL_FRACTION: f64 = 0.01;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn render(scene: &str, steps: u32, mode: ColourMode) -> image::RgbaImage {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../assets/scenes")
        .join(scene);
    let cache = tempfile::tempdir().unwrap();
    let setup = load_setup_cached(&path, GridMode::Auto, Some(cache.path().to_path_buf())).unwrap();
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto).unwrap());
    let mut sim = Simulation::gpu(gpu, &setup).unwrap();
    sim.advance(steps).unwrap();
    let renderer = FrameRenderer::new(sim.gpu_sim().unwrap(), &setup, 192, 192).unwrap();
    let min = setup.grid.origin;
    let max: [f32; 3] =
        std::array::from_fn(|k| min[k] + setup.grid.dims[k] as f32 * setup.grid.cell_size);
    renderer
        .render(&Camera::frame(min, max), mode, 2.0)
        .unwrap()
}

fn check(name: &str, actual: &image::RgbaImage) {
    let path = golden_dir().join(name);
    if std::env::var_os("PELLET_BLESS_IMAGES").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        actual.save(&path).unwrap();
        return;
    }
    let expected = image::open(&path)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (approve with PELLET_BLESS_IMAGES=1)",
                path.display()
            )
        })
        .to_rgba8();
    assert_eq!(expected.dimensions(), actual.dimensions(), "{name}: size");
    let mut diff = image::RgbaImage::new(actual.width(), actual.height());
    let mut bad = 0usize;
    for (x, y, a) in actual.enumerate_pixels() {
        let e = expected.get_pixel(x, y);
        let d = (0..3).map(|c| a[c].abs_diff(e[c])).max().unwrap_or(0);
        if d > CHANNEL_TOLERANCE {
            bad += 1;
        }
        let v = d.saturating_mul(4);
        diff.put_pixel(x, y, image::Rgba([v, v, v, 255]));
    }
    let fraction = bad as f64 / (actual.width() * actual.height()) as f64;
    if fraction > PIXEL_FRACTION {
        let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/golden-failures");
        std::fs::create_dir_all(&out).unwrap();
        actual.save(out.join(format!("actual-{name}"))).unwrap();
        diff.save(out.join(format!("diff-{name}"))).unwrap();
        panic!(
            "{name}: {:.2} % of pixels differ by more than {CHANNEL_TOLERANCE}; actual and difference images in {}",
            fraction * 100.0,
            out.display()
        );
    }
}

#[test]
fn ballpit_after_300_steps() {
    let img = render("ballpit.toml", 300, ColourMode::ByBody);
    // Not a blank frame: the spheres are there.
    let distinct = img
        .pixels()
        .filter(|p| p[0] > 150 && p[2] < 200 && p[0] > p[2])
        .count();
    assert!(distinct > 500, "few sphere pixels: {distinct}");
    check("ballpit-300.png", &img);
}

#[test]
fn push_by_speed_after_200_steps() {
    let img = render("push.toml", 200, ColourMode::BySpeed);
    check("push-speed-200.png", &img);
}

/// Along a periodic axis a particle is drawn wrapped into the box: one
/// stored a period beyond the face draws where it would inside.
#[test]
fn periodic_scenes_draw_particles_wrapped() {
    let gpu = Arc::new(Gpu::new(BackendChoice::Auto).unwrap());
    let frame = |periodic: bool, x: f32| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("one.csv"), "0.1,0.1,0.1\n").unwrap();
        let path = dir.path().join("one.toml");
        std::fs::write(
            &path,
            format!(
                "name = \"one\"\n[simulation]\nparticle_radius = 0.02\ngravity = [0, 0, 0]\n\
                 [domain]\nmin = [0, 0, 0]\nmax = [0.2, 0.2, 0.2]\nperiodic = [{periodic}, false, false]\n\
                 [[particles]]\nfile = \"one.csv\"\n"
            ),
        )
        .unwrap();
        let setup = load_setup_cached(&path, GridMode::Auto, None).unwrap();
        let mut sim = Simulation::gpu(gpu.clone(), &setup).unwrap();
        let mut state = sim.host_state().unwrap();
        state.pos[0][0] = x;
        let pellet_player::sim::Engine::Gpu(g) = sim.engine_mut() else {
            unreachable!()
        };
        g.upload(&state);
        let renderer = FrameRenderer::new(sim.gpu_sim().unwrap(), &setup, 96, 96).unwrap();
        renderer
            .render(&Camera::frame([0.0; 3], [0.2; 3]), ColourMode::ByBody, 2.0)
            .unwrap()
    };
    let inside = frame(true, 0.1);
    assert_eq!(frame(true, 0.3).as_raw(), inside.as_raw(), "drawn wrapped");
    // Without periods the same stored position draws elsewhere.
    assert_ne!(frame(false, 0.3).as_raw(), frame(false, 0.1).as_raw());
}
