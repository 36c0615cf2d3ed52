"""A Python SDK server (the `mcp` package's MCPServer) for Switchboard's tests of the stateless
revision (MCP 2026-07-28), which this SDK speaks beside the 2025 revisions.

Tools: echo(text); confirm(), whose `sure` parameter is filled by an elicitation: on a
2026-07-28 connection the SDK asks for it in an input round (`InputRequiredResult`) and
resumes when the client retries with the answer and the `requestState` it was given. Runs
over stdio by default, or over streamable HTTP with `--port N` (on 127.0.0.1, path /mcp).
"""

from __future__ import annotations

import argparse
from typing import Annotated

from pydantic import BaseModel

from mcp.server.mcpserver import Elicit, MCPServer, Resolve


class Sure(BaseModel):
    sure: bool = True


def ask_sure() -> Elicit[Sure]:
    return Elicit("Go ahead?", Sure)


def build() -> MCPServer:
    server = MCPServer("py-modern")

    @server.tool(description="Echo the given text back.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Ask the user to confirm, then say what they answered.")
    def confirm(answer: Annotated[Sure, Resolve(ask_sure)]) -> str:
        return f"sure: {str(answer.sure).lower()}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args()
    server = build()
    if args.port is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
