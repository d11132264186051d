#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build and run Pellet:
# the Vulkan loader and Mesa's lavapipe software Vulkan driver (used when
# there is no GPU), Xvfb for window tests, nginx for the HTTP tests, and
# Chromium with Node.js for the browser player's tests. Safe
# to run repeatedly; does nothing when everything is present.
set -euo pipefail

need=()
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || [ -e /usr/share/vulkan/icd.d/lvp_icd.json ] || need+=(mesa-vulkan-drivers)
ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1' || need+=(libvulkan1)
command -v Xvfb >/dev/null 2>&1 || need+=(xvfb)
# nginx serves baked folders with ETags in the HTTP tests (run unprivileged by the tests).
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1 || need+=(nginx-light)
# Headless Chromium runs the browser player's tests (WebGPU on SwiftShader),
# driven by Node.js.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v node >/dev/null 2>&1 || need+=(nodejs npm)

if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust with rustup (https://rustup.rs), then run this again" >&2
  exit 1
fi
