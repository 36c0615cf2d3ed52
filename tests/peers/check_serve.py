"""Drives `switchboard serve` with the official Python SDK client (`mcp`): connects over stdio
(spawning `switchboard ... serve`) or Streamable HTTP (an already running `serve --http`),
lists every tool (following nextCursor), calls each one with arguments made from its input
schema (required properties only), and prints a JSON summary on stdout. A JSON-RPC error on
any call, or no tools at all, is a failure (exit 1); a tool's own isError result is counted.

Usage: python check_serve.py stdio <switchboard> <config> <cache-dir>
       python check_serve.py http <url>
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def sample(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return "x"
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return arguments_for(schema)
    return "x"


def arguments_for(schema: Any) -> dict:
    if not isinstance(schema, dict):
        return {}
    props = schema.get("properties") or {}
    return {name: sample(props.get(name)) for name in schema.get("required") or []}


async def check(mode: str, rest: list[str]) -> dict:
    async with contextlib.AsyncExitStack() as stack:
        if mode == "stdio":
            binary, config, cache = rest
            params = StdioServerParameters(
                command=binary, args=["--config", config, "--cache-dir", cache, "serve"]
            )
            streams = await stack.enter_async_context(stdio_client(params))
        else:
            streams = await stack.enter_async_context(streamable_http_client(rest[0]))
        read, write = streams[0], streams[1]
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        caps = session.server_capabilities
        if caps is None or caps.tools is None or not caps.tools.list_changed:
            raise AssertionError(f"no tools.listChanged: {caps}")
        tools: list[types.Tool] = []
        cursor = None
        while True:
            page = await session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        if not tools:
            raise AssertionError("no tools")
        called: list[str] = []
        tool_errors: list[str] = []
        for tool in tools:
            result = await session.call_tool(tool.name, arguments_for(tool.input_schema))
            called.append(tool.name)
            if result.is_error:
                tool_errors.append(tool.name)
        await session.send_ping()
        return {"tools": [t.name for t in tools], "called": called, "toolErrors": tool_errors}


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] not in ("stdio", "http"):
        sys.exit("usage: check_serve.py stdio <switchboard> <config> <cache-dir> | http <url>")
    try:
        summary = asyncio.run(asyncio.wait_for(check(sys.argv[1], sys.argv[2:]), timeout=120))
    except BaseException as err:  # noqa: BLE001 - any failure is a failed check
        print(f"check_serve.py: FAIL: {err!r}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
