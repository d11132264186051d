//! Baked folders over HTTP, from a real server on loopback (Python's
//! `http.server`): a clean load, a 404, a tampered object, a server that is
//! down; each failure is one line, never a panic.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use pellet_bake::bake_mesh::Voxelizer;
use pellet_bake::progress::Progress;
use pellet_bake::scene_bake::bake_scene;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(dir: &Path) -> (Server, u16) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "http.server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (Server(child), port)
}

fn player(url: &str, cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_player"))
        .args([
            "run",
            url,
            "--headless",
            "--steps",
            "5",
            "--backend",
            "cpu",
            "--json",
            "--cache-dir",
        ])
        .arg(cache)
        .env("NODEVICE_SELECT", "1")
        .output()
        .unwrap()
}

fn one_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.contains("WARN")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    lines[0].to_owned()
}

#[test]
fn plays_a_scene_served_over_http_and_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    let scene = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/scenes/push.toml");
    let report = bake_scene(
        &scene,
        &site.join("push"),
        Voxelizer::Cpu,
        &Progress::hidden(),
    )
    .unwrap();
    let (server, port) = serve(&site);
    let url = format!("http://127.0.0.1:{port}/push/");

    // A clean load, then again from the cache.
    for round in 0..2 {
        let out = player(&url, &dir.path().join("cache"));
        assert!(
            out.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["bodies"], 1);
        assert_eq!(summary["scene"], "push");
    }

    // A 404.
    let line = one_line(&player(
        &format!("http://127.0.0.1:{port}/nothing/"),
        &dir.path().join("cache2"),
    ));
    assert!(line.contains("404"), "{line}");

    // A tampered object: rejected, never decoded.
    let object = site
        .join("push")
        .join(format!("{}.pellet", report.bodies[0].object));
    let mut bytes = std::fs::read(&object).unwrap();
    bytes[120] ^= 1;
    std::fs::write(&object, &bytes).unwrap();
    let line = one_line(&player(&url, &dir.path().join("cache3")));
    assert!(line.contains("content hash"), "{line}");

    // The server stopped: a clear error after the retries.
    drop(server);
    let line = one_line(&player(&url, &dir.path().join("cache4")));
    assert!(
        line.contains("cannot reach the server") && line.contains("attempts"),
        "{line}"
    );
}
