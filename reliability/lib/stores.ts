import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RecoverableStartBarrierAuthority, StartStepHook } from '../../application/authority';
import type { EvidenceKeyringOptions } from '../../application/evidenceKeys';
import { openPostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import type { PlanStoreOptions } from '../../application/invocationPlans';
import { createDatabase } from '../../testkit/postgresHarness';
import { postgresRaw, sqliteRaw, type BackendName, type RawSql } from '../../testkit/rawSql';

// A fresh store per harness phase, on a real SQLite file or a real PostgreSQL database
// (created on the server the specs use, dropped afterwards). `target` is all a worker process
// needs to reach the same store.

export const BACKENDS: readonly BackendName[] = ['sqlite', 'postgres'];

export interface AuthorityOptions {
  readonly hook?: StartStepHook;
  /** PostgreSQL only: `false` opens without migrating (a read-only standby). */
  readonly migrate?: boolean;
  /** A deployment keyring (R9.4): every start is sealed and every verified read checks the seal. */
  readonly evidenceKeys?: EvidenceKeyringOptions;
  /** A plan keyring (R12.2, R12.4): execution opens only with one (the adapters phase). */
  readonly plans?: PlanStoreOptions;
}

export type AnyAuthority = RecoverableStartBarrierAuthority;

export const openAuthority = (backend: BackendName, target: string, options: AuthorityOptions = {}): Promise<AnyAuthority> => {
  const hooks = { ...(options.hook ? { hooks: { onStartStep: options.hook } } : {}), ...(options.evidenceKeys ? { evidenceKeys: options.evidenceKeys } : {}), ...(options.plans ? { plans: options.plans } : {}) };
  if (backend === 'sqlite') return openSqliteStartBarrier({ path: target, ...hooks });
  // No error listener of our own on its pool: the authority must survive its server going away.
  return openPostgresStartBarrier({ connectionString: target, ...hooks, ...(options.migrate === false ? { migrate: false } : {}) });
};

export interface Store {
  readonly backend: BackendName;
  /** SQLite file path or PostgreSQL connection string. */
  readonly target: string;
  /** Human label for reports (file or database name). */
  readonly label: string;
  open(options?: AuthorityOptions): Promise<AnyAuthority>;
  /** A privileged raw connection (superuser on PostgreSQL). */
  raw(): Promise<RawSql>;
  destroy(): Promise<void>;
}

export const freshStore = async (backend: BackendName, label: string): Promise<Store> => {
  if (backend === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), `reliability-${label}-`));
    const path = join(dir, 'barrier.db');
    await (await openSqliteStartBarrier({ path })).close();
    return {
      backend,
      target: path,
      label: path,
      open: (options) => openAuthority('sqlite', path, options),
      raw: async () => sqliteRaw(path),
      destroy: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const db = await createDatabase();
  await (await openAuthority('postgres', db.url)).close(); // migrate once, up front
  return {
    backend,
    target: db.url,
    label: `database ${db.name}`,
    open: (options) => openAuthority('postgres', db.url, options),
    raw: () => postgresRaw(db.url),
    destroy: () => db.drop(),
  };
};

/** Run `body` with a fresh store that is destroyed afterwards, whatever happens. */
export const withStore = async <T>(backend: BackendName, label: string, body: (store: Store) => Promise<T>): Promise<T> => {
  const store = await freshStore(backend, label);
  try {
    return await body(store);
  } finally {
    await store.destroy();
  }
};

export const withRaw = async <T>(store: Store, body: (raw: RawSql) => Promise<T>): Promise<T> => {
  const raw = await store.raw();
  try {
    return await body(raw);
  } finally {
    await raw.close();
  }
};
