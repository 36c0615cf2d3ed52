// An MCP server written with the TypeScript SDK v2 (`@modelcontextprotocol/server`, pinned in
// package.json), which speaks the stateless 2026-07-28 revision. Used by the real-peer tests:
//
//   node ts_v2_server.mjs [--http] [--reject-legacy] [--cache-ttl-ms N] [--log FILE]
//
// stdio by default; with --http it listens on 127.0.0.1 (an ephemeral port) and prints
// `listening <url>` on stdout. With --reject-legacy, clients of the 2025 revisions are refused
// (`initialize` gets -32022), as a modern-only deployment does. With --cache-ttl-ms N its tool
// lists say they stay fresh for N ms (`ttlMs`, `cacheScope: public`, the SDK's cache hints);
// with --log FILE (HTTP) the method of every request it receives is appended to FILE, one a line.
//
// Tools: `echo` (returns its text), and `confirm`, which asks for a confirmation through a
// multi round-trip request (an elicitation) and answers with what it got.
import fs from 'node:fs';
import http from 'node:http';
import { McpServer, createMcpHandler, inputRequired, inputResponse } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

const args = process.argv.slice(2);
const useHttp = args.includes('--http');
const rejectLegacy = args.includes('--reject-legacy');
const flag = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const ttlMs = flag('--cache-ttl-ms');
const logFile = flag('--log');

function factory() {
  const options = { capabilities: { tools: {} } };
  if (ttlMs !== undefined) {
    options.cacheHints = { 'tools/list': { ttlMs: Number(ttlMs), cacheScope: 'public' } };
  }
  const server = new McpServer({ name: 'ts-v2-peer', version: '1.0.0' }, options);
  server.registerTool(
    'echo',
    { description: 'Echo the text back', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  server.registerTool(
    'confirm',
    { description: 'Ask the user to confirm, then say what they answered', inputSchema: z.object({}) },
    async (_args, ctx) => {
      const answer = inputResponse(ctx.mcpReq.inputResponses, 'ok');
      if (answer.kind !== 'elicit') {
        return inputRequired({
          inputRequests: {
            ok: inputRequired.elicit({
              message: 'Proceed?',
              requestedSchema: {
                type: 'object',
                properties: { sure: { type: 'boolean', default: true } },
              },
            }),
          },
        });
      }
      return { content: [{ type: 'text', text: `answer: ${answer.action} ${JSON.stringify(answer.content ?? {})}` }] };
    },
  );
  return server;
}

const legacy = rejectLegacy ? 'reject' : undefined;

if (!useHttp) {
  serveStdio(factory, legacy ? { legacy } : {});
} else {
  const handler = createMcpHandler(factory, legacy ? { legacy } : { legacy: 'stateless' });
  const server = http.createServer(async (req, res) => {
    try {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      if (logFile && req.headers['mcp-method']) {
        fs.appendFileSync(logFile, `${req.headers['mcp-method']}\n`);
      }
      const body = Buffer.concat(chunks);
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) {
        if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
        else if (v !== undefined) headers.set(k, v);
      }
      const request = new Request(`http://${req.headers.host}${req.url}`, {
        method: req.method,
        headers,
        body: req.method === 'GET' || req.method === 'HEAD' || body.length === 0 ? undefined : body,
      });
      const response = await handler.fetch(request);
      res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
      if (response.body) {
        for await (const chunk of response.body) res.write(chunk);
      }
      res.end();
    } catch (e) {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(e));
    }
  });
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address();
    process.stdout.write(`listening http://127.0.0.1:${port}/mcp\n`);
  });
}
