import * as t from 'io-ts';
import { isLeft } from 'fp-ts/Either';
import { ValidationError, type InspectAttempt, type InspectReport, type Ref } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { inspectionTicket } from '../../application/execution';
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
type Entry = t.TypeOf<typeof Entry>;
/**
 * Keyed by adapter id, a name a barrier carries: a Map, so an id such as `constructor`,
 * `toString` or `__proto__` is just another name and never reaches Object.prototype.
 */
export type AdapterRegistry = ReadonlyMap<string, Entry>;

const refused = (path: string, message: string): ValidationError => new ValidationError('adapter registry', [{ path, reason: 'invalid_value', message }]);

export const decodeAdapterRegistry = (input: unknown): AdapterRegistry => {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw refused('(root)', 'expected { adapterId: { kind: process | http | mcp, ... } }');
  const registry = new Map<string, Entry>();
  // Own keys as parsed: a JSON `__proto__` key is a name like any other (never a prototype).
  for (const id of Object.keys(input)) {
    const r = Entry.decode((input as Record<string, unknown>)[id]);
    if (isLeft(r)) {
      const first = r.left[0];
      const inner = first?.context.map((c) => c.key).filter((k) => k !== '').join('.');
      throw refused(inner ? `${id}.${inner}` : id, first?.message ?? 'expected { kind: process | http | mcp, ... }');
    }
    registry.set(id, r.right);
  }
  return registry;
};

/** What the adapter's tool says of a start, or why it cannot be asked. */
export type InspectAnswer = InspectReport | { readonly state: 'unavailable'; readonly why: 'adapter_not_configured' };

/**
 * Ask with a read-only ticket the library minted from the start's verified barrier (R12.1): it
 * can inspect, never start. `attempt` is the start's claims as the store holds them: the process
 * journal proves "never started" only against them (infrastructure/adapters/process.ts).
 */
export const inspectWith = async (registry: AdapterRegistry, authority: RecoverableStartBarrierAuthority, startId: string, attempt?: InspectAttempt): Promise<InspectAnswer> => {
  const ticket = await inspectionTicket(authority, startId);
  const adapter: Ref = ticket.adapter;
  const entry = registry.get(adapter.id);
  if (entry === undefined) return { state: 'unavailable', why: 'adapter_not_configured' };
  switch (entry.kind) {
    case 'process':
      return inspectProcessJournal(entry.journalDir, ticket.startId, attempt);
    case 'http':
      return httpAdapter({ ref: adapter, url: entry.statusUrl, statusUrl: entry.statusUrl }).inspect!(ticket);
    case 'mcp':
      return mcpAdapter({ ref: adapter, transport: entry.transport, tool: entry.statusTool, statusTool: entry.statusTool }).inspect!(ticket);
    default: {
      const _exhaustive: never = entry;
      throw new Error(`unknown adapter kind ${String(_exhaustive)}`);
    }
  }
};

/**
 * What each start's adapter says, each asked with the start's claims as the store holds them
 * (read through one claims reader, closed after).
 */
export const inspectEach = async (authority: RecoverableStartBarrierAuthority, registry: AdapterRegistry, starts: readonly { readonly startId: string }[]): Promise<InspectAnswer[]> => {
  const claims = authority.driverClaims();
  try {
    return await Promise.all(starts.map(async (s) => inspectWith(registry, authority, s.startId, { claims: await claims.history(s.startId) })));
  } finally {
    await claims.close();
  }
};
