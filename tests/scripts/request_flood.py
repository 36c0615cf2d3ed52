#!/usr/bin/env python3
"""A stdio MCP server that floods its client with requests (`ping`) and never reads its
stdin again: every answer the client owes it piles up in the pipe and then in the client's
write queue. It answers `initialize` and `tools/list` first, so it connects. Writes its pid
to the file named by its first argument. Stops when its stdout closes."""
import json
import os
import sys

with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if "id" not in msg or method is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "request-flood", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "tools": [{"name": "noop", "inputSchema": {"type": "object"}}]}})
        break
    else:
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})

# From here on, stdin is never read.
n = 0
try:
    while True:
        n += 1
        send({"jsonrpc": "2.0", "id": f"flood-{n}", "method": "ping"})
except (BrokenPipeError, OSError):
    pass
os._exit(0)
