// The fixture upstream for the official conformance suite's server scenarios, written with the
// TypeScript SDK v2 (`@modelcontextprotocol/server`, pinned in package.json). It offers what
// each server scenario asks a server for (tools, resources, templates, prompts, logging,
// completion, subscriptions, progress, sampling and elicitation; for the 2026-07-28 revision
// also the multi round-trip tools and prompt, whose state between rounds is sealed with an
// HMAC, and the diagnostic tools of the stateless scenario), under the names the scenarios
// call, so the suite can be run against it alone and against `switchboard serve` in front of
// it (tests/conformance/serve), and the two sets of verdicts compared.
//
//   node conformance_fixture.mjs            serve over stdio (both protocol eras: the 2025
//                                           tools that ask for sampling or elicitation ask
//                                           with an InputRequiredResult on 2026-07-28)
//   node conformance_fixture.mjs --legacy   serve over stdio, 2025 revisions only (a
//                                           hand-wired stdio server, as most servers are)
//   node conformance_fixture.mjs --http P   serve Streamable HTTP on 127.0.0.1:P (0: any port)
//                                           at /mcp, printing `listening <url>` on stdout
//
// Over HTTP a 2025-era client gets a session (so the server can ask it for sampling or
// elicitation in the middle of a call and notify its subscriptions); a 2026-07-28 client is
// served statelessly by the SDK's per-request handler. Host and Origin are checked against
// loopback names, as a local server must.
import http from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  McpServer,
  acceptedContent,
  createRequestStateCodec,
  inputRequired,
  inputResponse,
  ResourceTemplate,
  WebStandardStreamableHTTPServerTransport,
  createMcpHandler,
  fromJsonSchema,
  hostHeaderValidationResponse,
  isLegacyRequest,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  originValidationResponse,
} from '@modelcontextprotocol/server';
import { StdioServerTransport, serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (t) => ({ content: [{ type: 'text', text: t }] });

// The multi round-trip tools seal what they carry between rounds (`requestState`) with an
// HMAC under a key of this process: a state changed on the way back is refused (-32602).
const stateCodec = createRequestStateCodec({ key: randomBytes(32) });

// What the diagnostic hooks change: tools and prompts added at run time, and who to tell
// (the HTTP handler's notifier, or the connected stdio instances).
const dynamic = { tools: 0, prompts: 0 };
const listeners = new Set();
const changed = (what) => {
  for (const tell of listeners) tell(what);
};

/** One member of a 2026-07-28 request's `_meta` envelope (undefined on a 2025 connection). */
const envelope = (ctx, name) => {
  const e = ctx.mcpReq.envelope;
  return e?.[`io.modelcontextprotocol/${name}`] ?? e?.[name];
};
/** The client capabilities a 2026-07-28 request declared. */
const declared = (ctx) => envelope(ctx, 'clientCapabilities');

/** A request on the 2026-07-28 revision (its `_meta` envelope names the version). */
const stateless = (ctx) => envelope(ctx, 'protocolVersion') !== undefined;

// The 2025 tools that ask the client for sampling or an elicitation in the middle of a call
// ask on either revision: a request of the server's own on a 2025 connection, an
// InputRequiredResult on a 2026-07-28 request (the answer comes with the retry, under the
// key given here). Each returns `{ result }` (the client's answer) or `{ ask }` (the
// InputRequiredResult to return).
async function sampled(ctx, params) {
  if (!stateless(ctx)) return { result: await ctx.mcpReq.requestSampling(params) };
  const r = inputResponse(ctx.mcpReq.inputResponses, 'sampling');
  if (r.kind === 'sampling') return { result: r.result };
  return { ask: inputRequired({ inputRequests: { sampling: inputRequired.createMessage(params) } }) };
}
async function elicited(ctx, params) {
  if (!stateless(ctx)) return { result: await ctx.mcpReq.elicitInput(params) };
  const r = inputResponse(ctx.mcpReq.inputResponses, 'elicitation');
  if (r.kind === 'elicit') return { result: { action: r.action, content: r.content } };
  const { mode: _mode, ...form } = params;
  return { ask: inputRequired({ inputRequests: { elicitation: inputRequired.elicit(form) } }) };
}

/** The `name` field of an accepted elicitation in `inputResponses[key]`, if any. */
const acceptedField = (ctx, key, field) => {
  const content = acceptedContent(ctx.mcpReq.inputResponses, key);
  const value = content?.[field];
  return typeof value === 'string' || typeof value === 'boolean' ? value : undefined;
};

const askName = (message) =>
  inputRequired.elicit({
    message,
    requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
  });
const askConfirm = () =>
  inputRequired.elicit({
    message: 'Please confirm',
    requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
  });

/** The multi round-trip tools and prompt (the input-required-result scenarios). */
function registerInputRequired(server) {
  const noArgs = z.object({});
  server.registerTool(
    'test_input_required_result_elicitation',
    { description: 'Asks for a name (input required), then greets', inputSchema: noArgs },
    async (_args, ctx) => {
      const name = acceptedField(ctx, 'user_name', 'name');
      if (name !== undefined) return text(`Hello, ${name}!`);
      return inputRequired({ inputRequests: { user_name: askName('What is your name?') } });
    },
  );
  server.registerTool(
    'test_input_required_result_sampling',
    { description: 'Asks for a completion (input required), then reports it', inputSchema: noArgs },
    async (_args, ctx) => {
      const r = inputResponse(ctx.mcpReq.inputResponses, 'capital_question');
      if (r.kind === 'sampling') return text(`Sampling result: ${r.result.content?.text ?? 'no text'}`);
      return inputRequired({
        inputRequests: {
          capital_question: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }],
            maxTokens: 100,
          }),
        },
      });
    },
  );
  server.registerTool(
    'test_input_required_result_list_roots',
    { description: "Asks for the client's roots (input required), then counts them", inputSchema: noArgs },
    async (_args, ctx) => {
      const r = inputResponse(ctx.mcpReq.inputResponses, 'client_roots');
      if (r.kind === 'roots') return text(`Found ${r.roots.length} root(s): ${r.roots.map((x) => x.uri).join(', ')}`);
      return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
    },
  );
  for (const name of ['test_input_required_result_request_state', 'test_input_required_result_tampered_state']) {
    server.registerTool(
      name,
      { description: 'Asks for a confirmation and carries sealed state between the rounds', inputSchema: noArgs },
      async (_args, ctx) => {
        const state = ctx.mcpReq.requestState();
        if (state?.kind === 'request-state' && acceptedField(ctx, 'confirm', 'ok') === true) {
          return text('state-ok: requestState validated');
        }
        return inputRequired({
          inputRequests: { confirm: askConfirm() },
          requestState: await stateCodec.mint({ kind: 'request-state', nonce: randomUUID() }),
        });
      },
    );
  }
  server.registerTool(
    'test_input_required_result_multiple_inputs',
    { description: 'Asks for a name, a completion and the roots at once', inputSchema: noArgs },
    async (_args, ctx) => {
      const state = ctx.mcpReq.requestState();
      const name = acceptedField(ctx, 'user_name', 'name');
      const greeting = inputResponse(ctx.mcpReq.inputResponses, 'greeting');
      const roots = inputResponse(ctx.mcpReq.inputResponses, 'client_roots');
      if (state?.kind === 'multiple-inputs' && name !== undefined && greeting.kind === 'sampling' && roots.kind === 'roots') {
        return text(`Name: ${name}; Greeting: ${greeting.result.content?.text}; Roots: ${roots.roots.length}`);
      }
      return inputRequired({
        inputRequests: {
          user_name: askName('What is your name?'),
          greeting: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }],
            maxTokens: 50,
          }),
          client_roots: inputRequired.listRoots(),
        },
        requestState: await stateCodec.mint({ kind: 'multiple-inputs' }),
      });
    },
  );
  server.registerTool(
    'test_input_required_result_multi_round',
    { description: 'Asks for a name, then a colour, carrying the name between rounds', inputSchema: noArgs },
    async (_args, ctx) => {
      const state = ctx.mcpReq.requestState();
      const name = acceptedField(ctx, 'step1', 'name');
      const color = acceptedField(ctx, 'step2', 'color');
      if (state?.round === 2 && color !== undefined) {
        return text(`Multi-round complete for ${state.name} who likes ${color}`);
      }
      if (state?.round === 1 && name !== undefined) {
        return inputRequired({
          inputRequests: {
            step2: inputRequired.elicit({
              message: 'Step 2: What is your favorite color?',
              requestedSchema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] },
            }),
          },
          requestState: await stateCodec.mint({ round: 2, name }),
        });
      }
      return inputRequired({
        inputRequests: { step1: askName('Step 1: What is your name?') },
        requestState: await stateCodec.mint({ round: 1 }),
      });
    },
  );
  server.registerTool(
    'test_input_required_result_capabilities',
    { description: 'Asks only for the inputs the client declared it can give', inputSchema: noArgs },
    async (_args, ctx) => {
      const caps = declared(ctx) ?? { sampling: {}, elicitation: {}, roots: {} };
      const got = ['a_name', 'a_completion', 'the_roots'].filter((k) => inputResponse(ctx.mcpReq.inputResponses, k).kind !== 'missing');
      if (got.length > 0) return text(`Received ${got.join(', ')}`);
      const inputRequests = {};
      if (caps.sampling) {
        inputRequests.a_completion = inputRequired.createMessage({
          messages: [{ role: 'user', content: { type: 'text', text: 'Say hello' } }],
          maxTokens: 20,
        });
      }
      if (caps.elicitation) inputRequests.a_name = askName('What is your name?');
      if (caps.roots) inputRequests.the_roots = inputRequired.listRoots();
      if (Object.keys(inputRequests).length === 0) return text('The client declared no capability to ask with');
      return inputRequired({ inputRequests });
    },
  );
  server.registerPrompt(
    'test_input_required_result_prompt',
    { title: 'Prompt Needing Input', description: 'Asks for context (input required) before it is built' },
    async (ctx) => {
      const context = acceptedField(ctx, 'user_context', 'context');
      if (context !== undefined) {
        return { messages: [{ role: 'user', content: { type: 'text', text: `Prompt with context: ${context}` } }] };
      }
      return inputRequired({
        inputRequests: {
          user_context: inputRequired.elicit({
            message: 'What context should the prompt use?',
            requestedSchema: { type: 'object', properties: { context: { type: 'string' } }, required: ['context'] },
          }),
        },
      });
    },
  );
}

