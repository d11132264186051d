#!/usr/bin/env bash
# Times the GPU pair-list step on a dense touching pack of SIDE^3 spheres
# (default 252^3 = 16.0 M, issue 18's "16 M particles per step, goal under
# 10 ms"), on whatever GPU the machine has. Prepared for a short loan of a
# GPU machine: it needs only the player binary (built here if missing, or
# given as PLAYER=path, e.g. carried from another machine) and a Vulkan
# driver. (Carrying a binary: `strip` it first; the release build is ~140 MB with
# symbols, ~20 MB without.)
#
#   bash scripts/gpu-pack.sh [SIDE] [STEPS]
#
# Writes OUT/gpu-pack-SIDE.txt (adapter, run summary, ms per step of each
# stats window) and OUT/gpu-pack-SIDE.jsonl (the stats lines); OUT defaults
# to bench/out. The first window includes the first build and warm-up; the
# figure to quote is the median of the later windows, printed last.
set -euo pipefail
cd "$(dirname "$0")/.."
side=${1:-252}
steps=${2:-300}
out=${OUT:-bench/out}
mkdir -p "$out"
player=${PLAYER:-target/release/player}
if [[ ! -x "$player" ]]; then
  cargo build --release --locked -q -p pellet-player
fi
edge=$(python3 -c "print($side * 0.02)")
scene="$out/pack$side.toml"
cat > "$scene" <<TOML
name = "pack$side"
[simulation]
particle_radius = 0.01
gravity = [0, -9.81, 0]
time_step = 1e-5
[domain]
min = [0, 0, 0]
max = [$edge, $edge, $edge]
[materials.default]
density = 2500
stiffness = 10000
restitution = 0.5
friction = 0.5
[[particles]]
region = { min = [0, 0, 0], max = [$edge, $edge, $edge] }
spacing = 0.02
TOML
report="$out/gpu-pack-$side.txt"
stats="$out/gpu-pack-$side.jsonl"
export NODEVICE_SELECT=1
{
  "$player" gpu
  "$player" run "$scene" --headless --steps "$steps" --stats "$stats" --stats-every 50
} 2>&1 | tee "$report"
python3 - "$stats" "$side" <<'PY' | tee -a "$report"
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ms = [l["ms_per_step"] for l in lines]
later = ms[1:] or ms
n = int(sys.argv[2]) ** 3
med = statistics.median(later)
print(f"windows (ms/step): {', '.join(f'{m:.3f}' for m in ms)}")
print(f"{n} spheres: median {med:.3f} ms/step after the first window, "
      f"{n / med / 1e3:.1f} M particle-steps/s, {lines[-1]['rebuilds']} builds")
PY
