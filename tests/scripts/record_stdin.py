#!/usr/bin/env python3
"""A stdio MCP server that records what it receives, for the tests of what reaches a server
before its stdin closes. Arguments: the record file, then options.

Every message read is appended to the record as one JSON line: {"method", "id", "cancels"}
(`cancels` is the request id of a `notifications/cancelled`). At EOF on stdin it appends
{"eof": true} and exits 0: so the record says both what arrived and that the server saw its
stdin close (rather than a signal).

Tools: `hold` (never answered: the client gives up on it). With `--pause SECONDS`, the first
`tools/call` makes the server stop reading its stdin for that long, so what the client writes
meanwhile piles up in the pipe and in the client's write queue.
"""
import json
import sys
import time

RECORD = sys.argv[1]
ARGS = sys.argv[2:]
PAUSE = float(ARGS[ARGS.index("--pause") + 1]) if "--pause" in ARGS else 0.0

record = open(RECORD, "a")


def note(obj):
    record.write(json.dumps(obj) + "\n")
    record.flush()


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


paused = False
for line in sys.stdin.buffer:
    try:
        msg = json.loads(line)
    except ValueError:
        note({"garbage": True})
        continue
    method = msg.get("method")
    params = msg.get("params") or {}
    note({"method": method, "id": msg.get("id"),
          "cancels": params.get("requestId") if method == "notifications/cancelled" else None})
    if method == "tools/call" and PAUSE and not paused:
        paused = True
        time.sleep(PAUSE)
    if "id" not in msg or method is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "recorder", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "hold", "description": "Never answered",
                             "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        continue
    else:
        result = {}
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
note({"eof": True})
record.close()
