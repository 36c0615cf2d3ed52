#!/usr/bin/env python3
"""A small stateless Streamable HTTP MCP server for the transport tests. Prints its port on
the first line of stdout, then serves until killed (or until stdin closes).

Options:
  --tls                serve https with tests/fixtures/tls/server.pem (a private CA signed it)
  --nagle              leave Nagle's algorithm on and write the head and the body of every
                       answer in separate writes (the pattern that stalls a client whose
                       request goes out in two pieces)
  --log FILE           append one line per request: "METHOD PATH JSONRPC-METHOD"
  --check-one-piece    also log "split" when a request's head and body arrived in separate
                       reads (the client wrote it in more than one piece)

Tools: `echo` (returns its text).
"""
import json
import os
import socket
import socketserver
import ssl
import sys
import threading

ARGS = sys.argv[1:]
TLS = "--tls" in ARGS
NAGLE = "--nagle" in ARGS
LOG = ARGS[ARGS.index("--log") + 1] if "--log" in ARGS else None
LOCK = threading.Lock()
HERE = os.path.dirname(os.path.abspath(__file__))


def log(line):
    if LOG:
        with LOCK, open(LOG, "a") as f:
            f.write(line + "\n")


def answer(msg):
    if "id" not in msg or "method" not in msg:
        return None
    method = msg["method"]
    if method == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "py-http", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "description": "Echo the text",
                             "inputSchema": {"type": "object",
                                             "properties": {"text": {"type": "string"}}}}]}
    elif method == "tools/call":
        text = msg.get("params", {}).get("arguments", {}).get("text", "")
        result = {"content": [{"type": "text", "text": text}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": msg["id"],
                "error": {"code": -32601, "message": "method not found"}}
    return {"jsonrpc": "2.0", "id": msg["id"], "result": result}


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        if not NAGLE:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        while True:
            reads = 0
            while b"\r\n\r\n" not in buf:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                reads += 1
                buf += chunk
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            headers = {}
            for l in lines[1:]:
                k, _, v = l.partition(":")
                headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length", "0"))
            split = False
            while len(buf) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                split = True
                buf += chunk
            body, buf = buf[:length], buf[length:]
            rpc = "-"
            out = None
            status = "405 Method Not Allowed"
            if method == "POST":
                try:
                    msg = json.loads(body)
                    rpc = msg.get("method", "-")
                    out = answer(msg)
                    status = "200 OK" if out is not None else "202 Accepted"
                except ValueError:
                    status = "400 Bad Request"
            log(f"{method} {path} {rpc}" + (" split" if split else ""))
            payload = json.dumps(out).encode() if out is not None else b""
            head = (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(payload)}\r\n\r\n").encode()
            if NAGLE:
                # Two writes: with Nagle on, the second waits for the client's ACK of the
                # first, which a client that delays ACKs holds back.
                sock.sendall(head)
                if payload:
                    sock.sendall(payload)
            else:
                sock.sendall(head + payload)


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def get_request(self):
        sock, addr = super().get_request()
        if TLS:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls = os.path.join(HERE, "..", "fixtures", "tls")
            ctx.load_cert_chain(os.path.join(tls, "server.pem"), os.path.join(tls, "server.key"))
            sock = ctx.wrap_socket(sock, server_side=True)
        return sock, addr


server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
# Serve until stdin closes (the test's handle dropped) or the process is killed.
sys.stdin.read()
