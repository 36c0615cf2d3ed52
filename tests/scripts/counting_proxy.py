#!/usr/bin/env python3
"""A small HTTP proxy for the proxy tests. Prints its port on the first line of stdout and
appends one line per thing it forwarded to the log file (first argument):

  CONNECT host:port auth=<the Proxy-Authorization it got, or ->
  FORWARD METHOD absolute-url auth=<...>

`--require USER:PASSWORD` answers 407 to anything without those Basic credentials.
Tunnels relay bytes both ways; absolute-form requests are sent on to the server in origin
form (without Proxy-Authorization) and its answer (with a Content-Length) relayed back.
Serves until stdin closes or it is killed.
"""
import base64
import socket
import socketserver
import sys
import threading
from urllib.parse import urlsplit

LOG = sys.argv[1]
REQUIRE = None
if "--require" in sys.argv:
    REQUIRE = "Basic " + base64.b64encode(
        sys.argv[sys.argv.index("--require") + 1].encode()).decode()
LOCK = threading.Lock()


def log(line):
    with LOCK, open(LOG, "a") as f:
        f.write(line + "\n")


def read_head(sock, buf):
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return None, buf
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


def parse(head):
    lines = head.split("\r\n")
    headers = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        headers[k.strip().lower()] = v.strip()
    return lines[0].split(" "), lines[1:], headers


def read_body(sock, buf, length):
    while len(buf) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf[:length], buf[length:]


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        client = self.request
        buf = b""
        upstream = None
        while True:
            head, buf = read_head(client, buf)
            if head is None:
                return
            first, raw_lines, headers = parse(head)
            method, target = first[0], first[1]
            auth = headers.get("proxy-authorization", "-")
            if REQUIRE and auth != REQUIRE:
                log(f"REFUSED {method} {target} auth={auth}")
                client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                               b"proxy-authenticate: Basic\r\ncontent-length: 0\r\n\r\n")
                continue
            if method == "CONNECT":
                log(f"CONNECT {target} auth={auth}")
                host, port = target.rsplit(":", 1)
                up = socket.create_connection((host.strip("[]"), int(port)))
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if buf:
                    up.sendall(buf)
                t = threading.Thread(target=pipe, args=(up, client), daemon=True)
                t.start()
                pipe(client, up)
                t.join()
                return
            log(f"FORWARD {method} {target} auth={auth}")
            url = urlsplit(target)
            length = int(headers.get("content-length", "0"))
            body, buf = read_body(client, buf, length)
            if upstream is None:
                upstream = socket.create_connection((url.hostname, url.port or 80))
            path = url.path or "/"
            if url.query:
                path += "?" + url.query
            kept = [l for l in raw_lines if not l.lower().startswith("proxy-authorization:")]
            upstream.sendall(f"{method} {path} HTTP/1.1\r\n".encode()
                             + "\r\n".join(kept).encode() + b"\r\n\r\n" + body)
            up_head, up_rest = read_head(upstream, b"")
            if up_head is None:
                return
            _, _, up_headers = parse(up_head)
            up_body, _ = read_body(upstream, up_rest, int(up_headers.get("content-length", "0")))
            client.sendall(up_head.encode("latin-1") + b"\r\n\r\n" + up_body)


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