/** The diagnostic tools of the stateless scenario (server-stateless). */
function registerDiagnostics(server) {
  const noArgs = z.object({});
  server.registerTool(
    'test_missing_capability',
    { description: 'Needs the sampling capability: refuses a request that did not declare it', inputSchema: noArgs },
    // Asking for a completion the request did not declare it can give is refused by the
    // SDK with -32021 (MissingRequiredClientCapability) before the answer leaves.
    async (_args, ctx) => {
      const r = inputResponse(ctx.mcpReq.inputResponses, 'completion');
      if (r.kind === 'sampling') return text(`Sampled: ${r.result.content?.text ?? ''}`);
      return inputRequired({
        inputRequests: {
          completion: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'Say something' } }],
            maxTokens: 20,
          }),
        },
      });
    },
  );
  server.registerTool(
    'test_streaming_elicitation',
    { description: 'Reports progress, then asks for input on the same response stream', inputSchema: noArgs },
    async (_args, ctx) => {
      const name = acceptedField(ctx, 'user_name', 'name');
      if (name !== undefined) return text(`Streamed for ${name}`);
      const progressToken = ctx.mcpReq._meta?.progressToken;
      if (progressToken !== undefined) {
        await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress: 1, total: 2 } });
      }
      return inputRequired({ inputRequests: { user_name: askName('What is your name?') } });
    },
  );
  server.registerTool(
    'test_logging_tool',
    { description: 'Logs a message at info level (sent only when the request asked for logs)', inputSchema: noArgs },
    async (_args, ctx) => {
      const level = envelope(ctx, 'logLevel');
      // A 2026-07-28 request that set no log level gets no log messages.
      if (level !== undefined || declared(ctx) === undefined) {
        await ctx.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', data: 'Logging tool ran' } });
      }
      return text('Logged');
    },
  );
  server.registerTool(
    'test_trigger_tool_change',
    { description: 'Adds a tool and announces the changed tool list', inputSchema: noArgs },
    async () => {
      dynamic.tools += 1;
      changed('tools');
      return text(`Tools changed (${dynamic.tools} added)`);
    },
  );
  server.registerTool(
    'test_trigger_prompt_change',
    { description: 'Adds a prompt and announces the changed prompt list', inputSchema: noArgs },
    async () => {
      dynamic.prompts += 1;
      changed('prompts');
      return text(`Prompts changed (${dynamic.prompts} added)`);
    },
  );
  for (let i = 1; i <= dynamic.tools; i++) addDynamic(server, 'tools', i);
  for (let i = 1; i <= dynamic.prompts; i++) addDynamic(server, 'prompts', i);
}

