//! Detects the peer programs the benchmarks compare against.

use std::process::Command;

use serde::Serialize;

/// A peer program and whether this machine has it.
#[derive(Debug, Clone, Serialize)]
pub struct Peer {
    /// Name as in docs/BENCHMARKS.md.
    pub name: &'static str,
    /// Executable looked for.
    pub program: &'static str,
    /// Version line, when installed.
    pub version: Option<String>,
    /// How to install it.
    pub install: &'static str,
}

/// Every external peer the benchmark suite knows.
pub fn detect() -> Vec<Peer> {
    let mut peers: Vec<Peer> = [("LIGGGHTS", "liggghts", "apt-get install liggghts")]
        .into_iter()
        .map(|(name, program, install)| Peer {
            name,
            program,
            version: version_of(program),
            install,
        })
        .collect();
    peers.push(Peer {
        name: "trimesh",
        program: "python3",
        version: python_module_version("trimesh"),
        install: "pip install trimesh scipy",
    });
    peers
}

fn version_of(program: &str) -> Option<String> {
    let path = std::env::var_os("PATH")?;
    let found = std::env::split_paths(&path).any(|dir| dir.join(program).is_file());
    if !found {
        return None;
    }
    // LIGGGHTS prints its version banner on an empty input script.
    let out = Command::new(program).arg("-h").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("installed")
            .trim()
            .to_owned(),
    )
}

fn python_module_version(module: &str) -> Option<String> {
    let out = Command::new("python3")
        .args([
            "-c",
            &format!("import {module}; print({module}.__version__)"),
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| format!("{module} {}", String::from_utf8_lossy(&out.stdout).trim()))
}
