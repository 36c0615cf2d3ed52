#!/usr/bin/env bash
# The test command (README, .ci/run): installs what the tests need, then runs every test.
# Safe to run again: installs are skipped when already present.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -x scripts/install-peers.sh ]; then
  scripts/install-peers.sh
  export SWITCHBOARD_PEERS=1 # the real peers are installed: their tests run (and must pass)
fi

export CI="${CI:-}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked 2>&1 | tee "$log" || status=$?
# One closing line for the whole run (cargo prints one `test result` per test target, and the
# last of them is usually a crate without doc tests).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed;?$/) p += $(i-1); if ($(i) ~ /^failed;?$/) f += $(i-1) } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