/** The `i`th tool or prompt the diagnostic hooks add. */
function addDynamic(server, what, i) {
  if (what === 'tools') {
    server.registerTool(`test_dynamic_tool_${i}`, { description: `Added at run time (${i})` }, async () => text(`dynamic ${i}`));
  } else {
    server.registerPrompt(`test_dynamic_prompt_${i}`, { description: `Added at run time (${i})` }, async () => ({
      messages: [{ role: 'user', content: { type: 'text', text: `dynamic ${i}` } }],
    }));
  }
}

/** One server instance (one per legacy session, one per modern request). */
function factory() {
  const server = new McpServer(
    { name: 'switchboard-conformance-fixture', version: '1.0.0' },
    {
      requestState: { verify: stateCodec.verify },
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
    },
  );

  server.registerTool('test_simple_text', { description: 'Answers with one text block' }, async () =>
    text('This is a simple text response for testing.'),
  );
  server.registerTool('test_image_content', { description: 'Answers with one image block' }, async () => ({
    content: [{ type: 'image', data: PNG, mimeType: 'image/png' }],
  }));
  server.registerTool('test_audio_content', { description: 'Answers with one audio block' }, async () => ({
    content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }],
  }));
  server.registerTool(
    'test_embedded_resource',
    { description: 'Answers with an embedded resource' },
    async () => ({
      content: [
        {
          type: 'resource',
          resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' },
        },
      ],
    }),
  );
  server.registerTool(
    'test_multiple_content_types',
    { description: 'Answers with text, an image and a resource' },
    async () => ({
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: PNG, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }),
          },
        },
      ],
    }),
  );
  server.registerTool(
    'test_tool_with_logging',
    { description: 'Logs three messages while it runs', inputSchema: z.object({}) },
    async (_args, ctx) => {
      for (const data of ['Tool execution started', 'Tool processing data', 'Tool execution completed']) {
        await ctx.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', data } });
        await sleep(20);
      }
      return text('Tool with logging executed successfully');
    },
  );
  server.registerTool(
    'test_tool_with_progress',
    { description: 'Reports progress 0, 50 and 100 of 100', inputSchema: z.object({}) },
    async (_args, ctx) => {
      const progressToken = ctx.mcpReq._meta?.progressToken ?? 0;
      for (const progress of [0, 50, 100]) {
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` },
        });
        await sleep(20);
      }
      return text(String(progressToken));
    },
  );
  server.registerTool('test_error_handling', { description: 'Always fails' }, async () => {
    throw new Error('This tool intentionally returns an error for testing');
  });
  server.registerTool(
    'test_sampling',
    { description: 'Asks the client for a completion', inputSchema: z.object({ prompt: z.string() }) },
    async ({ prompt }, ctx) => {
      const asked = await sampled(ctx, {
        messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
        maxTokens: 100,
      });
      if (asked.ask) return asked.ask;
      const r = asked.result;
      const reply = r.content?.text ?? 'No response';
      return text(`LLM response: ${reply}`);
    },
  );
  server.registerTool(
    'test_elicitation',
    { description: 'Asks the user for a response', inputSchema: z.object({ message: z.string() }) },
    async ({ message }, ctx) => {
      const asked = await elicited(ctx, {
        mode: 'form',
        message,
        requestedSchema: {
          type: 'object',
          properties: { response: { type: 'string', description: "User's response" } },
          required: ['response'],
        },
      });
      if (asked.ask) return asked.ask;
      const r = asked.result;
      return text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    },
  );
  server.registerTool(
    'test_elicitation_sep1034_defaults',
    { description: 'Asks for a form whose every field has a default', inputSchema: z.object({}) },
    async (_args, ctx) => {
      const asked = await elicited(ctx, {
        mode: 'form',
        message: 'Please review and update the form fields with defaults',
        requestedSchema: {
          type: 'object',
          properties: {
            name: { type: 'string', description: 'User name', default: 'John Doe' },
            age: { type: 'integer', description: 'User age', default: 30 },
            score: { type: 'number', description: 'User score', default: 95.5 },
            status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
            verified: { type: 'boolean', description: 'Verification status', default: true },
          },
          required: [],
        },
      });
      if (asked.ask) return asked.ask;
      const r = asked.result;
      return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    },
  );
  server.registerTool(
    'test_elicitation_sep1330_enums',
    { description: 'Asks for a form with every kind of enum field', inputSchema: z.object({}) },
    async (_args, ctx) => {
      const options = (prefix, titles) => titles.map((title, i) => ({ const: `${prefix}${i + 1}`, title }));
      const asked = await elicited(ctx, {
        mode: 'form',
        message: 'Please select options from the enum fields',
        requestedSchema: {
          type: 'object',
          properties: {
            untitledSingle: { type: 'string', description: 'Select one option', enum: ['option1', 'option2', 'option3'] },
            titledSingle: {
              type: 'string',
              description: 'Select one option with titles',
              oneOf: options('value', ['First Option', 'Second Option', 'Third Option']),
            },
            legacyEnum: {
              type: 'string',
              description: 'Select one option (legacy)',
              enum: ['opt1', 'opt2', 'opt3'],
              enumNames: ['Option One', 'Option Two', 'Option Three'],
            },
            untitledMulti: {
              type: 'array',
              description: 'Select multiple options',
              minItems: 1,
              maxItems: 3,
              items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
            },
            titledMulti: {
              type: 'array',
              description: 'Select multiple options with titles',
              minItems: 1,
              maxItems: 3,
              items: { anyOf: options('value', ['First Choice', 'Second Choice', 'Third Choice']) },
            },
          },
          required: [],
        },
      });
      if (asked.ask) return asked.ask;
      const r = asked.result;
      return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
    },
  );
  server.registerTool(
    'json_schema_2020_12_tool',
    {
      description: 'A tool whose input schema uses JSON Schema 2020-12 keywords',
      // Given as raw JSON Schema, so $schema, $defs and additionalProperties are listed as
      // written (a schema converted from zod would lose them).
      inputSchema: fromJsonSchema({
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
        properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
        additionalProperties: false,
      }),
    },
    async (args) => text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`),
  );

  server.registerResource(
    'static-text',
    'test://static-text',
    { title: 'Static Text Resource', description: 'A static text resource', mimeType: 'text/plain' },
    async () => ({
      contents: [{ uri: 'test://static-text', mimeType: 'text/plain', text: 'This is the content of the static text resource.' }],
    }),
  );
  server.registerResource(
    'static-binary',
    'test://static-binary',
    { title: 'Static Binary Resource', description: 'A static binary resource (an image)', mimeType: 'image/png' },
    async () => ({ contents: [{ uri: 'test://static-binary', mimeType: 'image/png', blob: PNG }] }),
  );
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { title: 'Resource Template', description: 'A template with one parameter', mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [
        {
          uri: uri.toString(),
          mimeType: 'application/json',
          text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
        },
      ],
    }),
  );
  server.registerResource(
    'watched-resource',
    'test://watched-resource',
    { title: 'Watched Resource', description: 'A resource to subscribe to', mimeType: 'text/plain' },
    async () => ({ contents: [{ uri: 'test://watched-resource', mimeType: 'text/plain', text: 'Watched resource content' }] }),
  );
  server.server.setRequestHandler('resources/subscribe', async () => ({}));
  server.server.setRequestHandler('resources/unsubscribe', async () => ({}));

  server.registerPrompt(
    'test_simple_prompt',
    { title: 'Simple Test Prompt', description: 'A prompt without arguments' },
    async () => ({ messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }] }),
  );
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      title: 'Prompt With Arguments',
      description: 'A prompt with two required arguments',
      argsSchema: z.object({ arg1: z.string().describe('First test argument'), arg2: z.string().describe('Second test argument') }),
    },
    async ({ arg1, arg2 }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    {
      title: 'Prompt With Embedded Resource',
      description: 'A prompt that embeds a resource',
      argsSchema: z.object({ resourceUri: z.string().describe('URI of the resource to embed') }),
    },
    async ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } },
        },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
      ],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_image',
    { title: 'Prompt With Image', description: 'A prompt with an image' },
    async () => ({
      messages: [
        { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
        { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
      ],
    }),
  );
  server.server.setRequestHandler('completion/complete', async () => ({
    completion: { values: [], total: 0, hasMore: false },
  }));
  registerInputRequired(server);
  registerDiagnostics(server);
  return server;
}

