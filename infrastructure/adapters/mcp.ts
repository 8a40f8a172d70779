import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { canonicalJson } from '../../domain/canonical';
import { Identity, decodeOrThrow, type Ref } from '../../domain/codecs';
import { checkedMcpOptions } from './options';
import { INSPECT_STATES, ValidationError, outputDigestOf, type AdapterReport, type AdapterStartContext, type InspectReport, type InvocationPlan, type ToolAdapter, type ToolCallTelemetry } from '../../domain';
import { serverOf } from './http';

// The MCP adapter (R11.4): calls one tool on an MCP server through the official SDK, over stdio
// (a server process per call) or streamable HTTP, with the start id in the request metadata
// (`_meta["io.qinglong/startId"]`) so a server can dedupe on it. Bounded by the barrier's
// timeout (the SDK's request timeout, which also cancels the request on the server). A server
// that offers a status tool lets `inspect` answer; otherwise there is no inspect.

/** The request-metadata key that carries the start id (MCP `_meta`, prefixed as the spec asks). */
export const MCP_START_ID_META = 'io.qinglong/startId';

export type McpTransportOptions =
  | { readonly kind: 'stdio'; readonly command: string; readonly args?: readonly string[]; readonly env?: Readonly<Record<string, string>>; readonly cwd?: string }
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

const transportOf = (t: McpTransportOptions): Transport =>
  t.kind === 'stdio'
    ? new StdioClientTransport({
        command: t.command,
        args: [...(t.args ?? [])],
        ...(t.env === undefined ? {} : { env: { ...(process.env as Record<string, string>), ...t.env } }),
        ...(t.cwd === undefined ? {} : { cwd: t.cwd }),
        stderr: 'ignore',
      })
    : new StreamableHTTPClientTransport(new URL(t.url));

/** One connection for one request: nothing is held between starts (no resident client). */
const withClient = async <T>(t: McpTransportOptions, timeoutMs: number, body: (c: Client) => Promise<T>): Promise<T> => {
  const client = new Client({ name: 'qinglong-start-barrier', version: '1' });
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
  const start = async (context: AdapterStartContext, plan: InvocationPlan): Promise<AdapterReport> => {
    const startId = decodeOrThrow(Identity, 'startId', context.barrier.startId);
    const args = plan.input;
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      throw new ValidationError('invocation plan', [{ path: 'input', reason: 'invalid_value', message: 'MCP tool arguments must be a JSON object' }]);
    }
    const deadline = Date.now() + context.timeoutMs;
    return withClient(options.transport, context.timeoutMs, async (client) => {
      const result = await client.callTool({ name: options.tool, arguments: args as Record<string, unknown>, _meta: { [MCP_START_ID_META]: startId } }, undefined, {
        timeout: Math.max(1, deadline - Date.now()),
      });
      const out = outputDigestOf(canonicalJson({ content: result.content ?? null, structuredContent: result.structuredContent ?? null }));
      return result.isError === true ? { outcome: 'failed', code: 'tool_failed', ...out } : { outcome: 'completed', code: 'tool_succeeded', ...out };
    });
  };

  const inspect = async (startIdInput: string): Promise<InspectReport> => {
    const startId = decodeOrThrow(Identity, 'startId', startIdInput);
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
