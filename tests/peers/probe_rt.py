#!/usr/bin/env python3
# Round trip of the server/discover probe to a legacy stdio server (mcp-demo-server), against
# ping: spawn once, initialize, then alternate N probes and N pings, one at a time.
import json, subprocess, sys, time, statistics
bin_ = sys.argv[1]; n = int(sys.argv[2]) if len(sys.argv) > 2 else 500
p = subprocess.Popen([bin_, "--name", "demo"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def rt(msg):
    t = time.perf_counter_ns()
    p.stdin.write((json.dumps(msg) + "\n").encode()); p.stdin.flush()
    line = p.stdout.readline()
    return (time.perf_counter_ns() - t) / 1000, json.loads(line)
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}
first, ans = rt({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": meta}})
print("first probe, before initialize:", round(first), "us ->", json.dumps(ans)[:120])
rt({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'); p.stdin.flush()
probe, ping = [], []
for i in range(n):
    probe.append(rt({"jsonrpc": "2.0", "id": 10 + 2 * i, "method": "server/discover", "params": {"_meta": meta}})[0])
    ping.append(rt({"jsonrpc": "2.0", "id": 11 + 2 * i, "method": "ping"})[0])
print(f"n={n} probe median {statistics.median(probe):.0f} us, ping median {statistics.median(ping):.0f} us")
p.stdin.close(); p.wait()
