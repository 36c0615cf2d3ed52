#!/usr/bin/env python3
"""A stdio MCP server that crashes with calls in flight: it answers `initialize` and
`tools/list`, holds every `tools/call` unanswered, and once it holds the number of calls given
as its first argument (default 1) it writes two lines to stderr and exits with status 3.
Its pid goes to the file named by the second argument, if any.

Tools: `hold` (never answered: the crash ends it)."""
import json
import os
import sys

CRASH_AT = int(sys.argv[1]) if len(sys.argv) > 1 else 1
if len(sys.argv) > 2:
    with open(sys.argv[2], "w") as f:
        f.write(str(os.getpid()))


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


held = 0
for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if method == "tools/call":
        held += 1
        if held >= CRASH_AT:
            sys.stderr.write("loading the index\n")
            sys.stderr.write(f"fatal: the index is corrupt ({held} calls lost)\n")
            sys.stderr.flush()
            os._exit(3)
        continue
    if "id" not in msg or method is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "crasher", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "hold", "inputSchema": {"type": "object"}}]}
    else:
        result = {}
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
