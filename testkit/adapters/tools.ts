import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { nodeArgsOf } from '../workerProcess';

// Real tools for the adapter specs, the reliability phase and the README example: a shell
// command, an HTTP server and MCP servers (streamable HTTP in this process, stdio in a child),
// all on 127.0.0.1 or spawned here. Each counts its side effects on its own side, in an
// effects file (one line `<startId> <ok|fail>` per effect), so a count never depends on what
// the saga believes. Every wait is bounded.

/** How a tool misbehaves for one call. */
export type ToolMode =
  /** Acts and answers. */
  | 'ok'
  /** Acts and answers with an error (a failed tool). */
  | 'fail'
  /** Acts, then the answer is lost (HTTP: socket destroyed; stdio: the server exits). */
  | 'lose_response'
  /** Resets the connection before acting (no side effect). */
  | 'reset_before_act'
  /** Acts, then never answers (past any timeout). */
  | 'hang_after_act'
  /** Never acts and never answers. */
  | 'hang';

export const HANG_MS = 60_000;

export class EffectsFile {
  constructor(readonly path: string) {
    if (!existsSync(path)) writeFileSync(path, '');
  }
  private lines(): string[][] {
    return readFileSync(this.path, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => l.split(' '));
  }
  /** Side effects the tool made for one start. */
  count(startId: string): number {
    return this.lines().filter(([id]) => id === startId).length;
  }
  total(): number {
    return this.lines().length;
  }
  startIds(): Set<string> {
    return new Set(this.lines().map(([id]) => id!));
  }
  state(startId: string): 'not_started' | 'succeeded' | 'failed' {
    const mine = this.lines().filter(([id]) => id === startId);
    if (mine.length === 0) return 'not_started';
    return mine[0]![1] === 'fail' ? 'failed' : 'succeeded';
  }
  act(startId: string, ok: boolean): void {
    appendFileSync(this.path, `${startId} ${ok ? 'ok' : 'fail'}\n`);
  }
}

// ------------------------------------------------------------------ process tool (a shell script)

/**
 * The process tool: `/bin/sh -c SCRIPT`. It reads its input from stdin, appends the effect
 * line, echoes its input's length. TOOL_MODE picks the behaviour; QL_START_ID comes from the
 * adapter.
 */
export const PROCESS_TOOL_SCRIPT = [
  'input=$(cat)',
  'case "$TOOL_MODE" in',
  '  reset_before_act) kill -9 $$ ;;',
  '  hang) sleep 60; exit 0 ;;',
  'esac',
  'if [ "$TOOL_MODE" = fail ]; then printf "%s fail\\n" "$QL_START_ID" >> "$TOOL_EFFECTS"; exit 3; fi',
  'printf "%s ok\\n" "$QL_START_ID" >> "$TOOL_EFFECTS"',
  'if [ "$TOOL_MODE" = hang_after_act ]; then sleep 60; fi',
  'printf "%s" "${#input}"',
].join('\n');

export const processToolCommand = { command: '/bin/sh', args: ['-c', PROCESS_TOOL_SCRIPT] } as const;

// ------------------------------------------------------------------ HTTP tool server

export interface HttpTool {
  readonly url: string;
  readonly statusUrl: string;
  readonly effects: EffectsFile;
  /** The mode of the next calls (per start id when given). */
  mode: ToolMode;
  /** Requests received (every POST, repeats included). */
  readonly received: string[];
  /** Every request of any method (status reads included): what a forged ticket must leave at its count. */
  readonly requests: number;
  close(): Promise<void>;
}

