#!/usr/bin/env bash
# Runs every benchmark with its peers side by side and rewrites
# docs/BENCHMARKS.md and docs/benchmarks.json. Installs the peers it can.
# Usage: bash scripts/bench.sh [--quick] [--filter NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export NODEVICE_SELECT=1
python3 -c "import trimesh, scipy" 2>/dev/null || pip install -q trimesh scipy numpy
# LIGGGHTS, the peer of the particle-simulation rows (Debian's package).
if ! command -v liggghts >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends liggghts >/dev/null \
    || echo "bench: could not install liggghts; its rows will say so" >&2
fi
# Mesa 25's lavapipe beside the system's, for the pack rows' second GPU-path
# row (unpacked into target/, nothing installed; skipped when it cannot be
# fetched).
if bash scripts/lavapipe-backports.sh >/dev/null; then
  export PELLET_BENCH_ALT_ICD="$PWD/target/lavapipe-backports/lvp_icd.json"
  export PELLET_BENCH_ALT_LIB="$PWD/target/lavapipe-backports/root/usr/lib/x86_64-linux-gnu"
else
  echo "bench: no second lavapipe; the pack rows run the system's alone" >&2
fi
# The player built with MPI, for the "particle simulation across ranks" rows
# (Open MPI and libclang installed when missing; a copy, so later builds
# without the feature leave it alone).
if bash scripts/mpi-setup.sh && cargo build --release --locked -q -p pellet-player --features mpi; then
  cp target/release/player target/release/player-mpi
  export PELLET_BENCH_MPI_PLAYER="$PWD/target/release/player-mpi"
else
  echo "bench: no MPI build; the rank rows are skipped" >&2
fi
# The browser player's site and its driver (the "browser player" rows).
if [ -z "${PELLET_BENCH_NO_WEB:-}" ]; then
  bash scripts/web.sh assets/scenes/ballpit.toml target/web-site >/dev/null
  (cd web/tests && npm ci --no-audit --no-fund --silent)
fi
cargo run --release --locked -p pellet-bench -- "$@"
