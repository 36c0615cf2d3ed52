#!/usr/bin/env python3
"""A stdio MCP server whose tool list is odd in every way a list can be and still parse:
input schemas that are not objects ("string", 42, [], null), a schema nested 200 levels
deep, and one name listed twice. Exits at stdin EOF. With an argument, the deep schema is
printed to stdout instead (compact, as it is sent)."""
import json
import sys


def deep(levels):
    schema = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


DEEP = deep(200)
TOOLS = [
    {"name": "as_string", "inputSchema": "string"},
    {"name": "as_number", "inputSchema": 42},
    {"name": "as_array", "inputSchema": []},
    {"name": "as_null", "inputSchema": None},
    {"name": "deep", "inputSchema": DEEP},
    {"name": "twice", "description": "first", "inputSchema": {"type": "object"}},
    {"name": "twice", "description": "second", "inputSchema": {"type": "object"}},
]


def compact(value):
    return json.dumps(value, separators=(",", ":"))


if len(sys.argv) > 1:
    print(compact(DEEP))
    sys.exit(0)

sys.setrecursionlimit(10000)
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "odd", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    else:
        result = {"content": [{"type": "text", "text": "ok"}]}
    sys.stdout.write(compact({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
