#!/usr/bin/env python3
"""A stdio MCP server that floods its client with `notifications/message` from the moment it
is initialized, as fast as its stdout takes them, for the command line's tests of output that
cannot keep up. Writes its pid to the file named by the first argument. With
`--ignore-sigterm` it ignores SIGTERM (only SIGKILL ends it). With `--delay SECONDS` it answers
`tools/list` and `tools/call` only after that long (flooding meanwhile). It stops by itself
after 60 s, or when its stdout or stdin closes."""
import json
import os
import signal
import sys
import threading
import time

with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
if "--ignore-sigterm" in sys.argv[2:]:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

lock = threading.Lock()
ARGS = sys.argv[2:]
DELAY = float(ARGS[ARGS.index("--delay") + 1]) if "--delay" in ARGS else 0.0


def send(obj):
    data = json.dumps(obj) + "\n"
    with lock:
        sys.stdout.write(data)
        sys.stdout.flush()


def flood():
    deadline = time.monotonic() + 60
    n = 0
    try:
        while time.monotonic() < deadline:
            n += 1
            send({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "logger": "flood", "data": f"line {n} " + "x" * 160}})
    except (BrokenPipeError, OSError):
        pass
    os._exit(0)


for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if method == "notifications/initialized":
        threading.Thread(target=flood, daemon=True).start()
    if "id" not in msg:
        continue
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18",
                  "capabilities": {"tools": {}, "logging": {}},
                  "serverInfo": {"name": "flood", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "noop", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "done"}]}
    else:
        result = {}
    answer = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
    if DELAY and method in ("tools/list", "tools/call"):
        threading.Timer(DELAY, send, (answer,)).start()
    else:
        send(answer)
os._exit(0)
