#!/usr/bin/env bash
# Builds the browser player and writes a self-contained static site:
#   bash scripts/web.sh SCENE OUT
# SCENE is a scene TOML (baked here into OUT/scene) or a baked folder (copied).
# OUT gets index.html, the wasm and its JavaScript glue, and scene/. Any static
# server serves it:  python3 -m http.server --directory OUT
# and ?scene=URL plays another served baked folder (same origin or CORS).
set -euo pipefail
cd "$(dirname "$0")/.."
scene="${1:?usage: bash scripts/web.sh SCENE.toml|BAKED_DIR OUT}"
out="${2:?usage: bash scripts/web.sh SCENE.toml|BAKED_DIR OUT}"
bash scripts/setup.sh
rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown \
  || rustup target add wasm32-unknown-unknown
# wasm-bindgen's CLI must match the library version the lock file pins.
want=$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
if ! wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $want"; then
  echo "web: installing wasm-bindgen-cli $want" >&2
  cargo install -q wasm-bindgen-cli --version "$want"
fi
cargo build --locked -q -p pellet-web --target wasm32-unknown-unknown --profile web
target=$(cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
mkdir -p "$out"
wasm-bindgen --target web --no-typescript --out-dir "$out" --out-name pellet_web \
  "$target/wasm32-unknown-unknown/web/pellet_web.wasm"
cp web/index.html "$out/index.html"
rm -rf "$out/scene"
if [ -f "$scene/manifest.pellet" ]; then
  mkdir -p "$out/scene" && cp -r "$scene/." "$out/scene/"
else
  # BAKE_PROFILE=dev reuses a test build (scripts/test-web.sh); release by default.
  cargo run --locked -q --profile "${BAKE_PROFILE:-release}" -p pellet-bake --bin bake -- \
    scene "$scene" -o "$out/scene"
fi
echo "site: $out ($(du -sh "$out" | cut -f1)); serve it with: python3 -m http.server --directory $out"
