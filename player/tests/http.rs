//! Baked folders over HTTP, from real servers on loopback (Python's
//! `http.server`, nginx for ETags, and a server here that cuts downloads
//! short): a clean load, a 404, a tampered object, a server that is down, a
//! download cut mid-body, names that try to leave the cache; conditional
//! polls of the manifest that follow re-bakes. Each failure is one line,
//! never a panic, and the cache never holds a half-written folder.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use pellet_bake::bake_mesh::Voxelizer;
use pellet_bake::progress::Progress;
use pellet_bake::scene_bake::bake_scene;

mod server;
use server::{Server, free_port, one_line, serve, wait_for};

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

/// nginx from Debian's package (`scripts/setup.sh` installs it), run
/// unprivileged in the foreground with its files in a temporary folder.
fn serve_nginx(site: &Path, scratch: &Path) -> (Server, u16) {
    let nginx = ["/usr/sbin/nginx", "nginx"]
        .into_iter()
        .find(|n| Command::new(n).arg("-v").output().is_ok())
        .expect("nginx is not installed: run scripts/setup.sh");
    let port = free_port();
    std::fs::create_dir_all(scratch).unwrap();
    let conf = scratch.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off; master_process off; worker_processes 1;\n\
             pid {d}/nginx.pid; error_log {d}/error.log;\n\
             events {{ worker_connections 64; }}\n\
             http {{ access_log off; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
             default_type application/octet-stream; etag on;\n\
             server {{ listen 127.0.0.1:{port}; root {site}; }} }}\n",
            d = scratch.display(),
            site = site.display()
        ),
    )
    .unwrap();
    let child = Command::new(nginx)
        .arg("-p")
        .arg(scratch)
        .arg("-e")
        .arg(scratch.join("error.log"))
        .arg("-c")
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for(port, "nginx");
    (Server(child), port)
}

fn bake_into(scene: &str, folder: &Path) {
    let scene = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../assets/scenes")
        .join(scene);
    bake_scene(&scene, folder, Voxelizer::Cpu, &Progress::hidden()).unwrap();
}

/// Conditional polls against one server: unchanged is a 304; a re-bake is
/// fetched and swapped in; a tampered object is refused with the last good
/// folder kept, and picked up once fixed.
fn follow_rebakes(site: &Path, port: u16, cache: &Path) {
    use pellet_player::remote::RemoteFolder;
    use pellet_player::sim::GridMode;
    use pellet_player::sim::run::load_baked_folder;
    let url = format!("http://127.0.0.1:{port}/live/");
    let mut remote = RemoteFolder::new(&url, cache);
    let folder = remote.fetch().unwrap();
    assert_eq!(
        load_baked_folder(&folder, GridMode::Auto).unwrap().name,
        "push"
    );
    let first = remote.counts();
    assert_eq!(first.manifests, 1);
    assert!(first.objects >= 2, "{first:?}");

    // Unchanged: a 304, nothing downloaded.
    assert!(remote.poll().unwrap().is_none());
    assert_eq!(remote.counts().not_modified, 1, "{:?}", remote.counts());
    assert_eq!(remote.counts().objects, first.objects);

    // Re-baked as another scene: fetched, and the folder plays it.
    bake_into("ballpit.toml", &site.join("live"));
    let changed = remote.poll().unwrap().expect("the new manifest");
    assert_eq!(
        load_baked_folder(&changed, GridMode::Auto).unwrap().name,
        "ballpit"
    );
    std::thread::sleep(Duration::from_millis(1100));
    assert!(remote.poll().unwrap().is_none());

    // Re-baked again, with one new object tampered on the server: refused,
    // and the cache still plays the last good scene.
    let before: std::collections::BTreeSet<_> = std::fs::read_dir(site.join("live"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    bake_into("mixed_sizes.toml", &site.join("live"));
    let new_object = std::fs::read_dir(site.join("live"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| !before.contains(p) && !p.ends_with("manifest.pellet"))
        .expect("a new object");
    let good = std::fs::read(&new_object).unwrap();
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x55;
    std::fs::write(&new_object, &bad).unwrap();
    let e = remote.poll().unwrap_err().to_string();
    assert!(e.contains("content hash"), "{e}");
    assert_eq!(
        load_baked_folder(&folder, GridMode::Auto).unwrap().name,
        "ballpit"
    );
    // Fixed on the server: the next poll picks it up.
    std::fs::write(&new_object, &good).unwrap();
    let fixed = remote.poll().unwrap().expect("the fixed folder");
    assert_eq!(
        load_baked_folder(&fixed, GridMode::Auto).unwrap().name,
        "mixed_sizes"
    );
}

#[test]
fn polls_are_conditional_and_follow_rebakes_on_python_and_nginx() {
    let dir = tempfile::tempdir().unwrap();
    // Python's http.server: Last-Modified / If-Modified-Since.
    let site = dir.path().join("python-site");
    bake_into("push.toml", &site.join("live"));
    // Validators in whole seconds are trusted only for files older than the answer.
    std::thread::sleep(Duration::from_millis(1100));
    let (python, port) = serve(&site);
    follow_rebakes(&site, port, &dir.path().join("cache-python"));
    drop(python);
    // nginx: ETag / If-None-Match.
    let site = dir.path().join("nginx-site");
    bake_into("push.toml", &site.join("live"));
    std::thread::sleep(Duration::from_millis(1100));
    let (nginx, port) = serve_nginx(&site, &dir.path().join("nginx"));
    let probe = ureq::get(&format!("http://127.0.0.1:{port}/live/manifest.pellet"))
        .call()
        .unwrap();
    assert!(probe.headers().get("etag").is_some(), "nginx sends ETags");
    follow_rebakes(&site, port, &dir.path().join("cache-nginx"));
    drop(nginx);
}

/// A server that answers `cut` object requests with half their body, then
/// closes the connection.
fn serve_cutting(site: std::path::PathBuf, cut: Arc<AtomicU32>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                request.push(byte[0]);
            }
            let text = String::from_utf8_lossy(&request);
            let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let file = site.join(path.trim_start_matches('/'));
            let Ok(body) = std::fs::read(&file) else {
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                continue;
            };
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let is_object = !path.ends_with("manifest.pellet");
            let cutting = is_object
                && cut
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| c.checked_sub(1))
                    .is_ok();
            let _ = stream.write_all(if cutting {
                &body[..body.len() / 2]
            } else {
                &body
            });
        }
    });
    port
}

