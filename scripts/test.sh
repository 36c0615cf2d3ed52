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
cargo test --workspace --locked
