#!/usr/bin/env bash
# The paper's largest neighbour search on a real GPU: 65.6 M uniform points,
# eps 0.6 (about 9 neighbours each), under a small device budget, with blocks
# shared by measured rates, every block on the GPU (the paper's split), and
# CPU threads alone, one after another on the same machine. Prepared for a
# short loan of a GPU machine: it needs only the player binary (built here
# if missing, or given as PLAYER=path; `strip` it before carrying it) and a
# Vulkan driver.
#
#   bash scripts/gpu-nns.sh [POINTS] [BUDGET]
#
# Writes OUT/gpu-nns-POINTS.txt (adapter, each run's summary) and one JSON
# report per run (shares, rates, idle times, blocks, peak memory); OUT
# defaults to bench/out. Each run writes every point's neighbour count, and
# the GPU runs' counts are compared with the CPU run's (the lists themselves
# are checked against brute force in the test suite).
set -euo pipefail
cd "$(dirname "$0")/.."
points=${1:-65600000}
budget=${2:-2GiB}
out=${OUT:-bench/out}
mkdir -p "$out"
player=${PLAYER:-target/release/player}
if [[ ! -x "$player" ]]; then
  cargo build --release --locked -q -p pellet-player
fi
txt="$out/gpu-nns-$points.txt"
{
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  nproc
} >"$txt" 2>&1 || true
common=(nns --generate uniform --particles "$points" --radius 0.6 --device-budget "$budget")
run() {
  local name=$1
  shift
  echo "== $name" | tee -a "$txt"
  /usr/bin/time -v "$player" "${common[@]}" "$@" --report "$out/gpu-nns-$points-$name.json" \
    2> >(grep -E "Maximum resident|Elapsed" >>"$txt") | tee -a "$txt"
}
run cpu --backend cpu --counts "$out/gpu-nns-$points-cpu.counts"
run rates --schedule rates --counts "$out/gpu-nns-$points-rates.counts"
run gpu --schedule gpu --counts "$out/gpu-nns-$points-gpu.counts"
for v in rates gpu; do
  if cmp -s "$out/gpu-nns-$points-cpu.counts" "$out/gpu-nns-$points-$v.counts"; then
    echo "$v: every point's count equals the CPU run's" | tee -a "$txt"
  else
    echo "$v: COUNTS DIFFER from the CPU run's" | tee -a "$txt"
  fi
done
rm -f "$out"/gpu-nns-"$points"-*.counts
echo "wrote $txt"