#[test]
fn a_download_cut_short_is_retried_then_fails_cleanly_and_loads_once_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    bake_into("push.toml", &site.join("push"));
    let cut = Arc::new(AtomicU32::new(2));
    let port = serve_cutting(site, cut.clone());
    let url = format!("http://127.0.0.1:{port}/push/");
    // Two cut bodies: the retries recover.
    let out = player(&url, &dir.path().join("cache1"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("retry"));
    // Every body cut (the server dies mid-download each time): one clear
    // line, and no manifest in the cache, so nothing half-loaded is used.
    cut.store(1000, Ordering::SeqCst);
    let cache = dir.path().join("cache2");
    let line = one_line(&player(&url, &cache));
    assert!(
        line.contains("cut short") && line.contains("attempts"),
        "{line}"
    );
    let cached =
        pellet_player::remote::cache_folder(&cache.join("http"), url.trim_end_matches('/'));
    assert!(!cached.join("manifest.pellet").exists());
    // The server recovers: the same command loads.
    cut.store(0, Ordering::SeqCst);
    let out = player(&url, &cache);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn manifest_names_that_leave_the_folder_are_refused() {
    use pellet_formats::AssetKind;
    use pellet_formats::assets::{Manifest, ManifestEntry};
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    for (case, name) in ["../../escape", "/etc/passwd"].into_iter().enumerate() {
        let folder = site.join(format!("case{case}"));
        std::fs::create_dir_all(&folder).unwrap();
        let manifest = Manifest {
            name: "hostile".to_owned(),
            scene: name.to_owned(),
            objects: vec![ManifestEntry {
                hash: name.to_owned(),
                kind: AssetKind::BakedScene,
                size: 10,
                label: String::new(),
            }],
            generator: String::new(),
        };
        // Written around the encoder's own validation, as a hostile server would.
        let payload = rmp_serde::to_vec_named(&manifest).unwrap();
        let bytes =
            pellet_formats::container::encode_payload(AssetKind::Manifest, &payload).unwrap();
        std::fs::write(folder.join("manifest.pellet"), bytes).unwrap();
    }
    let (_server, port) = serve(&site);
    for case in 0..2 {
        let line = one_line(&player(
            &format!("http://127.0.0.1:{port}/case{case}/"),
            &dir.path().join("cache"),
        ));
        assert!(line.contains("manifest.pellet"), "{line}");
        assert!(
            line.contains("64 lower-case hex digits") || line.contains("not a BLAKE3 hash"),
            "{line}"
        );
    }
    assert!(!dir.path().join("escape").exists());
    assert!(!dir.path().join("escape.pellet").exists());
}
