#!/usr/bin/env bash
# The ranked engine under real MPI: installs Open MPI and libclang when
# missing (scripts/mpi-setup.sh), builds the player with `--features mpi`,
# then checks that ballpit (4096 free beads) and pile (256 rigid bodies),
# saved after the same steps on 2, 3 and 4 ranks, are byte for byte the
# one-rank state, and that a rank killed midway ends the job with a message
# naming it, not a hang (the in-process ranks' twin of that check is in
# player/tests/sim_ranks.rs).
# Usage: bash scripts/mpi-check.sh [STEPS]   (CI runs it after the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-400}
bash scripts/mpi-setup.sh
cargo build --locked -q -p pellet-player --features mpi
player=$PWD/target/debug/player
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
for scene in ballpit pile; do
  s=assets/scenes/$scene.toml
  "$player" run "$s" --headless --backend cpu --steps "$steps" --save "$out/$scene-1.pellet" >/dev/null
  for n in 2 3 4; do
    timeout 600 mpirun --oversubscribe -np $n "$player" run "$s" --headless --steps "$steps" \
      --save "$out/$scene-$n.pellet" --stats "$out/$scene-$n.jsonl" >/dev/null
    if cmp -s "$out/$scene-1.pellet" "$out/$scene-$n.pellet"; then
      echo "ok: $scene, $steps steps: $n ranks save the one-rank state byte for byte"
    else
      echo "FAILED: $scene on $n ranks differs from one rank"; fail=1
    fi
  done
done
# A rank killed midway: the others must end with a message naming it, not
# hang (mpirun's own watch; within 60 s, no rank left behind).
s=assets/scenes/ballpit.toml
timeout 120 mpirun --oversubscribe -np 3 "$player" run "$s" --headless --steps 10000000 \
  >/dev/null 2>"$out/kill.err" &
job=$!
victim=""
for _ in $(seq 1 200); do
  for pid in $(pgrep -f "$player run $s" || true); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1; then
      victim=$pid
    fi
  done
  [ -n "$victim" ] && break
  sleep 0.1
done
sleep 3 # stepping by now
t0=$(date +%s%N)
[ -n "$victim" ] && kill -9 "$victim"
rc=0
wait "$job" || rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
left=$(pgrep -f "$player run $s" || true)
if [ -n "$victim" ] && [ "$rc" != 124 ] && [ "$ms" -lt 60000 ] && [ -z "$left" ] \
    && grep -q "rank 1" "$out/kill.err"; then
  echo "ok: rank 1 of 3 killed midway: the job ended in $ms ms, naming it: $(grep -m1 "rank 1" "$out/kill.err" | sed 's/^ *//')"
else
  echo "FAILED: rank 1 killed midway: exit $rc after $ms ms, left running: ${left:-none}"; fail=1
  kill -9 $left 2>/dev/null || true
fi
[ $fail = 0 ] && echo "mpi check: 7 passed, 0 failed" || { echo "mpi check failed"; exit 1; }
