#!/usr/bin/env bash
# Runs every benchmark with its peers side by side and rewrites
# docs/BENCHMARKS.md and docs/benchmarks.json. Installs the peers it can.
# Usage: bash scripts/bench.sh [--quick] [--filter NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export NODEVICE_SELECT=1
python3 -c "import trimesh, scipy" 2>/dev/null || pip install -q trimesh scipy numpy
cargo run --release --locked -p pellet-bench -- "$@"
