//! The real window, under Xvfb (Debian `xvfb`, installed by scripts/setup.sh):
//! the viewer opens, plays a scene with its panel, and a screenshot of the
//! window's last frame is written and checked; without a display the player
//! says so in one line and shows the headless command.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

fn scene(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../assets/scenes")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn the_window_plays_under_xvfb_and_takes_a_screenshot() {
    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("window.png");
    let out = Command::new("xvfb-run")
        .args(["-a", "-s", "-screen 0 1400x900x24"])
        .arg(env!("CARGO_BIN_EXE_player"))
        .arg(scene("push.toml"))
        .args(["--exit-after", "15", "--screenshot"])
        .arg(&shot)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .env("NODEVICE_SELECT", "1")
        .output()
        .expect("xvfb-run (install the xvfb package: bash scripts/setup.sh)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let img = image::open(&shot).unwrap().to_rgba8();
    assert!(
        img.width() >= 640 && img.height() >= 400,
        "{:?}",
        img.dimensions()
    );
    // The egui panel (dark) on the left, the light scene background on the right.
    let panel = img.get_pixel(20, img.height() - 20);
    assert!(panel[0] < 80, "no panel: {panel:?}");
    let background = img.get_pixel(img.width() - 10, 10);
    assert!(background[0] > 200, "no scene background: {background:?}");
    // The scene: particles and floor differ from the background.
    let drawn = img
        .enumerate_pixels()
        .filter(|(x, _, p)| {
            *x > img.width() / 4 && (0..3).any(|c| p[c].abs_diff(background[c]) > 30)
        })
        .count();
    assert!(drawn > 5000, "little drawn: {drawn} pixels");
}

#[test]
fn without_a_display_it_says_so_in_one_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_player"))
        .arg(scene("ballpit.toml"))
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env("NODEVICE_SELECT", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("no display") && err.contains("--headless --frames"),
        "{err}"
    );
}

#[test]
fn headless_frames_from_the_top_level_command() {
    let dir = tempfile::tempdir().unwrap();
    let frames = dir.path().join("frames");
    let out = Command::new(env!("CARGO_BIN_EXE_player"))
        .arg(scene("ballpit.toml"))
        .args([
            "--headless",
            "--frames",
            "3",
            "--every",
            "10",
            "--size",
            "160x120",
            "--out",
        ])
        .arg(&frames)
        .env("NODEVICE_SELECT", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for k in 0..3 {
        let img = image::open(frames.join(format!("frame_{k:05}.png"))).unwrap();
        assert_eq!((img.width(), img.height()), (160, 120));
    }
    assert!(!frames.join("frame_00003.png").exists());
}

/// The viewer's log, line by line as it writes it, and a wait for a line.
struct Log {
    text: std::sync::Arc<std::sync::Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl Log {
    fn follow(child: &mut std::process::Child) -> Self {
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let stderr = child.stderr.take().unwrap();
        let reader = {
            let text = text.clone();
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(stderr)
                    .lines()
                    .map_while(Result::ok)
                {
                    let mut l = text.lock().unwrap();
                    l.push_str(&line);
                    l.push('\n');
                }
            })
        };
        Self { text, reader }
    }

    /// Waits (up to a minute: the machine may be busy) for `needle` to be
    /// logged `times` times.
    fn wait_for(&self, needle: &str, times: usize) {
        let start = std::time::Instant::now();
        while self.text.lock().unwrap().matches(needle).count() < times {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "no {needle:?} in: {}",
                self.text.lock().unwrap()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Everything logged, once the viewer has exited.
    fn finish(self) -> String {
        let _ = self.reader.join();
        self.text.lock().unwrap().clone()
    }
}

#[test]
fn the_window_follows_edits_and_keeps_the_last_good_state() {
    let dir = tempfile::tempdir().unwrap();
    let scene_path = dir.path().join("edit.toml");
    let good = |g: f32| {
        format!(
            "name = \"edit\"\n[simulation]\ngravity = [0, {g}, 0]\n[domain]\nmin = [0, 0, 0]\nmax = [0.3, 0.3, 0.3]\n\
             [[particles]]\nregion = {{ min = [0.05, 0.05, 0.05], max = [0.25, 0.2, 0.25] }}\nspacing = 0.025\n"
        )
    };
    let save = |text: &str| {
        let tmp = dir.path().join("edit.toml.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &scene_path).unwrap();
    };
    save(&good(-9.81));
    let mut child = Command::new("xvfb-run")
        .args(["-a", "-s", "-screen 0 1024x768x24"])
        .arg(env!("CARGO_BIN_EXE_player"))
        .arg("-v")
        .arg(&scene_path)
        .args(["--exit-after", "100000"])
        .env("NODEVICE_SELECT", "1")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let log = Log::follow(&mut child);
    log.wait_for("viewer ready", 1);
    save("[domain]\nmin = [0, 0]\n"); // broken
    log.wait_for("keeping the last good state", 1);
    save(&good(-1.0)); // fixed
    log.wait_for("reloaded", 1);
    // Stop the viewer (xvfb-run forwards nothing, so kill its process group's player).
    let _ = Command::new("pkill")
        .arg("-f")
        .arg(scene_path.to_string_lossy().as_ref())
        .status();
    let _ = child.wait();
    let log = log.finish();
    assert!(!log.contains("panicked"), "{log}");
}

mod server;

#[test]
fn the_window_follows_a_served_scene_and_edited_shaders() {
    use pellet_bake::bake_mesh::Voxelizer;
    use pellet_bake::progress::Progress;
    use pellet_bake::scene_bake::bake_scene;
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    let bake = |name: &str| {
        bake_scene(
            Path::new(&scene(name)),
            &site.join("live"),
            Voxelizer::Cpu,
            &Progress::hidden(),
        )
        .unwrap()
    };
    bake("ballpit.toml");
    let (_server, port) = server::serve(&site);
    // The built-in shaders, copied into a folder the viewer watches.
    let shaders = dir.path().join("shaders");
    std::fs::create_dir_all(&shaders).unwrap();
    let spheres = shaders.join("spheres.wgsl");
    let builtin = pellet_player::render::SPHERES_SHADER;
    std::fs::write(&spheres, builtin).unwrap();
    let mut child = Command::new("xvfb-run")
        .args(["-a", "-s", "-screen 0 1024x768x24"])
        .arg(env!("CARGO_BIN_EXE_player"))
        .arg("-v")
        .arg(format!("http://127.0.0.1:{port}/live/"))
        .args(["--poll", "0.3", "--exit-after", "100000", "--shaders"])
        .arg(&shaders)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .env("NODEVICE_SELECT", "1")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let log = Log::follow(&mut child);
    let wait_for = |needle: &str, times: usize| log.wait_for(needle, times);
    wait_for("viewer ready", 1);
    bake("push.toml"); // the server's scene changes
    wait_for("reloaded /", 1);
    let save = |text: &str| {
        let tmp = shaders.join("spheres.wgsl.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &spheres).unwrap();
    };
    save(&format!("{builtin}\nfn broken( {{\n")); // rejected
    wait_for("shader rejected, keeping the old pipeline", 1);
    save(&builtin.replace(
        "out.colour = vec4<f32>(colour, 1.0);",
        "out.colour = vec4<f32>(1.0, 0.0, 0.0, 1.0);",
    ));
    wait_for("shader reloaded: spheres.wgsl", 1);
    let _ = Command::new("pkill")
        .arg("-f")
        .arg(format!("127.0.0.1:{port}/live/"))
        .status();
    let _ = child.wait();
    let log = log.finish();
    assert!(!log.contains("panicked"), "{log}");
}
