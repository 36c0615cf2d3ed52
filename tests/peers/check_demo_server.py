"""Checks mcp-demo-server with the official Python SDK client (mcp ClientSession over stdio).

Usage: python check_demo_server.py <path-to-mcp-demo-server>. Prints a JSON summary; exits
non-zero on any failure.
"""

from __future__ import annotations

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client


async def check(binary: str) -> dict:
    params = StdioServerParameters(command=binary, args=["--page-size", "2", "--name", "py-check"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "py-check", init.server_info
            tools: list[str] = []
            cursor = None
            pages = 0
            while True:
                page = await session.list_tools(
                    params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
                )
                pages += 1
                tools += [t.name for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    break
            assert tools == ["echo", "add", "sleep"], tools
            echo = await session.call_tool("echo", {"text": "hello from python"})
            assert echo.content[0].text == "hello from python", echo
            add = await session.call_tool("add", {"a": 1, "b": 2})
            assert add.structured_content == {"sum": 3}, add
            return {
                "ok": True,
                "protocolVersion": init.protocol_version,
                "tools": tools,
                "pages": pages,
                "add": add.structured_content,
            }


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: check_demo_server.py <mcp-demo-server binary>")
    try:
        summary = asyncio.run(asyncio.wait_for(check(sys.argv[1]), timeout=20))
    except BaseException as err:  # noqa: BLE001 - any failure is a failed check
        print(f"check_demo_server.py: FAIL: {err!r}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
