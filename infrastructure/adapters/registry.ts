import { extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { readFileSync } from 'node:fs';
import * as t from 'io-ts';
import { Digest, decodeSnapshotOrThrow, strictObject } from '../../domain/codecs';
import { ExecutionRefusedError, ValidationError } from '../../domain/errors';
import { parseJsonBytes, type Ref, type ToolAdapter } from '../../domain';
import { ByteBound, Env, McpTransport, Strings, httpUrl, refuseRuntimeEnv, text } from './options';
import { processAdapter } from './process';
import type { Containment } from './processTree';
import { httpAdapter } from './http';
import { mcpAdapter, type McpTransportOptions } from './mcp';

// One declaration of the adapters a runtime uses (R11.1), keyed by the adapter id a barrier
// names (contracts.adapter.id): the runtime makes its adapters from it (`adapter(ref)`) and
// the operator CLI reads the same file (`--adapters adapters.mjs|json`) to reach each adapter's
// inspect. Configuration of a deployment, never part of a record. An entry is the adapter
// factory's options without `ref`, with its `kind` and, optionally, the reviewed `digest` the
// id stands for. An entry may say only how to inspect (process: journalDir; HTTP: statusUrl;
// MCP: transport and statusTool): the CLI needs no more, a start does.

export interface ProcessAdapterEntry {
  readonly kind: 'process';
  readonly digest?: string;
  readonly journalDir: string;
  readonly command?: string;
  readonly args?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly inheritPath?: boolean;
  readonly maxOutputBytes?: number;
  readonly containment?: Containment;
}
export interface HttpAdapterEntry {
  readonly kind: 'http';
  readonly digest?: string;
  readonly url?: string;
  readonly statusUrl?: string;
  readonly honoursIdempotencyKey?: boolean;
  readonly maxResponseBytes?: number;
  readonly headers?: Readonly<Record<string, string>>;
}
export interface McpAdapterEntry {
  readonly kind: 'mcp';
  readonly digest?: string;
  readonly transport: McpTransportOptions;
  readonly tool?: string;
  readonly statusTool?: string;
  readonly dedupesOnStartId?: boolean;
}
export type AdapterEntry = ProcessAdapterEntry | HttpAdapterEntry | McpAdapterEntry;
/** What `defineAdapters` takes: adapter id -> entry (a JSON file holds the same). */
export type AdapterRegistryDeclaration = Readonly<Record<string, AdapterEntry>>;

const ENTRIES = {
  process: strictObject(
    'ProcessAdapterEntry',
    { kind: t.literal('process'), journalDir: text('JournalDir') },
    { digest: Digest, command: text('Command'), args: Strings, env: Env, inheritPath: t.boolean, maxOutputBytes: ByteBound, containment: t.keyof({ 'pid-namespace': null, none: null }) },
    false,
  ),
  http: strictObject(
    'HttpAdapterEntry',
    { kind: t.literal('http') },
    { digest: Digest, url: httpUrl('Url'), statusUrl: httpUrl('StatusUrl'), honoursIdempotencyKey: t.boolean, maxResponseBytes: ByteBound, headers: Env },
    false,
  ),
  mcp: strictObject('McpAdapterEntry', { kind: t.literal('mcp'), transport: McpTransport }, { digest: Digest, tool: text('Tool'), statusTool: text('StatusTool'), dedupesOnStartId: t.boolean }, false),
} as const;

const RECORD = 'adapter registry';
const refused = (path: string, message: string, reason: 'invalid_value' | 'unknown_field' = 'invalid_value'): ValidationError => new ValidationError(RECORD, [{ path, reason, message }]);

/** Each issue's path under the adapter id it belongs to (`adapter.http.v1.statusUrl`). */
const underId = (id: string, e: unknown): unknown =>
  e instanceof ValidationError ? new ValidationError(RECORD, e.issues.map((i) => ({ ...i, path: i.path === '(root)' || i.path === '' ? id : `${id}.${i.path}` }))) : e;

const decodeEntry = (id: string, input: unknown): AdapterEntry => {
  const kind = typeof input === 'object' && input !== null ? (input as { kind?: unknown }).kind : undefined;
  if (kind !== 'process' && kind !== 'http' && kind !== 'mcp') throw refused(`${id}.kind`, 'expected "process", "http" or "mcp"');
  let entry: AdapterEntry;
  try {
    entry = decodeSnapshotOrThrow(ENTRIES[kind] as unknown as t.Type<AdapterEntry, AdapterEntry, unknown>, RECORD, input);
  } catch (e) {
    throw underId(id, e);
  }
  // R12.3: a tool's environment is written out, never the runtime's own.
  if (entry.kind === 'process') refuseRuntimeEnv(RECORD, entry.env, `${id}.env`);
  if (entry.kind === 'mcp') refuseRuntimeEnv(RECORD, (entry.transport as { env?: unknown }).env, `${id}.transport.env`);
  if (entry.kind === 'http' && entry.url === undefined && entry.statusUrl === undefined) throw refused(id, 'an HTTP adapter needs url (to start its tool) or statusUrl (to inspect it)');
  if (entry.kind === 'mcp' && entry.tool === undefined && entry.statusTool === undefined) throw refused(id, 'an MCP adapter needs tool (to start it) or statusTool (to inspect it)');
  return entry;
};

export interface AdapterRegistry {
  /** The declared adapter ids, in declaration order. */
  readonly ids: readonly string[];
  /** The declaration as given (plain data): what a CLI of another copy of this package decodes again. */
  readonly declaration: AdapterRegistryDeclaration;
  /** The entry of an adapter id, or undefined (an id such as `constructor` is a name like any other). */
  entry(id: string): AdapterEntry | undefined;
  /**
   * The adapter for the reviewed ref a plan names (`plan.contracts.adapter`), made from its
   * entry by the adapter's own factory. An id not declared is EXECUTION_REFUSED
   * `adapter_mismatch`, and so is a ref whose digest is not the one declared; an entry that
   * says only how to inspect is VALIDATION_FAILED naming the field a start needs.
   */
  adapter(ref: Ref): ToolAdapter;
}

const REGISTRY = Symbol.for('@qinglong/start-barrier/adapter-registry');

const isRegistry = (u: unknown): u is AdapterRegistry => typeof u === 'object' && u !== null && (u as Record<symbol, unknown>)[REGISTRY] === true;

const needs = (id: string, field: string, what: string): ValidationError => refused(`${id}.${field}`, `required to start the tool (this entry says only how to inspect it): ${what}`);

const adapterOf = (ref: Ref, e: AdapterEntry): ToolAdapter => {
  const { kind: _kind, digest: _digest, ...options } = e;
  switch (e.kind) {
    case 'process':
      if (e.command === undefined) throw needs(ref.id, 'command', 'the program to run');
      return processAdapter({ ...(options as Omit<ProcessAdapterEntry, 'kind' | 'digest'>), command: e.command, ref });
    case 'http':
      if (e.url === undefined) throw needs(ref.id, 'url', "the tool's endpoint");
      return httpAdapter({ ...(options as Omit<HttpAdapterEntry, 'kind' | 'digest'>), url: e.url, ref });
    case 'mcp':
      if (e.tool === undefined) throw needs(ref.id, 'tool', 'the MCP tool to call');
      return mcpAdapter({ ...(options as Omit<McpAdapterEntry, 'kind' | 'digest'>), tool: e.tool, ref });
    default: {
      const exhaustive: never = e;
      throw new Error(`unknown adapter kind ${String(exhaustive)}`);
    }
  }
};

/**
 * Declares the adapters a runtime uses, once: `export default defineAdapters({ ... })` in an
 * `adapters.mjs` the runtime imports and the CLI loads (`--adapters adapters.mjs`), or the same
 * object as an `adapters.json`. Every entry is checked now (VALIDATION_FAILED naming
 * `<adapter id>.<field>`; unknown fields are refused, never ignored). Another registry is
 * declared again from its declaration (a registry made by another copy of this package).
 */
export const defineAdapters = (declaration: AdapterRegistryDeclaration | AdapterRegistry): AdapterRegistry => {
  const input: unknown = isRegistry(declaration) ? declaration.declaration : declaration;
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw refused('(root)', 'expected { adapterId: { kind: process | http | mcp, ... } }');
  // A Map over own keys: an id such as `constructor`, `toString` or a JSON `__proto__` key is
  // just a name and never reaches Object.prototype.
  const entries = new Map<string, AdapterEntry>();
  for (const id of Object.keys(input)) {
    if (id.length === 0) throw refused('(root)', 'an adapter id must not be empty');
    entries.set(id, decodeEntry(id, (input as Record<string, unknown>)[id]));
  }
  const copy: Record<string, AdapterEntry> = Object.create(null) as Record<string, AdapterEntry>;
  for (const [id, e] of entries) copy[id] = e;
  const registry: AdapterRegistry = {
    ids: Object.freeze([...entries.keys()]),
    declaration: Object.freeze(copy),
    entry: (id) => entries.get(id),
    adapter: (ref) => {
      const e = entries.get(ref.id);
      if (e === undefined) throw new ExecutionRefusedError('adapter_mismatch', `no adapter ${ref.id} is declared in this registry`);
      if (e.digest !== undefined && e.digest !== ref.digest) throw new ExecutionRefusedError('adapter_mismatch', `adapter ${ref.id} is declared at ${e.digest}, the plan names ${ref.digest}`);
      return adapterOf(ref, e);
    },
  };
  Object.defineProperty(registry, REGISTRY, { value: true });
  return Object.freeze(registry);
};

const MODULE_EXTENSIONS = new Set(['.mjs', '.cjs', '.js']);
/** A real dynamic import (this package is CommonJS: tsc would turn `import()` into `require`, which cannot load an ES module). */
const importModule = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<Record<string, unknown>>;

/**
 * The registry a file declares: a module (`.mjs`, `.cjs`, `.js`) whose default export (or
 * `adapters` export) is `defineAdapters(...)` or its plain declaration, or a JSON file holding
 * the declaration (parsed strictly: duplicate keys, a BOM and lossy numbers are refused). A
 * module is code the operator wrote: loading it runs it.
 */
export const loadAdapters = async (file: string): Promise<AdapterRegistry> => {
  const path = resolve(file);
  if (MODULE_EXTENSIONS.has(extname(path))) {
    let loaded: Record<string, unknown>;
    try {
      loaded = await importModule(pathToFileURL(path).href);
    } catch (e) {
      throw refused('(file)', `cannot load ${file}: ${(e as NodeJS.ErrnoException).code ?? (e instanceof Error ? e.message : String(e))}`);
    }
    // A CommonJS module's `module.exports` arrives as the default.
    const value = loaded['default'] ?? loaded['adapters'];
    if (value === undefined) throw refused('(file)', `${file} exports no adapters: export default defineAdapters({ ... })`);
    return defineAdapters(value as AdapterRegistryDeclaration);
  }
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw refused('(file)', `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  return defineAdapters(parseJsonBytes(RECORD, bytes) as AdapterRegistryDeclaration);
};
