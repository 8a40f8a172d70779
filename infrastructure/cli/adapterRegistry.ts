import { extname } from 'node:path';
import type { InspectAttempt, InspectReport, Ref } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { inspectionTicket } from '../../application/execution';
import type { AdapterRegistryDeclaration, AdapterRegistry } from '../adapters/registry';
import { readJsonInput } from './input';

// Where the operator CLI finds each reviewed adapter's inspect (R11.1): the registry the
// runtime declares (`defineAdapters`, `@qinglong/start-barrier/adapters`), loaded from the
// same file: a module (`adapters.mjs`, `.cjs`, `.js`) or its declaration as JSON (`-` reads
// stdin). Configuration of the operator's machine, never part of a record.
//
//   { "adapter.process.v3": { "kind": "process", "journalDir": "/var/lib/tool/journal" },
//     "adapter.http.v1":    { "kind": "http", "statusUrl": "http://127.0.0.1:8080/status" },
//     "adapter.mcp.v1":     { "kind": "mcp", "statusTool": "status",
//                          "transport": { "kind": "http", "url": "http://127.0.0.1:8081/mcp" } } }

export type { AdapterRegistry };

// The adapters are loaded by the commands that ask one (in-doubt --adapters, inspect), not by every CLI run.
const adapters = {
  process: () => require('../adapters/process') as typeof import('../adapters/process'),
  http: () => require('../adapters/http') as typeof import('../adapters/http'),
  mcp: () => require('../adapters/mcp') as typeof import('../adapters/mcp'),
  registry: () => require('../adapters/registry') as typeof import('../adapters/registry'),
};

const MODULES = new Set(['.mjs', '.cjs', '.js']);

/** `--adapters FILE`: a module is imported (the runtime's own declaration), anything else is strict JSON. */
export const readAdapterRegistry = async (file: string): Promise<AdapterRegistry> =>
  MODULES.has(extname(file)) ? adapters.registry().loadAdapters(file) : adapters.registry().defineAdapters((await readJsonInput(file, 'adapter registry')) as AdapterRegistryDeclaration);

/** What the adapter's tool says of a start, or why it cannot be asked. */
export type InspectAnswer = InspectReport | { readonly state: 'unavailable'; readonly why: 'adapter_not_configured' | 'adapter_has_no_inspect' };

const NO_INSPECT = { state: 'unavailable', why: 'adapter_has_no_inspect' } as const;

/**
 * Ask with a read-only ticket the library minted from the start's verified barrier (R12.1): it
 * can inspect, never start. `attempt` is the start's claims as the store holds them: the process
 * journal proves "never started" only against them (infrastructure/adapters/process.ts).
 */
export const inspectWith = async (registry: AdapterRegistry, authority: RecoverableStartBarrierAuthority, startId: string, attempt?: InspectAttempt): Promise<InspectAnswer> => {
  const ticket = await inspectionTicket(authority, startId);
  const adapter: Ref = ticket.adapter;
  const entry = registry.entry(adapter.id);
  if (entry === undefined) return { state: 'unavailable', why: 'adapter_not_configured' };
  switch (entry.kind) {
    case 'process':
      return adapters.process().inspectProcessJournal(entry.journalDir, ticket.startId, attempt);
    case 'http':
      // inspect only: the start URL is never called here
      if (entry.statusUrl === undefined) return NO_INSPECT;
      return adapters.http().httpAdapter({ ref: adapter, url: entry.statusUrl, statusUrl: entry.statusUrl }).inspect!(ticket);
    case 'mcp':
      if (entry.statusTool === undefined) return NO_INSPECT;
      return adapters.mcp().mcpAdapter({ ref: adapter, transport: entry.transport, tool: entry.statusTool, statusTool: entry.statusTool }).inspect!(ticket);
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
