#!/usr/bin/env bash
# The test command: sets up a fresh machine, then runs every test in the
# workspace, then the browser player's tests in headless Chromium. GPU tests
# run on whatever adapter is found (lavapipe without a GPU) and fail, never
# skip, when there is none. Arguments go to cargo test (a filter, say), and
# then the browser tests are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Mesa's device-select layer prints a harmless XDG_RUNTIME_DIR complaint on
# headless machines; it is not needed to pick lavapipe.
export NODEVICE_SELECT=1
cargo test --workspace --locked "$@"
# The browser player in headless Chromium (builds the site first).
if [ $# -eq 0 ]; then
  bash scripts/test-web.sh
fi
