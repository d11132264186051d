#!/usr/bin/env bash
# The main command: sets up a fresh machine, builds Pellet in release mode,
# shows the GPU it will use, bakes the Stanford bunny into a particle body
# (with a preview PNG), shows what a scene holds, simulates 2000 steps of it
# headless, then plays it in the viewer window (or renders frames without a display).
# Usage: bash scripts/run.sh [scene.toml]   (default: assets/scenes/ballpit.toml)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export NODEVICE_SELECT=1
scene="${1:-assets/scenes/ballpit.toml}"
out=target/demo
mkdir -p "$out"
cargo build --release --locked -p pellet-player -p pellet-bake
# Cargo finds the binaries it just built, wherever its target folder is
# (CARGO_TARGET_DIR, build.target-dir, --target triples); nothing is rebuilt.
player() { cargo run --release --locked --quiet -p pellet-player --bin player -- "$@"; }
bake() { cargo run --release --locked --quiet -p pellet-bake --bin bake -- "$@"; }
player gpu
echo
bake mesh assets/meshes/bunny.glb -o "$out/bunny.pellet" --resolution 128 --preview "$out/bunny.png"
echo "preview: $out/bunny.png"
echo
player info "$scene"
echo
player run "$scene" --headless --steps 2000 --stats "$out/stats.jsonl" --save "$out/state.pellet"
echo
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    # Play it in the viewer window (close the window to finish).
    player "$scene"
else
    echo "no display: rendering frames instead of opening the viewer"
    player "$scene" --headless --frames 30 --size 960x540 --out "$out/frames"
    echo "frames: $out/frames/frame_00000.png ... frame_00029.png"
fi
