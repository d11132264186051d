#!/usr/bin/env bash
# A/B of CPU-engine builds on the bench's touching pack: the binaries run in
# turn, round after round, and each prints the fastest and the median ms per
# step of its --stats windows (this shared machine's speed drifts from minute
# to minute, so the builds alternate rather than run one after the other).
#
#   bash scripts/sim-ab.sh [--side N] [--steps S] [--rounds R] [--threads T] [--paired] PLAYER...
#
# N: spheres per side (40 = 64 k, 100 = 1 M; default 40); S: steps per run,
# in three --stats windows (default 300); R: rounds (default 5); T:
# RAYON_NUM_THREADS (default 1). Example, before and after a change:
#   cp target/release/player /tmp/player-old   # (built from the old commit)
#   cargo build --release -p pellet-player
#   bash scripts/sim-ab.sh --side 100 --steps 60 /tmp/player-old target/release/player
# --paired (exactly two players, one thread each): the two run at the same
# time, pinned to cores 0 and 1 with taskset and swapped every round, so both
# see the same host load; it also prints the median of the per-round ratios
# of their fastest windows (second / first, below 1 means the second is faster).
set -euo pipefail
side=40 steps=300 rounds=5 threads=1 paired=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --side) side=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --paired) paired=1; shift ;;
    -h|--help) sed -n 2,18p "$0"; exit 0 ;;
    *) break ;;
  esac
done
[[ $# -ge 1 ]] || { echo "sim-ab: name at least one player binary (--help)" >&2; exit 2; }
if [[ $paired == 1 ]]; then
  [[ $# -eq 2 ]] || { echo "sim-ab: --paired compares exactly two player binaries" >&2; exit 2; }
  command -v taskset >/dev/null || { echo "sim-ab: --paired needs taskset (util-linux)" >&2; exit 2; }
  threads=1
fi
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
l=$(awk "BEGIN{print $side * 0.02}")
# The pack of bench/src/cases/sim.rs (`scene_toml`).
cat > "$dir/pack.toml" <<TOML
name = "pack$side"
[simulation]
particle_radius = 0.01
gravity = [0, -9.81, 0]
time_step = 1e-5
[domain]
min = [0, 0, 0]
max = [$l, $l, $l]
[materials.default]
density = 2500
stiffness = 10000
restitution = 0.5
friction = 0.5
[[particles]]
region = { min = [0, 0, 0], max = [$l, $l, $l] }
spacing = 0.02
TOML
every=$(( steps / 3 > 0 ? steps / 3 : 1 ))
# One run of player $1 on its stats file $2 (pinned to core $3 when given);
# the first window holds the run's first (unfused) Verlet pass: left out.
one_run() {
  local pin=()
  [[ -n ${3:-} ]] && pin=(taskset -c "$3")
  RAYON_NUM_THREADS=$threads "${pin[@]}" "$1" run "$dir/pack.toml" --headless --backend cpu \
    --steps "$steps" --stats-every "$every" --stats "$2" >/dev/null
  grep -o '"ms_per_step":[0-9.]*' "$2" | tail -n +2 | cut -d: -f2 | sort -n
}
for r in $(seq "$rounds"); do
  if [[ $paired == 1 ]]; then
    # Round r puts the first player on core (r+1)%2, the second on r%2.
    a=$(( (r + 1) % 2 )) b=$(( r % 2 ))
    one_run "$1" "$dir/s0.jsonl" "$a" > "$dir/r0" &
    one_run "$2" "$dir/s1.jsonl" "$b" > "$dir/r1" &
    wait
    cat "$dir/r0" >> "$dir/t0"; cat "$dir/r1" >> "$dir/t1"
    paste <(head -1 "$dir/r0") <(head -1 "$dir/r1") | awk '{print $2 / $1}' >> "$dir/ratios"
  else
    k=0
    for p in "$@"; do
      one_run "$p" "$dir/s.jsonl" >> "$dir/t$k"
      k=$((k + 1))
    done
  fi
  echo "sim-ab: round $r of $rounds done" >&2
done
k=0
for p in "$@"; do
  sort -n "$dir/t$k" | awk -v p="$p" '{a[NR]=$1} END{printf "%-40s fastest %.3f ms/step, median %.3f (%d windows)\n", p, a[1], a[int((NR+1)/2)], NR}'
  k=$((k + 1))
done
if [[ $paired == 1 ]]; then
  sort -n "$dir/ratios" | awk '{a[NR]=$1} END{printf "paired ratio (second/first fastest per round): median %.3f, range %.3f-%.3f (%d rounds)\n", a[int((NR+1)/2)], a[1], a[NR], NR}'
fi
