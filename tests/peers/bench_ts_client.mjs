// Call throughput of the official TypeScript SDK client against mcp-demo-server over stdio:
// the reference for Switchboard's `call` figures (io/examples/shell_bench.rs runs both).
// Usage: node bench_ts_client.mjs <mcp-demo-server binary> [calls=2000] [in_flight=64] [warmup=200]
// Connects, makes `warmup` untimed echo calls, then `calls` sequential echo calls, then `calls`
// echo calls with `in_flight` outstanding at a time. Prints one JSON line (calls/s and client
// CPU µs per call, from process.cpuUsage()); exits non-zero on any failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

function fail(message) {
  console.error(`bench_ts_client: FAIL: ${message}`);
  process.exit(1);
}

const bin = process.argv[2];
if (!bin) fail("usage: node bench_ts_client.mjs <mcp-demo-server binary> [calls] [in_flight] [warmup]");
const calls = Number(process.argv[3] ?? 2000);
const inFlight = Number(process.argv[4] ?? 64);
const warmup = Number(process.argv[5] ?? 200);

const transport = new StdioClientTransport({
  command: bin,
  args: ["--name", "bench"],
  stderr: "ignore",
});
const client = new Client({ name: "switchboard-bench", version: "0.0.0" });

async function echo(i) {
  const text = `call ${i}`;
  const r = await client.callTool({ name: "echo", arguments: { text } });
  if (r.content?.[0]?.text !== text) fail(`echo ${i}: ${JSON.stringify(r)}`);
}

const timer = setTimeout(() => fail("timed out after 300 s"), 300_000);
try {
  await client.connect(transport);
  for (let i = 0; i < warmup; i++) await echo(i);

  let t0 = process.hrtime.bigint();
  let c0 = process.cpuUsage();
  for (let i = 0; i < calls; i++) await echo(i);
  const sequentialS = Number(process.hrtime.bigint() - t0) / 1e9;
  const sequentialCpu = process.cpuUsage(c0);

  let next = 0;
  const worker = async () => {
    while (next < calls) {
      const i = next++;
      await echo(i);
    }
  };
  t0 = process.hrtime.bigint();
  c0 = process.cpuUsage();
  await Promise.all(Array.from({ length: inFlight }, worker));
  const concurrentS = Number(process.hrtime.bigint() - t0) / 1e9;
  const concurrentCpu = process.cpuUsage(c0);
  // Client CPU (user + system, every thread of this process) per call, in µs.
  const perCall = (u) => (u.user + u.system) / calls;

  console.log(
    JSON.stringify({
      client: "@modelcontextprotocol/sdk",
      calls,
      in_flight: inFlight,
      sequential_s: sequentialS,
      sequential_calls_per_s: calls / sequentialS,
      sequential_cpu_us_per_call: perCall(sequentialCpu),
      concurrent_s: concurrentS,
      concurrent_calls_per_s: calls / concurrentS,
      concurrent_cpu_us_per_call: perCall(concurrentCpu),
    }),
  );
  await client.close();
  clearTimeout(timer);
} catch (err) {
  fail(err?.stack ?? String(err));
}
