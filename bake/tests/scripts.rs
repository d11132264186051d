//! The repository's scripts call the binaries the way any target folder allows.

use std::path::Path;

/// `scripts/run.sh` (the README's main command) runs `bake` and `player`
/// through cargo, so a shared `CARGO_TARGET_DIR` works, and names no
/// binary under `./target/`.
#[test]
fn run_sh_lets_cargo_find_the_binaries() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/run.sh");
    let script = std::fs::read_to_string(&path).expect("read scripts/run.sh");
    let commands: Vec<&str> = script
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    for line in &commands {
        assert!(
            !line.contains("target/release/") && !line.contains("target/debug/"),
            "scripts/run.sh runs a binary from a fixed target folder: {line}"
        );
    }
    for (name, package) in [("player", "pellet-player"), ("bake", "pellet-bake")] {
        let definition = format!(
            "{name}() {{ cargo run --release --locked --quiet -p {package} --bin {name} -- \"$@\"; }}"
        );
        assert!(
            commands.contains(&definition.as_str()),
            "scripts/run.sh should define {definition}"
        );
    }
    // Both are used, and the script still bakes the bunny and plays the scene.
    assert!(
        commands
            .iter()
            .any(|l| l.starts_with("bake mesh assets/meshes/bunny.glb"))
    );
    assert!(
        commands
            .iter()
            .any(|l| l.starts_with("player run \"$scene\" --headless"))
    );
    let status = std::process::Command::new("bash")
        .arg("-n")
        .arg(&path)
        .status()
        .expect("bash -n");
    assert!(status.success(), "scripts/run.sh has a syntax error");
}
