#!/usr/bin/env bash
# The browser player's tests: its wasm-side units in wasm32, then in headless
# Chromium: builds the site for the
# ball pit (scripts/web.sh), computes the native GPU path's positions after
# STEPS steps, then checks in the browser that the site loads and simulates,
# that a screenshot shows particles, that a tampered object is refused in the
# status line, and that the browser's positions match the native ones to
# rounding. Run by scripts/test.sh; alone: bash scripts/test-web.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export NODEVICE_SELECT=1
steps=100
target=$(cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
site="$target/web-site"
BAKE_PROFILE=dev bash scripts/web.sh assets/scenes/ballpit.toml "$site"
# A second folder beside it, with rigid bodies baked from a mesh, for ?scene=.
rm -rf "$site/pile"
cargo run --locked -q -p pellet-bake --bin bake -- scene assets/scenes/pile.toml -o "$site/pile"
cargo run --locked -q -p pellet-web --example native_positions -- "$site/scene" "$steps" \
  > "$target/web-native-positions.json"
# The wasm-side units in wasm32 (wasm-bindgen-test-runner, in Node.js).
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test --locked -p pellet-web --target wasm32-unknown-unknown --test wasm
(cd web/tests && npm ci --no-audit --no-fund --silent)
node web/tests/browser.mjs "$site" "$target/web-native-positions.json" "$steps" "$target/web-screenshot.png"
