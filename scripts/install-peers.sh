#!/usr/bin/env bash
# Installs the real MCP peers the tests talk to (called by scripts/test.sh before the tests):
#   - tests/peers/node_modules: the official TypeScript SDK (v1, and v2's server package, which
#     speaks MCP 2026-07-28) and reference servers, the
#     official conformance suite and the Node 22 it needs (the `node` package, whose install
#     script fetches a Node 22 binary into node_modules/node/bin), exact versions from
#     tests/peers/package-lock.json (npm ci);
#   - tests/peers/.venv: the Python SDK (`mcp`), pinned in tests/peers/requirements.txt.
# Needs only Node >= 20 with npm and Python >= 3.10 with pip. Idempotent: each part is skipped
# when its stamp matches the lock file it was installed from, so a second run takes well under
# a second.
set -euo pipefail
cd "$(dirname "$0")/../tests/peers"

log() { echo "install-peers: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# A content hash of the files an install came from; stored in a stamp file after success.
fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }

# --- Node: npm ci from the committed lock file ------------------------------------------
command -v node >/dev/null || die "node not found (need Node >= 20 and npm)"
command -v npm >/dev/null || die "npm not found (need Node >= 20 and npm)"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || die "Node $(node --version) is too old (need >= 20)"

npm_stamp="node_modules/.switchboard-stamp"
npm_want="$(fingerprint package.json package-lock.json)-node$node_major"
if [ -f "$npm_stamp" ] && [ "$(cat "$npm_stamp")" = "$npm_want" ]; then
  log "node peers up to date"
else
  log "installing node peers (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$npm_want" >"$npm_stamp"
fi
# The conformance suite runs on this Node, not the system one. npm can be told to skip
# install scripts (package.json allows the `node` package's), which would leave no binary.
node22="node_modules/node/bin/node"
node22_version="$("$node22" --version 2>/dev/null)" ||
  die "$node22 does not run (were npm install scripts disabled?): rm -rf node_modules and retry"
case "$node22_version" in
  v22.*) ;;
  *) die "$node22 is $node22_version, expected v22 (tests/peers/package.json pins it)" ;;
esac

# --- Python: a venv with the pinned SDK --------------------------------------------------
python="${PYTHON:-python3}"
command -v "$python" >/dev/null || die "$python not found (need Python >= 3.10 with pip)"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  die "$("$python" --version) is too old (need >= 3.10; mcp requires it)"

venv=".venv"
py_stamp="$venv/.switchboard-stamp"
py_want="$(fingerprint requirements.txt)-$("$python" -c 'import sys; print(sys.version.split()[0])')"
if [ -f "$py_stamp" ] && [ "$(cat "$py_stamp")" = "$py_want" ] &&
  "$venv/bin/python" -c 'import mcp' 2>/dev/null; then
  log "python peers up to date"
else
  rm -rf "$venv"
  # PEERS_PY_MODE forces one way (venv | nopip | target), to test the fallbacks.
  mode="${PEERS_PY_MODE:-}"
  if [ -z "$mode" ] || [ "$mode" = venv ]; then
    # The usual way; fails on Debian without python3-venv (no ensurepip).
    if "$python" -m venv "$venv" >/dev/null 2>&1 && [ -x "$venv/bin/pip" ]; then
      mode=venv
    else
      rm -rf "$venv"
      [ -z "$mode" ] || die "python3 -m venv failed"
    fi
  fi
  if [ -z "$mode" ] || [ "$mode" = nopip ]; then
    # A venv without pip, filled by the system pip (pip >= 22.3 has --python).
    if "$python" -m venv --without-pip "$venv" >/dev/null 2>&1 &&
      "$python" -m pip --version >/dev/null 2>&1; then
      mode=nopip
    else
      rm -rf "$venv"
      [ -z "$mode" ] || die "python3 -m venv --without-pip failed"
    fi
  fi
  [ -n "$mode" ] || mode=target
  log "installing python peers (mode: $mode)"
  case "$mode" in
    venv)
      "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.txt
      ;;
    nopip)
      "$python" -m pip --python "$venv/bin/python" install --quiet \
        --disable-pip-version-check -r requirements.txt
      ;;
    target)
      # No venv module at all: install into a folder and give it a python launcher, so
      # everything else can keep running tests/peers/.venv/bin/python.
      mkdir -p "$venv/bin"
      "$python" -m pip install --quiet --disable-pip-version-check \
        --target "$venv/site-packages" -r requirements.txt
      cat >"$venv/bin/python" <<EOF
#!/bin/sh
here="\$(cd "\$(dirname "\$0")/.." && pwd)"
PYTHONPATH="\$here/site-packages\${PYTHONPATH:+:\$PYTHONPATH}" exec "$(command -v "$python")" "\$@"
EOF
      chmod +x "$venv/bin/python"
      ;;
    *) die "unknown PEERS_PY_MODE=$mode" ;;
  esac
  "$venv/bin/python" -c 'import mcp' || die "mcp did not install into $venv"
  echo "$py_want" >"$py_stamp"
fi

log "ok: node $(node --version) (conformance suite: $node22_version), $("$venv/bin/python" --version), mcp $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
