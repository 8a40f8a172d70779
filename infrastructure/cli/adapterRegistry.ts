import * as t from 'io-ts';
import { isLeft } from 'fp-ts/Either';
import { ValidationError, type InspectReport, type Ref } from '../../domain';
import { inspectProcessJournal } from '../adapters/process';
import { httpAdapter } from '../adapters/http';
import { mcpAdapter } from '../adapters/mcp';

// Where the operator CLI finds each reviewed adapter's inspect (R11.1): a JSON file mapping
// the adapter id a barrier names (contracts.adapter.id) to how to ask its tool. Configuration
// of the operator's machine, never part of a record. Unknown fields are rejected.
//
//   { "adapter.process.v3": { "kind": "process", "journalDir": "/var/lib/tool/journal" },
//     "adapter.http.v1":    { "kind": "http", "statusUrl": "http://127.0.0.1:8080/status" },
//     "adapter.mcp.v1":     { "kind": "mcp", "statusTool": "status",
//                          "transport": { "kind": "http", "url": "http://127.0.0.1:8081/mcp" } } }

const exactly = <P extends t.Props>(name: string, props: P) =>
  new t.Type<t.TypeOf<t.TypeC<P>>, t.TypeOf<t.TypeC<P>>, unknown>(
    name,
    (u): u is t.TypeOf<t.TypeC<P>> => t.type(props).is(u),
    (u, c) => {
      if (typeof u === 'object' && u !== null) {
        const extra = Object.keys(u).find((k) => !(k in props));
        if (extra !== undefined) return t.failure(u, c, `unknown field "${extra}"`);
      }
      return t.type(props).validate(u, c);
    },
    t.identity,
  );

const Transport = t.union([
  exactly('StdioTransport', { kind: t.literal('stdio'), command: t.string, args: t.array(t.string) }),
  exactly('HttpTransport', { kind: t.literal('http'), url: t.string }),
]);
const Entry = t.union([
  exactly('ProcessInspect', { kind: t.literal('process'), journalDir: t.string }),
  exactly('HttpInspect', { kind: t.literal('http'), statusUrl: t.string }),
  exactly('McpInspect', { kind: t.literal('mcp'), statusTool: t.string, transport: Transport }),
]);
const Registry = t.record(t.string, Entry);
export type AdapterRegistry = t.TypeOf<typeof Registry>;

export const decodeAdapterRegistry = (input: unknown): AdapterRegistry => {
  const r = Registry.decode(input);
  if (isLeft(r)) {
    const first = r.left[0];
    const path = first?.context.map((c) => c.key).filter((k) => k !== '').join('.') || '(root)';
    throw new ValidationError('adapter registry', [{ path, reason: 'invalid_value', message: first?.message ?? 'expected { adapterId: { kind: process | http | mcp, ... } }' }]);
  }
  return r.right;
};

/** What the adapter's tool says of a start, or why it cannot be asked. */
export type InspectAnswer = InspectReport | { readonly state: 'unavailable'; readonly why: 'adapter_not_configured' };

export const inspectWith = async (registry: AdapterRegistry, adapter: Ref, startId: string): Promise<InspectAnswer> => {
  const entry = registry[adapter.id];
  if (entry === undefined) return { state: 'unavailable', why: 'adapter_not_configured' };
  switch (entry.kind) {
    case 'process':
      return inspectProcessJournal(entry.journalDir, startId);
    case 'http':
      return httpAdapter({ ref: adapter, url: entry.statusUrl, statusUrl: entry.statusUrl }).inspect!(startId);
    case 'mcp':
      return mcpAdapter({ ref: adapter, transport: entry.transport, tool: entry.statusTool, statusTool: entry.statusTool }).inspect!(startId);
    default: {
      const _exhaustive: never = entry;
      throw new Error(`unknown adapter kind ${String(_exhaustive)}`);
    }
  }
};
