#!/usr/bin/env bash
# Referees the `switchboard` client with the official MCP conformance suite (pinned in
# tests/peers/package.json; install it with scripts/install-peers.sh). For each requirement
# set the suite starts one test server per scenario, all in parallel, and runs
# tests/conformance/client against each. This prints one line per scenario and the totals.
#
#   scripts/conformance.sh [--requirements R]... [--bin PATH] [--output-dir DIR] [--verbose]
#
#   --requirements R  a requirement set: 2025-11-25, 2026-07-28, or backcompat (the suite's
#                     2025-03-26 back-compatibility scenarios, which no requirement set
#                     includes) (repeatable; default all three)
#   --bin PATH        the switchboard binary [default: $SWITCHBOARD_BIN, else
#                     target/release/switchboard, else target/debug/switchboard]
#   --output-dir DIR  keep the suite's per-scenario results (checks.json, the client's
#                     stdout and stderr) under DIR/<requirements>/ instead of a temp dir
#   --verbose         print the suite's own output too
#
# It builds nothing. One line per scenario, whitespace-separated, so tests can read it:
#   <requirements> <pass|warn|fail> <scenario> <checks passed, failed, warnings> [not scored: why]
# `warn` is a scenario with no failed check but a warning (the suite does not count it as a
# pass). Exit status: 0 when every set ran (whatever the verdicts), 2 when the suite could not
# run or printed no summary.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

die() { echo "conformance: ERROR: $*" >&2; exit 2; }

sets=()
bin="${SWITCHBOARD_BIN:-}"
out=""
verbose=0
while [ $# -gt 0 ]; do
  case "$1" in
    --requirements) [ $# -ge 2 ] || die "--requirements needs a value"; sets+=("$2"); shift 2 ;;
    --bin) [ $# -ge 2 ] || die "--bin needs a value"; bin="$2"; shift 2 ;;
    --output-dir) [ $# -ge 2 ] || die "--output-dir needs a value"; out="$2"; shift 2 ;;
    --verbose) verbose=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
[ ${#sets[@]} -gt 0 ] || sets=(2025-11-25 2026-07-28 backcompat)
for set in "${sets[@]}"; do
  case "$set" in
    backcompat | 20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]) ;;
    *) die "unknown requirement set: $set" ;;
  esac
done

if [ -z "$bin" ]; then
  for profile in release debug; do
    if [ -x "$root/target/$profile/switchboard" ]; then bin="$root/target/$profile/switchboard"; break; fi
  done
fi
[ -n "$bin" ] && [ -x "$bin" ] ||
  die "no switchboard binary${bin:+ at $bin}: pass --bin, set SWITCHBOARD_BIN or run cargo build -p switchboard"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"

peers="$root/tests/peers/node_modules"
node="$peers/node/bin/node"
suite="$peers/@modelcontextprotocol/conformance/dist/index.js"
[ -x "$node" ] && [ -f "$suite" ] || die "the conformance suite is not installed: run scripts/install-peers.sh"

if [ -z "$out" ]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-conformance.XXXXXX")"
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# The suite splits --command on spaces and runs it with `sh -c`; `exec` makes the driver that
# shell's process, so the suite's timeout signal reaches it (and through it `switchboard`).
client="$root/tests/conformance/client"
case "$client$bin" in *" "*) die "the suite cannot run a command whose path has a space: $client" ;; esac
export SWITCHBOARD_BIN="$bin"

start=$SECONDS
# One set after the other: each already runs all its scenarios in parallel, and running the
# sets at once as well overloads a small machine (scenarios then fail on the suite's timeouts).
for set in "${sets[@]}"; do
  dir="$out/$set"
  rm -rf "$dir"
  mkdir -p "$dir"
  # The suite exits non-zero whenever a scenario fails; the summary says which.
  case "$set" in
    backcompat) select=(--suite backcompat) ;;
    *) select=(--requirements "$set") ;;
  esac
  (
    set_start=$SECONDS
    (cd "$dir" && "$node" "$suite" client --command "exec $client" "${select[@]}" \
      --output-dir "$dir" >"$dir/suite.log" 2>&1) || true
    echo $((SECONDS - set_start)) >"$dir/seconds"
  )
done

for set in "${sets[@]}"; do
  dir="$out/$set"
  log="$dir/suite.log"
  [ "$verbose" = 0 ] || cat "$log"
  grep -q '^=== SUITE SUMMARY ===' "$log" ||
    { tail -20 "$log" >&2; die "the suite printed no summary for $set (log above)"; }

  # The summary: `✓ name: 2 passed, 0 failed[, 1 warnings]` per scenario, then a list of the
  # scenarios run but not scored (`  ✗ name (reason)`).
  awk -v set="$set" -v secs="$(cat "$dir/seconds")" '
    /^=== SUITE SUMMARY ===/ { summary = 1; next }
    summary && /^(✓|✗) [^ ]+: [0-9]+ passed, [0-9]+ failed/ {
      mark = $1; name = $2; sub(/:$/, "", name)
      passed = $3; failed = $5; warnings = ($7 == "" ? 0 : $7)
      verdict = (mark == "✓") ? "pass" : (failed == 0 && warnings > 0 ? "warn" : "fail")
      order[++n] = name; v[name] = verdict
      checks[name] = passed " passed, " failed " failed, " warnings " warnings"
      next
    }
    summary && /^Not scored/ { unscored = 1; next }
    unscored && /^  (✓|✗) [^ ]+ \(.*\)$/ { why = $0; sub(/^[^(]*\(/, "", why); sub(/\)$/, "", why); ns[$2] = why }
    END {
      for (i = 1; i <= n; i++) {
        name = order[i]
        printf "%-10s  %-4s  %-40s  %s%s\n", set, v[name], name, checks[name],
          (name in ns) ? "  [not scored: " ns[name] "]" : ""
        group = (name in ns) ? "unscored" : (name ~ /^auth\// ? "auth" : "core")
        total[group]++; if (v[name] == "pass") pass[group]++; if (v[name] == "warn") warn[group]++
      }
      printf "%-10s  total: %d/%d scored scenarios pass (%d/%d without authorization, %d/%d authorization; %d warn); not scored: %d/%d pass; %d s\n",
        set, pass["core"] + pass["auth"], total["core"] + total["auth"],
        pass["core"], total["core"], pass["auth"], total["auth"], warn["core"] + warn["auth"],
        pass["unscored"], total["unscored"], secs
    }' "$log"
done
echo "conformance: ${#sets[@]} requirement set(s) in $((SECONDS - start)) s (binary: $bin)"
