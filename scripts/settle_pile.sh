#!/usr/bin/env bash
# The settled-pile distribution of the neighbour-model validation
# (docs/neighbour-model.md): a loose conical heap of 1 M glass beads settles
# under gravity in Pellet's own simulation (CPU backend), then the model is
# compared with exact counts on the settled positions.
# About 75 minutes on 2 cores (12 000 steps of 1 M beads). Usage:
# bash scripts/settle_pile.sh [OUT_DIR] [STEPS] [extra validate-table arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/settled-pile}
steps=${2:-12000}
bash scripts/setup.sh
export NODEVICE_SELECT=1
cargo build --release --locked -q -p pellet-bake -p pellet-player --bins --examples
cargo run --release --locked -q -p pellet-bake --example loose_pile -- "$out"
# Cargo finds its binaries wherever its target folder is (CARGO_TARGET_DIR).
player() { cargo run --release --locked --quiet -p pellet-player --bin player -- "$@"; }
bake() { cargo run --release --locked --quiet -p pellet-bake --bin bake -- "$@"; }
player run "$out/settle_pile.toml" --headless --backend cpu \
  --steps "$steps" --stats "$out/stats.jsonl" --stats-every 250 --save "$out/settled.pellet"
[ -f "$out/table.pellet" ] || bake table -o "$out/table.pellet" --quiet
# Cells of 9 mm (2.25 bead diameters): about 11 beads per occupied cell, as in
# the generated distributions.
bake validate-table "$out/table.pellet" \
  --points "$out/settled.pellet" --cell-length 0.009 "${@:3}"
