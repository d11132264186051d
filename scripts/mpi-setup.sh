#!/usr/bin/env bash
# Installs what the player's `mpi` feature needs when it is missing: Open
# MPI (headers, libraries, mpirun) and libclang (the `mpi` crate generates
# its bindings with bindgen). Safe to run repeatedly.
set -euo pipefail
need=()
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
[ -e /usr/include/x86_64-linux-gnu/openmpi/mpi.h ] || ls /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h >/dev/null 2>&1 || need+=(libopenmpi-dev)
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || need+=(libclang-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "mpi-setup: installing ${need[*]}" >&2
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
