#!/usr/bin/env python3
"""A stdio MCP server whose `tools/list` never ends: every page holds one tool and a fresh
`nextCursor`. Counts the pages it served in the file named by its first argument (one line
per page), so a test can check how many the client read."""
import json
import sys

COUNT = sys.argv[1]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    method = msg["method"]
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "endless", "version": "1"}}
    elif method == "tools/list":
        with open(COUNT, "a") as f:
            f.write("page\n")
        cursor = (msg.get("params") or {}).get("cursor") or "0"
        n = int(cursor) + 1
        result = {"tools": [{"name": f"t{n}", "inputSchema": {"type": "object"}}],
                  "nextCursor": str(n)}
    else:
        result = {}
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