const args = process.argv.slice(2);
const portAt = args.indexOf('--http');
/** A stdio instance (one for the connection's life) adds what the diagnostic hooks add, and
 * announces its changed lists. */
function announced(server) {
  listeners.add((what) => {
    addDynamic(server, what, dynamic[what]);
    if (what === 'tools') server.sendToolListChanged();
    else server.sendPromptListChanged();
  });
  return server;
}

if (portAt < 0 && args.includes('--legacy')) {
  await announced(factory()).connect(new StdioServerTransport());
} else if (portAt < 0) {
  serveStdio(() => announced(factory()));
} else {
  const port = Number(args[portAt + 1] ?? 0);
  const modern = createMcpHandler(factory, { legacy: 'reject' });
  listeners.add((what) => (what === 'tools' ? modern.notify.toolsChanged() : modern.notify.promptsChanged()));
  const sessions = new Map();

  async function legacy(request) {
    const id = request.headers.get('mcp-session-id');
    if (id) {
      const transport = sessions.get(id);
      if (!transport) return Response.json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }, { status: 404 });
      return transport.handleRequest(request);
    }
    if (request.method !== 'POST') {
      return Response.json({ jsonrpc: '2.0', error: { code: -32000, message: 'Missing session ID' }, id: null }, { status: 400 });
    }
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => sessions.set(sid, transport),
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await factory().connect(transport);
    return transport.handleRequest(request);
  }

  async function handle(request) {
    const url = new URL(request.url);
    if (url.pathname !== '/mcp') return new Response('not found', { status: 404 });
    const refused =
      hostHeaderValidationResponse(request, localhostAllowedHostnames()) ??
      originValidationResponse(request, localhostAllowedOrigins());
    if (refused) return refused;
    return (await isLegacyRequest(request)) ? legacy(request) : modern.fetch(request);
  }

  const listener = http.createServer(async (req, res) => {
    try {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const body = Buffer.concat(chunks);
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) {
        if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
        else if (v !== undefined) headers.set(k, v);
      }
      const controller = new AbortController();
      res.on('close', () => controller.abort());
      const request = new Request(`http://${req.headers.host ?? '127.0.0.1'}${req.url}`, {
        method: req.method,
        headers,
        body: req.method === 'GET' || req.method === 'HEAD' || body.length === 0 ? undefined : body,
        signal: controller.signal,
      });
      const response = await handle(request);
      res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
      if (typeof res.flushHeaders === 'function') res.flushHeaders();
      if (response.body) {
        for await (const chunk of response.body) res.write(chunk);
      }
      res.end();
    } catch (e) {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(e));
    }
  });
  listener.listen(port, '127.0.0.1', () => {
    console.log(`listening http://127.0.0.1:${listener.address().port}/mcp`);
  });
}
