// Per-call cost of going through `switchboard serve`, measured with the official TypeScript
// SDK client over stdio: `calls` sequential echo calls, then `calls` with `in_flight`
// outstanding, against whatever command is given (mcp-demo-server directly, or
// `switchboard --config F serve` in front of it). Prints one JSON line.
// Usage: node bench_serve.mjs <tool> <calls> <in_flight> <command> [args...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [tool, callsArg, inFlightArg, command, ...args] = process.argv.slice(2);
const calls = Number(callsArg);
const inFlight = Number(inFlightArg);
const client = new Client({ name: "switchboard-bench", version: "0.0.0" });
await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
async function echo(i) {
  const r = await client.callTool({ name: tool, arguments: { text: `call ${i}` } });
  if (r.content?.[0]?.text !== `call ${i}`) throw new Error(JSON.stringify(r));
}
for (let i = 0; i < 200; i++) await echo(i);
let t = performance.now();
for (let i = 0; i < calls; i++) await echo(i);
const sequentialUs = ((performance.now() - t) * 1000) / calls;
t = performance.now();
let next = 0;
await Promise.all(
  Array.from({ length: inFlight }, async () => {
    while (next < calls) await echo(next++);
  }),
);
const concurrentPerS = calls / ((performance.now() - t) / 1000);
console.log(JSON.stringify({ tool, calls, sequential_us_per_call: Math.round(sequentialUs), concurrent_calls_per_s: Math.round(concurrentPerS), in_flight: inFlight }));
await client.close();
