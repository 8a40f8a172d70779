import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { mcpSdk } from './mcpSdk';
import { canonicalJson } from '../../domain/canonical';
import { Identity, decodeOrThrow, type Ref } from '../../domain/codecs';
import { checkedMcpOptions } from './options';
import { AllowlistStdioTransport } from './mcpStdio';
import { INSPECT_STATES, RETURNED_OUTPUT_BYTES, ValidationError, boundedText, outputDigestOf, type AdapterAnswer, type AdapterReport, type ExecutionTicket, type InspectReport, type InvocationPlan, type ToolAdapter, type ToolCallTelemetry } from '../../domain';
import { admitTicket } from '../../application/execution';
import { serverOf } from './http';

// The MCP adapter (R11.4): calls one tool on an MCP server through the official SDK, over stdio
// (a server process per call) or streamable HTTP, with the start id in the request metadata
// (`_meta["io.qinglong/startId"]`) so a server can dedupe on it. Bounded by the barrier's
// timeout (the SDK's request timeout, which also cancels the request on the server). A server
// that offers a status tool lets `inspect` answer; otherwise there is no inspect.

/** The request-metadata key that carries the start id (MCP `_meta`, prefixed as the spec asks). */
export const MCP_START_ID_META = 'io.qinglong/startId';

export type McpTransportOptions =
  | {
      readonly kind: 'stdio';
      readonly command: string;
      readonly args?: readonly string[];
      /** The server's whole environment (nothing of the runtime's is added, R12.3). */
      readonly env?: Readonly<Record<string, string>>;
      /** Give the server the runtime's PATH (default false). */
      readonly inheritPath?: boolean;
      readonly cwd?: string;
    }
  | { readonly kind: 'http'; readonly url: string };

export interface McpAdapterOptions {
  readonly ref: Ref;
  readonly transport: McpTransportOptions;
  /** The tool to call with the invocation plan's input as its arguments. */
  readonly tool: string;
  /** A tool answering `{ state }` for `{ startId }` (structured content or JSON text). */
  readonly statusTool?: string;
  /** The server dedupes on the start id in `_meta` (default false). */
  readonly dedupesOnStartId?: boolean;
}

/** A stdio server's whole environment: what the configuration names, the runtime's PATH only if asked (R12.3). */
const serverEnvOf = (t: Extract<McpTransportOptions, { kind: 'stdio' }>): Record<string, string> => {
  const env: Record<string, string> = {};
  if (t.inheritPath === true && typeof process.env.PATH === 'string') env.PATH = process.env.PATH;
  for (const [name, value] of Object.entries(t.env ?? {})) env[name] = value;
  return env;
};

const transportOf = (t: McpTransportOptions): Transport =>
  t.kind === 'stdio'
    ? new AllowlistStdioTransport({ command: t.command, args: t.args ?? [], env: serverEnvOf(t), ...(t.cwd === undefined ? {} : { cwd: t.cwd }) })
    : new (mcpSdk().StreamableHTTPClientTransport)(new URL(t.url));

/** One connection for one request: nothing is held between starts (no resident client). */
const withClient = async <T>(t: McpTransportOptions, timeoutMs: number, body: (c: Client) => Promise<T>): Promise<T> => {
  const client = new (mcpSdk().Client)({ name: 'qinglong-start-barrier', version: '1' });
  try {
    await client.connect(transportOf(t), { timeout: timeoutMs });
    return await body(client);
  } finally {
    await client.close().catch(() => undefined);
  }
};

const stateOf = (answer: unknown): InspectReport['state'] => {
  const fromObject = (o: unknown): unknown => (typeof o === 'object' && o !== null ? (o as { state?: unknown }).state : undefined);
  const result = (answer ?? {}) as { structuredContent?: unknown; content?: unknown };
  let state = fromObject(result.structuredContent);
  if (state === undefined && Array.isArray(result.content)) {
    const text = (result.content as { type?: unknown; text?: unknown }[]).find((c) => c.type === 'text' && typeof c.text === 'string')?.text as string | undefined;
    try {
      state = text === undefined ? undefined : fromObject(JSON.parse(text));
    } catch {
      state = undefined;
    }
  }
  return (INSPECT_STATES as readonly unknown[]).includes(state) ? (state as InspectReport['state']) : 'unknown';
};

/**
 * The tool call as an MCP client span (semantic conventions: `tools/call <tool>`, the MCP method
 * and tool name, JSON-RPC as the RPC system; the server's address over HTTP, a pipe over stdio).
 */
const mcpCallTelemetry = (options: McpAdapterOptions): ToolCallTelemetry => ({
  spanName: `tools/call ${options.tool}`,
  kind: 'client',
  attributes: {
    'mcp.method.name': 'tools/call',
    'gen_ai.tool.name': options.tool,
    'gen_ai.operation.name': 'execute_tool',
    'rpc.system': 'jsonrpc',
    'rpc.method': 'tools/call',
    'rpc.jsonrpc.version': '2.0',
    ...(options.transport.kind === 'http' ? { 'network.transport': 'tcp', 'network.protocol.name': 'http', ...serverOf(new URL(options.transport.url)) } : { 'network.transport': 'pipe' }),
  },
});

export const mcpAdapter = (input: McpAdapterOptions): ToolAdapter => {
  const options = checkedMcpOptions(input);
  mcpSdk(); // a missing SDK is DRIVER_MISSING when the adapter is made, not at its first start
  const start = async (ticket: ExecutionTicket, plan: InvocationPlan): Promise<AdapterReport | AdapterAnswer> => {
    // R12.1: a minted ticket and its opened plan, or no server is started or called.
    const context = admitTicket(ticket, options.ref, 'start', plan);
    const startId = decodeOrThrow(Identity, 'startId', context.barrier.startId);
    const args = plan.input;
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      throw new ValidationError('invocation plan', [{ path: 'input', reason: 'invalid_value', message: 'MCP tool arguments must be a JSON object' }]);
    }
    const deadline = Date.now() + context.timeoutMs;
    return withClient<AdapterAnswer>(options.transport, context.timeoutMs, async (client) => {
      const result = await client.callTool({ name: options.tool, arguments: args as Record<string, unknown>, _meta: { [MCP_START_ID_META]: startId } }, undefined, {
        timeout: Math.max(1, deadline - Date.now()),
      });
      const json = canonicalJson({ content: result.content ?? null, structuredContent: result.structuredContent ?? null });
      const out = outputDigestOf(json);
      // The result as the digest saw it, for the caller (bounded); never recorded.
      const bytes = Buffer.from(json, 'utf8');
      const output = { ...boundedText(bytes, RETURNED_OUTPUT_BYTES), bytes: bytes.byteLength };
      return result.isError === true ? { outcome: 'failed', code: 'tool_failed', ...out, output } : { outcome: 'completed', code: 'tool_succeeded', ...out, output };
    });
  };

  const inspect = async (ticket: ExecutionTicket): Promise<InspectReport> => {
    const startId = decodeOrThrow(Identity, 'startId', admitTicket(ticket, options.ref, 'inspect').startId);
    try {
      return await withClient(options.transport, 10_000, async (client) => ({ state: stateOf(await client.callTool({ name: options.statusTool!, arguments: { startId } }, undefined, { timeout: 10_000 })) }));
    } catch {
      return { state: 'unknown' };
    }
  };

  return {
    declaration: { kind: 'mcp', ref: options.ref, guarantees: { idempotentStart: options.dedupesOnStartId ?? false, enforcesTimeout: true } },
    telemetry: mcpCallTelemetry(options),
    start,
    ...(options.statusTool === undefined ? {} : { inspect }),
  };
};