const listen = (server: HttpServer): Promise<string> =>
  new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`));
  });

const closeServer = (server: HttpServer): Promise<void> =>
  new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });

/** An HTTP tool that honours Idempotency-Key (a repeated key replays the first answer) and has a status endpoint. */
export const startHttpTool = async (dir: string, name = 'http-tool'): Promise<HttpTool> => {
  const effects = new EffectsFile(join(dir, `${name}.effects`));
  const answered = new Map<string, { status: number; body: string }>();
  const timers = new Set<NodeJS.Timeout>();
  const tool: { mode: ToolMode; received: string[]; requests: number } = { mode: 'ok', received: [], requests: 0 };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    tool.requests++;
    void (async () => {
      const path = req.url ?? '/';
      if (req.method === 'GET' && path.startsWith('/status/')) {
        const state = effects.state(decodeURIComponent(path.slice('/status/'.length)));
        res.writeHead(state === 'not_started' ? 404 : 200, { 'content-type': 'application/json' }).end(JSON.stringify({ state }));
        return;
      }
      const body = await readBody(req);
      const key = String(req.headers['idempotency-key'] ?? '');
      tool.received.push(key);
      const previous = answered.get(key);
      if (key !== '' && (previous !== undefined || effects.count(key) > 0)) {
        // Idempotency-Key: the side effect happened once; answer what it answered (or 200).
        res.writeHead(previous?.status ?? 200, { 'content-type': 'application/json' }).end(previous?.body ?? '{"replayed":true}');
        return;
      }
      const mode = tool.mode;
      if (mode === 'reset_before_act') return void req.socket.destroy();
      if (mode === 'hang') return void timers.add(setTimeout(() => res.destroy(), HANG_MS));
      effects.act(key, mode !== 'fail');
      const answer = mode === 'fail' ? { status: 422, body: '{"error":"refused"}' } : { status: 200, body: JSON.stringify({ length: body.length }) };
      answered.set(key, answer);
      if (mode === 'lose_response') return void req.socket.destroy();
      if (mode === 'hang_after_act') return void timers.add(setTimeout(() => res.destroy(), HANG_MS));
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
    })();
  });
  const url = await listen(server);
  return Object.assign(tool, {
    url: `${url}/act`,
    statusUrl: `${url}/status`,
    effects,
    close: async () => {
      for (const t of timers) clearTimeout(t);
      await closeServer(server);
    },
  });
};

// ------------------------------------------------------------------ MCP tool (one server, two transports)

export const MCP_ACT_TOOL = 'act';
export const MCP_STATUS_TOOL = 'status';

/**
 * The MCP tool server: `act` makes the side effect once per start id (it dedupes on the start
 * id in `_meta`), `status` answers `{ state }` for a start id. `onLoss` is how this transport
 * loses an answer after acting.
 */
export const mcpToolServer = (effects: EffectsFile, modeOf: () => ToolMode, onLoss: () => void, onReset: () => void): Server => {
  const server = new Server({ name: 'qinglong-test-tool', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      { name: MCP_ACT_TOOL, inputSchema: { type: 'object' } },
      { name: MCP_STATUS_TOOL, inputSchema: { type: 'object', properties: { startId: { type: 'string' } } } },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    if (request.params.name === MCP_STATUS_TOOL) {
      const startId = String((request.params.arguments as { startId?: unknown } | undefined)?.startId ?? '');
      return { content: [{ type: 'text', text: JSON.stringify({ state: effects.state(startId) }) }], structuredContent: { state: effects.state(startId) } };
    }
    const startId = String((request.params._meta as Record<string, unknown> | undefined)?.['io.qinglong/startId'] ?? '');
    if (startId !== '' && effects.count(startId) > 0) return { content: [{ type: 'text', text: '{"replayed":true}' }] };
    const mode = modeOf();
    if (mode === 'reset_before_act') {
      onReset();
      return new Promise<never>(() => undefined);
    }
    if (mode === 'hang') return new Promise<never>(() => undefined);
    effects.act(startId, mode !== 'fail');
    if (mode === 'lose_response') {
      onLoss();
      return new Promise<never>(() => undefined);
    }
    if (mode === 'hang_after_act') return new Promise<never>(() => undefined);
    const length = JSON.stringify(request.params.arguments ?? {}).length;
    return mode === 'fail' ? { isError: true, content: [{ type: 'text', text: 'refused' }] } : { content: [{ type: 'text', text: JSON.stringify({ length }) }] };
  });
  return server;
};

export interface McpHttpTool {
  readonly url: string;
  readonly effects: EffectsFile;
  mode: ToolMode;
  close(): Promise<void>;
}

/** The MCP tool over streamable HTTP (stateless: one server and transport per request). */
export const startMcpHttpTool = async (dir: string, name = 'mcp-http-tool'): Promise<McpHttpTool> => {
  const effects = new EffectsFile(join(dir, `${name}.effects`));
  const tool: { mode: ToolMode } = { mode: 'ok' };
  const http = createServer((req, res) => {
    void (async () => {
      const drop = () => req.socket.destroy();
      const server = mcpToolServer(effects, () => tool.mode, drop, drop);
      const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true }) // no session id generator: stateless;
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      const raw = await readBody(req);
      await transport.handleRequest(req, res, raw.length === 0 ? undefined : JSON.parse(raw));
    })().catch(() => res.destroy());
  });
  const url = await listen(http);
  return Object.assign(tool, { url: `${url}/mcp`, effects, close: () => closeServer(http) });
};

/** The stdio server's command line: node runs `mcpStdioTool.ts` (through tsx, or its compiled twin: nodeArgsOf). */
export const mcpStdioCommand = (effectsPath: string, mode: ToolMode, probeOut?: string) => ({
  kind: 'stdio' as const,
  command: process.execPath,
  args: nodeArgsOf(join(__dirname, 'mcpStdioTool.ts')),
  env: { TOOL_EFFECTS: effectsPath, TOOL_MODE: mode, ...(probeOut === undefined ? {} : { PROBE_OUT: probeOut }) },
  cwd: join(__dirname, '..', '..'),
});
