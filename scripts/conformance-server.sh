#!/usr/bin/env bash
# Referees `switchboard serve` with the official MCP conformance suite's server leg (pinned in
# tests/peers/package.json; install it with scripts/install-peers.sh). For each requirement
# set it runs the suite against two servers: the fixture upstream alone
# (tests/peers/conformance_fixture.mjs) and `switchboard serve --http` in front of it
# (tests/conformance/serve). All runs go in parallel (the suite runs one server's scenarios
# one after the other); this prints one line per scenario and target, and the totals.
#
#   scripts/conformance-server.sh [--requirements R]... [--target T]... [--bin PATH]
#                                 [--output-dir DIR] [--verbose]
#
#   --requirements R  a requirement set, 2025-11-25 or 2026-07-28 (repeatable; default both)
#   --target T        fixture or serve (repeatable; default both)
#   --bin PATH        the switchboard binary [default: $SWITCHBOARD_BIN, else
#                     target/release/switchboard, else target/debug/switchboard]
#   --output-dir DIR  keep the suite's per-scenario results and the logs under
#                     DIR/<target>-<requirements>/ instead of a temp dir
#   --verbose         print the suite's own output too
#
# It builds nothing. One line per scenario, whitespace-separated, so tests can read it:
#   <requirements> <target> <pass|warn|fail> <scenario> <checks passed, failed, warnings> [not scored: why]
# Exit status: 0 when every run finished (whatever the verdicts), 2 when a server did not
# start or the suite printed no summary.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

die() { echo "conformance-server: ERROR: $*" >&2; exit 2; }

sets=()
targets=()
bin="${SWITCHBOARD_BIN:-}"
out=""
verbose=0
while [ $# -gt 0 ]; do
  case "$1" in
    --requirements) [ $# -ge 2 ] || die "--requirements needs a value"; sets+=("$2"); shift 2 ;;
    --target) [ $# -ge 2 ] || die "--target needs a value"
      case "$2" in fixture | serve) targets+=("$2") ;; *) die "unknown target: $2" ;; esac; shift 2 ;;
    --bin) [ $# -ge 2 ] || die "--bin needs a value"; bin="$2"; shift 2 ;;
    --output-dir) [ $# -ge 2 ] || die "--output-dir needs a value"; out="$2"; shift 2 ;;
    --verbose) verbose=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
[ ${#sets[@]} -gt 0 ] || sets=(2025-11-25 2026-07-28)
[ ${#targets[@]} -gt 0 ] || targets=(fixture serve)

if [ -z "$bin" ]; then
  for profile in release debug; do
    if [ -x "$root/target/$profile/switchboard" ]; then bin="$root/target/$profile/switchboard"; break; fi
  done
fi
[ -n "$bin" ] && [ -x "$bin" ] ||
  die "no switchboard binary${bin:+ at $bin}: pass --bin, set SWITCHBOARD_BIN or run cargo build -p switchboard-cli"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
export SWITCHBOARD_BIN="$bin"

peers="$root/tests/peers/node_modules"
node="$peers/node/bin/node"
suite="$peers/@modelcontextprotocol/conformance/dist/index.js"
[ -x "$node" ] && [ -f "$suite" ] || die "the conformance suite is not installed: run scripts/install-peers.sh"

if [ -z "$out" ]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-conformance-server.XXXXXX")"
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# N free loopback ports, one per line: the kernel's picks, all held open at once (so no two
# runs get the same one) and released again before the servers bind them.
free_ports() {
  "$node" -e "
    const net = require('net');
    const n = Number(process.argv[1]);
    const all = Array.from({ length: n }, () => net.createServer());
    let up = 0;
    for (const s of all) s.listen(0, '127.0.0.1', () => {
      if (++up < n) return;
      console.log(all.map((x) => x.address().port).join('\\n'));
      for (const x of all) x.close();
    });" "$1"
}

# Whether something accepts connections on 127.0.0.1:$1.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# One run: start the target's server, wait for it to listen, run the suite's server leg
# against it, stop the server. Writes $dir/suite.log; a server that never listened leaves
# $dir/failed.
run_one() {
  local set="$1" target="$2" dir="$3" port="$4" pid waited=0
  local mode=()
  [ "$target" = serve ] || mode=(--fixture-only)
  "$root/tests/conformance/serve" "$port" "${mode[@]}" >"$dir/server.log" 2>&1 &
  pid=$!
  until listening "$port"; do
    if ! kill -0 "$pid" 2>/dev/null || [ "$waited" -ge 600 ]; then
      echo "the $target server did not listen on port $port" >"$dir/failed"
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      return
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  # The suite exits non-zero whenever a scenario fails; the summary says which.
  (cd "$dir" && "$node" "$suite" server --url "http://127.0.0.1:$port/mcp" --requirements "$set" \
    --output-dir "$dir/results" >"$dir/suite.log" 2>&1) || true
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

start=$SECONDS
mapfile -t ports < <(free_ports $((${#sets[@]} * ${#targets[@]})))
runs=()
for set in "${sets[@]}"; do
  for target in "${targets[@]}"; do
    dir="$out/$target-$set"
    rm -rf "$dir"
    mkdir -p "$dir"
    run_one "$set" "$target" "$dir" "${ports[${#runs[@]}]}" &
    runs+=($!)
  done
done
for pid in "${runs[@]}"; do wait "$pid"; done

status=0
for set in "${sets[@]}"; do
  for target in "${targets[@]}"; do
    dir="$out/$target-$set"
    log="$dir/suite.log"
    if [ -f "$dir/failed" ]; then
      cat "$dir/failed" "$dir/server.log" >&2
      status=2
      continue
    fi
    [ "$verbose" = 0 ] || cat "$log"
    if ! grep -q '^=== SUMMARY ===' "$log"; then
      tail -20 "$log" >&2
      echo "conformance-server: ERROR: the suite printed no summary for $target $set (log above)" >&2
      status=2
      continue
    fi
    # The summary: `✓ name: 2 passed, 0 failed[, 1 warnings]` per scenario, then the
    # scenarios run but not scored (`  ✗ name (reason)`).
    verdicts="$(awk -v set="$set" -v target="$target" '
      /^=== SUMMARY ===/ { summary = 1; next }
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
          printf "%-10s  %-7s  %-4s  %-45s  %s%s\n", set, target, v[name], name, checks[name],
            (name in ns) ? "  [not scored: " ns[name] "]" : ""
          group = (name in ns) ? "unscored" : "scored"
          total[group]++; if (v[name] == "pass") pass[group]++
        }
        printf "%-10s  %-7s  total: %d/%d scored scenarios pass; not scored: %d/%d pass\n",
          set, target, pass["scored"], total["scored"], pass["unscored"], total["unscored"]
      }' "$log")"
    echo "$verdicts"
    # A scored scenario that did not pass: what the server said, so the cause can be read.
    if ! echo "$verdicts" | grep -q ' total: \([0-9]*\)/\1 scored'; then
      echo "--- $target $set: the server's output" >&2
      tail -40 "$dir/server.log" >&2
    fi
  done
done
echo "conformance-server: ${#sets[@]} requirement set(s), ${#targets[@]} target(s) in $((SECONDS - start)) s (binary: $bin)"
exit $status
