#!/usr/bin/env bash
# Fetches the lavapipe software Vulkan driver of Debian 12's backports (Mesa
# 25.0, the version Debian 13 ships) into target/lavapipe-backports/, without
# installing anything, and prints the two variables that make the Vulkan
# loader use it instead of the system's Mesa 22.3:
#
#   eval "$(bash scripts/lavapipe-backports.sh)"
#   target/release/player run scene.toml --headless --backend gpu --steps 1000
#
# Used to compare the GPU path on both drivers (docs/simulation.md,
# "Performance"); needs curl, xz and dpkg-deb, and network access to
# deb.debian.org. Nothing outside target/ changes.
set -euo pipefail
cd "$(dirname "$0")/.."
dest="$PWD/target/lavapipe-backports"
lib="$dest/root/usr/lib/x86_64-linux-gnu"
mirror="http://deb.debian.org/debian"
if [ ! -f "$dest/complete" ]; then
  rm -rf "$dest"
  mkdir -p "$dest/debs"
  index="$dest/Packages"
  curl -fsSL "$mirror/dists/bookworm-backports/main/binary-amd64/Packages.xz" | xz -dc >"$index" \
    || { echo "lavapipe-backports: could not fetch the bookworm-backports index" >&2; exit 1; }
  # mesa-vulkan-drivers needs a newer libdrm than Debian 12's; the rest it
  # needs (LLVM 15, the X and Wayland client libraries) Debian 12 has.
  for pkg in mesa-vulkan-drivers libdrm2 libdrm-amdgpu1; do
    file=$(awk -v p="$pkg" '$0 == "Package: " p {on = 1} on && /^Filename:/ {print $2; exit}' "$index")
    [ -n "$file" ] || { echo "lavapipe-backports: no $pkg in bookworm-backports" >&2; exit 1; }
    curl -fsSL -o "$dest/debs/${file##*/}" "$mirror/$file"
    dpkg-deb -x "$dest/debs/${file##*/}" "$dest/root"
  done
  rm -rf "$dest/debs" "$index"
  # The package's manifest names the library without a folder; point it at ours.
  sed "s|\"library_path\": *\"[^\"]*\"|\"library_path\": \"$lib/libvulkan_lvp.so\"|" \
    "$dest/root/usr/share/vulkan/icd.d/lvp_icd.json" >"$dest/lvp_icd.json"
  touch "$dest/complete"
fi
echo "export VK_ICD_FILENAMES=$dest/lvp_icd.json"
echo "export LD_LIBRARY_PATH=$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
