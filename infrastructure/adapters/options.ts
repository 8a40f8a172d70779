import * as t from 'io-ts';
import { Ref, decodeSnapshotOrThrow, integer, refinedString, strictObject } from '../../domain/codecs';
import { ValidationError } from '../../domain/errors';

// The adapters' options (R10.1, R11.1): a deployment's configuration, checked when the adapter
// is made, before any start. An unknown option is refused rather than ignored: a misspelt
// `honoursIdempotencyKey` (say `honorsIdempotencyKey: false`) would leave the default, true,
// and the adapter would declare idempotent starts the tool does not have, so the saga could
// invoke it again after an unknown outcome. Each error is VALIDATION_FAILED naming the option.

export const text = (name: string) =>
  refinedString(name, (s) => (s.length > 0 && !s.includes('\u0000') ? undefined : { reason: 'invalid_value', text: `expected a non-empty string without NUL (${name})` }));

const isHttpUrl = (u: string): boolean => {
  try {
    const url = new URL(u);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
};
export const httpUrl = (name: string) => refinedString(name, (s) => (isHttpUrl(s) ? undefined : { reason: 'invalid_value', text: `expected an http: or https: URL (${name})` }));

export const Strings = t.readonlyArray(text('Argument'));
export const Env = t.record(text('Name'), t.string);
export const ByteBound = integer('ByteBound', 1, 2 ** 31);

const ProcessOptions = strictObject(
  'ProcessAdapterOptions',
  { ref: Ref, command: text('Command'), journalDir: text('JournalDir') },
  { args: Strings, env: Env, inheritPath: t.boolean, maxOutputBytes: ByteBound, containment: t.keyof({ 'pid-namespace': null, none: null }) },
  false,
);

const HttpOptions = strictObject(
  'HttpAdapterOptions',
  { ref: Ref, url: httpUrl('Url') },
  { statusUrl: httpUrl('StatusUrl'), honoursIdempotencyKey: t.boolean, maxResponseBytes: ByteBound, headers: Env },
  false,
);

const MCP_TRANSPORTS = {
  stdio: strictObject('McpStdioTransport', { kind: t.literal('stdio'), command: text('Command') }, { args: Strings, env: Env, inheritPath: t.boolean, cwd: text('Cwd') }, false),
  http: strictObject('McpHttpTransport', { kind: t.literal('http'), url: httpUrl('Url') }, {}, false),
} as const;
/** By its kind, so an error names the fields of the transport that was meant. */
export const McpTransport = new t.Type<unknown, unknown, unknown>(
  'McpTransport',
  (u): u is unknown => Object.values(MCP_TRANSPORTS).some((c) => c.is(u)),
  (u, c) => {
    const kind = typeof u === 'object' && u !== null ? (u as { kind?: unknown }).kind : undefined;
    const codec = kind === 'stdio' || kind === 'http' ? MCP_TRANSPORTS[kind] : undefined;
    return codec === undefined ? t.failure(u, c, 'expected { kind: "stdio", command } or { kind: "http", url }') : codec.validate(u, c);
  },
  t.identity,
);

const McpOptions = strictObject(
  'McpAdapterOptions',
  { ref: Ref, transport: McpTransport, tool: text('Tool') },
  { statusTool: text('StatusTool'), dedupesOnStartId: t.boolean },
  false,
);

/**
 * R12.3: a tool's environment is an allowlist written out in the configuration. The runtime's
 * whole environment (`env: process.env`) would hand the tool its database password and keys.
 */
export const refuseRuntimeEnv = (record: string, env: unknown, path: string): void => {
  if (env !== undefined && env === process.env) {
    throw new ValidationError(record, [{ path, reason: 'forbidden_value', message: "the runtime's whole environment is never passed to a tool: name each variable it needs" }]);
  }
};

// Checked as given (no plain-JSON snapshot), so that an environment object is seen as itself.
export const checkedProcessOptions = <O>(options: O): O => {
  decodeSnapshotOrThrow(ProcessOptions, 'processAdapter options', options);
  refuseRuntimeEnv('processAdapter options', (options as { env?: unknown }).env, 'env');
  return options;
};
export const checkedHttpOptions = <O>(options: O): O => (decodeSnapshotOrThrow(HttpOptions, 'httpAdapter options', options), options);
export const checkedMcpOptions = <O>(options: O): O => {
  decodeSnapshotOrThrow(McpOptions, 'mcpAdapter options', options);
  refuseRuntimeEnv('mcpAdapter options', (options as { transport?: { env?: unknown } }).transport?.env, 'transport.env');
  return options;
};
