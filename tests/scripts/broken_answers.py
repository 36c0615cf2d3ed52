#!/usr/bin/env python3
"""A stdio MCP server whose answers to tools/call are broken on the wire, one way per tool,
for the fail-fast tests. Exits at stdin EOF.

- `bad_utf8`: the answer carries a byte that is not UTF-8 inside a string;
- `no_jsonrpc`: the answer lacks "jsonrpc": "2.0";
- `stray_id`: a response to an id the client never sent, then a good answer;
- `note_no_jsonrpc`: a notification without "jsonrpc": "2.0", then a good answer;
- `ok`: a good answer.
"""
import json
import sys

TOOLS = [{"name": n, "inputSchema": {"type": "object"}}
         for n in ("bad_utf8", "no_jsonrpc", "stray_id", "note_no_jsonrpc", "ok")]


def send(raw):
    sys.stdout.buffer.write(raw + b"\n")
    sys.stdout.buffer.flush()


def answer(id_, result):
    send(json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}).encode())


for line in sys.stdin.buffer:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    id_ = msg["id"]
    if method == "initialize":
        answer(id_, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                     "serverInfo": {"name": "broken", "version": "1"}})
    elif method == "tools/list":
        answer(id_, {"tools": TOOLS})
    elif method == "tools/call":
        tool = msg["params"]["name"]
        text = {"content": [{"type": "text", "text": "fine"}]}
        if tool == "bad_utf8":
            body = json.dumps({"jsonrpc": "2.0", "id": id_,
                               "result": {"content": [{"type": "text", "text": "XX"}]}})
            send(body.encode().replace(b"XX", b"\xff\xfe"))
        elif tool == "no_jsonrpc":
            send(json.dumps({"id": id_, "result": text}).encode())
        elif tool == "stray_id":
            answer(987654, text)
            answer(id_, text)
        elif tool == "note_no_jsonrpc":
            send(json.dumps({"method": "notifications/message",
                             "params": {"level": "info", "data": "hello"}}).encode())
            answer(id_, text)
        else:
            answer(id_, text)
    else:
        answer(id_, {})
