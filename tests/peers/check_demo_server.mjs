// Checks mcp-demo-server with the official TypeScript SDK client (an independent client):
// connect over stdio, list tools with pagination, call echo and add, print a JSON summary.
// Usage: node check_demo_server.mjs <path-to-mcp-demo-server>. Exits non-zero on any failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

function fail(message) {
  console.error(`check_demo_server: FAIL: ${message}`);
  process.exit(1);
}

const bin = process.argv[2];
if (!bin) fail("usage: node check_demo_server.mjs <mcp-demo-server binary>");

const transport = new StdioClientTransport({
  command: bin,
  args: ["--page-size", "2", "--tools", "3", "--name", "sdk-check"],
  stderr: "inherit",
});
const client = new Client({ name: "switchboard-check", version: "0.0.0" });

const timer = setTimeout(() => fail("timed out after 20 s"), 20_000);
try {
  await client.connect(transport);
  const server = client.getServerVersion();
  if (server?.name !== "sdk-check") fail(`serverInfo.name is ${server?.name}`);
  if (!client.getServerCapabilities()?.tools) fail("no tools capability");

  const tools = [];
  const cursors = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
    if (cursor) cursors.push(cursor);
  } while (cursor);
  const expected = ["echo", "add", "sleep", "tool_0", "tool_1", "tool_2"];
  if (JSON.stringify(tools) !== JSON.stringify(expected)) fail(`tools: ${JSON.stringify(tools)}`);
  if (cursors.length !== 2) fail(`expected 3 pages, got ${cursors.length + 1}`);

  const echo = await client.callTool({ name: "echo", arguments: { text: "hello from the SDK" } });
  if (echo.content?.[0]?.text !== "hello from the SDK") fail(`echo: ${JSON.stringify(echo)}`);

  const add = await client.callTool({ name: "add", arguments: { a: 2, b: 40 } });
  if (add.content?.[0]?.text !== "42" || add.structuredContent?.sum !== 42) {
    fail(`add: ${JSON.stringify(add)}`);
  }

  await client.ping();

  let unknown;
  try {
    await client.callTool({ name: "no_such_tool", arguments: {} });
    unknown = "no error";
  } catch (err) {
    unknown = err?.code;
  }
  if (unknown !== -32602) fail(`unknown tool: expected -32602, got ${unknown}`);

  console.log(
    JSON.stringify({
      ok: true,
      server,
      tools,
      pages: cursors.length + 1,
      echo: echo.content[0].text,
      add: add.structuredContent,
    }),
  );
  await client.close();
  clearTimeout(timer);
} catch (err) {
  fail(err?.stack ?? String(err));
}
