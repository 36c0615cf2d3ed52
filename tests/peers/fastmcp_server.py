"""A FastMCP-style server (the Python SDK's high-level API) for Switchboard's integration tests.

Tools: echo(text), add(a, b), slow(ms) which sleeps. Runs over stdio by default, or over
streamable HTTP with `--transport streamable-http --port N` (on 127.0.0.1, path /mcp).

mcp 2.x renamed FastMCP to MCPServer; the 1.x name is used if that is what is installed.
"""

from __future__ import annotations

import argparse
import asyncio

try:  # mcp >= 2
    from mcp.server.mcpserver import MCPServer as FastMCP
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP  # type: ignore[no-redef]


def build(name: str) -> FastMCP:
    server = FastMCP(name)

    @server.tool(description="Echo the given text back.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Add two numbers.")
    def add(a: float, b: float) -> float:
        return a + b

    @server.tool(description="Sleep for `ms` milliseconds, then say so.")
    async def slow(ms: int) -> str:
        await asyncio.sleep(ms / 1000)
        return f"slept {ms}ms"

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--name", default="fastmcp-peer")
    args = parser.parse_args()
    server = build(args.name)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
