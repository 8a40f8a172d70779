import { existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

// Tools that try what an adapter must not allow (R12.3), for the adapter specs and the
// reliability phase: a process tool that leaves `setsid` descendants acting after its timeout,
// one that daemonizes and keeps stdout, an environment probe, and an HTTP tool that redirects
// to another origin. Each counts on its own side (a marker file, a request count).

/** Lines appended to the marker file by descendants that escaped the tool's process group. */
export const markerLines = (path: string): number => (existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter((l) => l.length > 0).length : 0);

/**
 * A tool that hangs past its timeout after starting descendants that act 1 s later: one in a
 * new session (`setsid`, out of the process group), one in a subshell, one holding stdout.
 * MARK is the marker file.
 */
export const SETSID_TOOL_SCRIPT = [
  'cat > /dev/null',
  'setsid sh -c \'sleep 1; echo setsid-acted >> "$MARK"\' < /dev/null &',
  '(sleep 1; echo subshell-acted >> "$MARK") &',
  'sh -c \'sleep 1; echo stdout-holder-acted >> "$MARK"; sleep 60\' &',
  'sleep 60',
].join('\n');

/**
 * A tool that daemonizes (double fork into a new session, stdout kept) and exits 0 at once:
 * its daemon acts 1 s later unless the tree ends with the tool.
 */
export const DAEMON_TOOL_SCRIPT = [
  'cat > /dev/null',
  '( setsid sh -c \'sleep 1; echo daemon-acted >> "$MARK"; sleep 60\' & ) ',
  'printf started',
  'exit 0',
].join('\n');

/** Names of the runtime's environment a tool must never see (set by the specs for the probe). */
export const RUNTIME_SECRETS: Readonly<Record<string, string>> = {
  PGPASSWORD: 'runtime-pg-password',
  DATABASE_URL: 'postgres://runtime:secret@127.0.0.1/db',
  QINGLONG_BARRIER_KEYRING_FILE: '/runtime/keyring.json',
  AWS_SECRET_ACCESS_KEY: 'runtime-cloud-key',
};

/** Run `body` with the runtime's secrets in process.env, as a runtime would have them. */
export const withRuntimeSecrets = async <T>(body: () => Promise<T>): Promise<T> => {
  const before = Object.fromEntries(Object.keys(RUNTIME_SECRETS).map((k) => [k, process.env[k]]));
  Object.assign(process.env, RUNTIME_SECRETS);
  try {
    return await body();
  } finally {
    for (const [k, v] of Object.entries(before)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
};

/** The environment probe: a node process that writes the names and values it sees to PROBE_OUT. */
export const envProbeCommand = {
  command: process.execPath,
  args: ['-e', 'require("fs").readFileSync(0); require("fs").writeFileSync(process.env.PROBE_OUT, JSON.stringify(process.env)); process.stdout.write("probed")'],
} as const;

export const probedEnv = (path: string): Record<string, string> => JSON.parse(readFileSync(path, 'utf8')) as Record<string, string>;

/** Of what a probe saw, the runtime's: any value or name of process.env it was not given. */
export const leaksOf = (seen: Readonly<Record<string, string>>, given: Readonly<Record<string, string>>): string[] =>
  Object.keys(seen).filter((name) => !(name in given) && (name in process.env || Object.values(process.env).includes(seen[name]!)));

export interface RedirectingTool {
  /** The tool's URL (origin A): every request is answered with `status` to the same path on origin B. */
  readonly url: string;
  readonly statusUrl: string;
  /** Requests that reached origin B (the other origin): must stay 0. */
  readonly crossOriginRequests: () => number;
  /** Requests origin A received. */
  readonly requests: () => number;
  status: number;
  close(): Promise<void>;
}

const listen = (server: Server): Promise<string> =>
  new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`));
  });

const close = (server: Server): Promise<void> =>
  new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

/** Two local servers: A redirects everything to B, B answers 200 `{"state":"succeeded"}` and counts. */
export const startRedirectingTool = async (): Promise<RedirectingTool> => {
  let a = 0;
  let b = 0;
  const other = createServer((req: IncomingMessage, res: ServerResponse) => {
    b++;
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"state":"succeeded"}');
  });
  const otherOrigin = await listen(other);
  const tool = { status: 307 };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    a++;
    req.resume();
    res.writeHead(tool.status, { location: `${otherOrigin}${req.url ?? '/'}`, 'content-type': 'application/json' }).end('{"moved":true}');
  });
  const origin = await listen(server);
  return Object.assign(tool, {
    url: `${origin}/act`,
    statusUrl: `${origin}/status`,
    crossOriginRequests: () => b,
    requests: () => a,
    close: async () => {
      await close(server);
      await close(other);
    },
  });
};

export const markerPath = (dir: string, name: string): string => join(dir, `${name}.marker`);
