// Drives `switchboard serve` with the official TypeScript SDK client: connects over stdio
// (spawning `switchboard ... serve`) or Streamable HTTP (an already running `serve --http`),
// lists every tool (following nextCursor), calls each one with arguments made from its input
// schema (required properties only), and prints a JSON summary on stdout. A JSON-RPC error on
// any call, or no tools at all, is a failure (exit 1); a tool's own isError result is counted.
// Usage: node check_serve.mjs stdio <switchboard> <config> <cache-dir>
//        node check_serve.mjs http <url>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

function fail(message) {
  console.error(`check_serve: FAIL: ${message}`);
  process.exit(1);
}

const [mode, ...rest] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  const [bin, config, cache] = rest;
  transport = new StdioClientTransport({
    command: bin,
    args: ["--config", config, "--cache-dir", cache, "serve"],
    stderr: "inherit",
  });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(rest[0]));
} else {
  fail("usage: check_serve.mjs stdio <switchboard> <config> <cache-dir> | http <url>");
}

function sample(schema) {
  if (!schema || typeof schema !== "object") return "x";
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  if (schema.default !== undefined) return schema.default;
  switch (schema.type) {
    case "number":
    case "integer":
      return schema.minimum ?? 1;
    case "boolean":
      return false;
    case "array":
      return [];
    case "object":
      return argumentsFor(schema);
    default:
      return "x";
  }
}

function argumentsFor(schema) {
  const args = {};
  for (const name of schema?.required ?? []) args[name] = sample(schema.properties?.[name]);
  return args;
}

const client = new Client({ name: "switchboard-serve-check", version: "0.0.0" });
const timer = setTimeout(() => fail("timed out after 120 s"), 120_000);
try {
  await client.connect(transport);
  if (!client.getServerCapabilities()?.tools?.listChanged) fail("no tools.listChanged");
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  if (tools.length === 0) fail("no tools");
  const called = [];
  const toolErrors = [];
  for (const tool of tools) {
    try {
      const result = await client.callTool(
        { name: tool.name, arguments: argumentsFor(tool.inputSchema) },
        undefined,
        { timeout: 60_000 },
      );
      called.push(tool.name);
      if (result.isError) toolErrors.push(tool.name);
    } catch (err) {
      fail(`${tool.name}: ${err?.code} ${err?.message}`);
    }
  }
  await client.ping();
  console.log(JSON.stringify({ tools: tools.map((t) => t.name), called, toolErrors }));
} catch (err) {
  fail(err?.stack ?? String(err));
} finally {
  clearTimeout(timer);
  await client.close();
}
