#!/usr/bin/env bash
# Peer for the particle-simulation benchmarks: runs a deck and prints one
# JSON line built from LIGGGHTS' own timing ("Loop time"):
#   {"particles":A,"steps":S,"seconds":X,"procs":P,"particle_steps_per_s":..,"version":".."}
#
# usage: liggghts_run.sh N STEPS      simple-cubic pack (liggghts_pack.in), N^3 spheres;
#                                     WARM env: untimed warm-up steps (default 100);
#                                     times the last run only
#        DECK=column liggghts_run.sh DATA STEPS
#                                     small column (liggghts_column.in) read from the
#                                     LIGGGHTS data file DATA (an absolute path); WARM
#                                     env: steps behind the gate (default 10000), then
#                                     STEPS after it opens; times both runs
# env:   LIGGGHTS_PROCS=P  run on P MPI ranks with mpirun (default 1, no mpirun)
# exit:  3 when LIGGGHTS is not installed, 2 on bad arguments, 1 when the run fails.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 N STEPS" >&2
    exit 2
fi
procs=${LIGGGHTS_PROCS:-1}
case ${DECK:-pack} in
    pack)
        deck=liggghts_pack.in loops=last
        vars=(-var n "$1" -var steps "$2" -var warm "${WARM:-100}") ;;
    column)
        deck=liggghts_column.in loops=all
        vars=(-var data "$1" -var settle "${WARM:-10000}" -var collapse "$2") ;;
    *)
        echo "unknown DECK=${DECK} (pack or column)" >&2
        exit 2 ;;
esac

bin=$(command -v liggghts || command -v lmp_auto || true)
if [ -z "$bin" ]; then
    echo "LIGGGHTS is not installed (no liggghts or lmp_auto on PATH); try: apt-get install liggghts" >&2
    exit 3
fi

deck="$(cd "$(dirname "$0")" && pwd)/$deck"
work=$(mktemp -d)              # LIGGGHTS writes nothing into the repository
trap 'rm -rf "$work"' EXIT

launch=("$bin")
if [ "$procs" -gt 1 ]; then
    if command -v mpirun >/dev/null; then
        launch=(mpirun -np "$procs")
        [ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
        launch+=("$bin")
    else
        echo "LIGGGHTS_PROCS=$procs but mpirun is not installed; running on 1 rank" >&2
        procs=1
    fi
fi

if ! (cd "$work" && "${launch[@]}" -in "$deck" -log none -echo none \
        "${vars[@]}" >out.txt 2>&1); then
    tail -20 "$work/out.txt" >&2
    exit 1
fi
grep -i warning "$work/out.txt" >&2 || true

# Banner: "LIGGGHTS (Version LIGGGHTS-PUBLIC 3.8.0, compiled ...)"
version=$(sed -n 's/^LIGGGHTS (Version \([^,]*\),.*/\1/p' "$work/out.txt" | head -1)
pkg=$(dpkg-query -W -f='${Version}' liggghts 2>/dev/null || true)
[ -n "$pkg" ] && version="$version (debian $pkg)"

# "Loop time of X on P procs for S steps with A atoms[, finish time ...]":
# the pack times its last run, the column all of them.
loop_lines=$(grep '^Loop time of' "$work/out.txt" || true)
[ "$loops" = last ] && loop_lines=$(tail -1 <<<"$loop_lines")
if [ -z "$loop_lines" ]; then
    echo "no 'Loop time' line in LIGGGHTS output" >&2
    tail -20 "$work/out.txt" >&2
    exit 1
fi
awk -v v="$version" '{
    x += $4; p = $6; s += $9; a = $12; sub(/,$/, "", a)
} END {
    printf "{\"particles\":%d,\"steps\":%d,\"seconds\":%.6g,\"procs\":%d,\"particle_steps_per_s\":%.6g,\"version\":\"%s\"}\n",
        a, s, x, p, a * s / x, v
}' <<<"$loop_lines"
