import Database from 'better-sqlite3';
import { Client } from 'pg';
import { canonicalJson, CorruptRecordError } from '../domain';
import { buildScenario, type Scenario } from '../domain/scenario';
import type { RecoverableStartBarrierAuthority } from '../application/authority';
import { openPostgresStartBarrier } from '../infrastructure/postgres';
import { openSqliteStartBarrier } from '../infrastructure/sqlite';
import { eventChainDigest } from '../domain/eventChain';
import { tallyOf, type ForgeryTally, type Judgement } from './forgery';
import { FORGERY_KEYRING } from './keyedForgery';
import type { BackendName } from './rawSql';

// R14.1 forgeries against the moment a key is turned on. A store written without a key holds
// a running StepRun (its first tool run started). The forger holds the runtime's credentials
// (PostgreSQL: a second session as ql3_runtime; SQLite: another connection on the file) but
// not the key, and tries to make a StepRunLost for that StepRun read as written before the
// key: a transaction opened before keying, a position left free below the seal origin, a
// clock from before it. Were it legacy, the keyed runtime would make the StepRun ready and
// start it again: a second tool run that `verify` does not flag. Each must be refused by the
// database, or detected: the keyed runtime builds nothing on it and `verify` reports it.

export interface KeyingWindowForgery {
  readonly name: string;
  readonly backend: BackendName;
  /** What must become of it: refused by the database (by what `refusedBy` names), or detected. */
  readonly expected: 'refused' | 'detected';
  readonly refusedBy?: RegExp;
  /** `target` is a fresh, migrated store nobody has keyed: a SQLite path, or a PostgreSQL URL with the owner's rights. */
  attempt(target: string): Promise<Judgement>;
}

const clockSql = (b: BackendName) => (b === 'postgres' ? '(extract(epoch FROM transaction_timestamp()) * 1000)::bigint' : "CAST(unixepoch('subsec') * 1000 AS INTEGER)");

const open = (backend: BackendName, target: string, keyed: boolean): Promise<RecoverableStartBarrierAuthority> =>
  backend === 'sqlite'
    ? openSqliteStartBarrier({ path: target, ...(keyed ? { evidenceKeys: FORGERY_KEYRING } : {}) })
    : openPostgresStartBarrier({ connectionString: target, ...(keyed ? { evidenceKeys: FORGERY_KEYRING } : {}) });

/** The StepRunLost the forger writes for the StepRun's first tool run (ready v2, started v3, lost v4). */
const lostEvent = (s: Scenario, startId: string) => ({
  event_id: `forged-lost-${s.runId}`,
  event_type: 'StepRunLost',
  data_json: canonicalJson({ runId: s.runId, stepRunId: s.stepRunId, startId, stepRunVersion: 4, resolution: { decidedBy: 'intruder', reason: 'worker_lost' }, occurredAtMs: 3 }),
});

const lifecycle = async (a: RecoverableStartBarrierAuthority): Promise<void> => {
  for (const c of buildScenario().lifecycle) await a.runs.handle(c);
};

/** The legacy history: a StepRun whose first tool run started before any key. */
const legacy = async (unkeyed: RecoverableStartBarrierAuthority) => {
  const s = buildScenario();
  for (const c of s.lifecycle) await unkeyed.runs.handle(c);
  const r = await unkeyed.barriers.prepare(s.startCommand());
  return { s, startId: r.barrier.record.startId, head: s.lifecycle.length + 5 };
};

const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

/**
 * After the forgery went in: the keyed runtime tries to build on it (the StepRun made ready,
 * then a second attempt), and `verify` must report the unsealed event of that Run.
 */
const judge = async (keyed: RecoverableStartBarrierAuthority, s: Scenario): Promise<Judgement> => {
  const built = await (async () => {
    try {
      await keyed.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, requestedAtMs: 4 } });
      const view = await keyed.runs.getStepRun(s.runId, s.stepRunId);
      const r = await keyed.barriers.prepare(s.startCommand(view!, 'second'));
      return `the keyed runtime made the StepRun ready and ${r.outcome} a second attempt on it (a second tool run)`;
    } catch (e) {
      return e instanceof CorruptRecordError ? undefined : `the keyed runtime failed otherwise: ${message(e)}`;
    }
  })();
  if (built !== undefined) return { outcome: 'accepted', reason: built };
  const found = (await keyed.recovery.verify()).problems.filter((p) => p.kind === 'event_seal' && p.record.startsWith(`run-${s.runId}@`));
  return found.length === 0
    ? { outcome: 'accepted', reason: `verify did not report the unsealed StepRunLost (it reported: ${JSON.stringify((await keyed.recovery.verify()).problems).slice(0, 600)})` }
    : { outcome: 'detected', reason: `the keyed runtime refused to build on it (CORRUPT_RECORD); ${found.map((p) => `${p.kind} ${p.record}: ${p.problem}`).join(' | ')}` };
};

// ------------------------------------------------------------------ PostgreSQL

const runtimeSession = async (url: string): Promise<Client> => {
  const c = new Client({ connectionString: url, options: '-c role=ql3_runtime' });
  c.on('error', () => undefined);
  await c.connect();
  return c;
};

const INSERT_PG = (withPosition: boolean) =>
  withPosition
    ? `INSERT INTO ql3.events (global_position, stream_id, stream_position, event_id, event_type, data_json, committed_at_ms) OVERRIDING SYSTEM VALUE
       VALUES ($6::bigint, $1::text, $2::bigint, $3::text, $4::text, $5::text, ${clockSql('postgres')}) RETURNING global_position`
    : `INSERT INTO ql3.events (stream_id, stream_position, event_id, event_type, data_json, committed_at_ms)
       VALUES ($1::text, $2::bigint, $3::text, $4::text, $5::text, ${clockSql('postgres')}) RETURNING global_position`;

const pgLostParams = (s: Scenario, startId: string, head: number) => {
  const e = lostEvent(s, startId);
  return [`run-${s.runId}`, head + 1, e.event_id, e.event_type, e.data_json];
};

/**
 * One PostgreSQL attempt: the legacy Run, a forger's transaction opened before keying (its clock
 * fixed then), `before` inside it, keying (the keyed runtime's first write), `after` inside it,
 * COMMIT. Whatever the database refuses is `refused`; otherwise the keyed runtime is judged.
 */
const pgAttempt =
  (steps: {
    before(ctx: { tx: Client; url: string; s: Scenario; startId: string; head: number; unkeyed: RecoverableStartBarrierAuthority }): Promise<number | undefined>;
    after(ctx: { tx: Client; s: Scenario; startId: string; head: number; position: number | undefined }): Promise<void>;
  }) =>
  async (url: string): Promise<Judgement> => {
    const unkeyed = await open('postgres', url, false);
    const tx = await runtimeSession(url);
    let keyed: RecoverableStartBarrierAuthority | undefined;
    try {
      const { s, startId, head } = await legacy(unkeyed);
      await tx.query('BEGIN');
      await tx.query('SELECT 1'); // the transaction, and its clock, start here
      const position = await steps.before({ tx, url, s, startId, head, unkeyed });
      keyed = await open('postgres', url, true);
      await lifecycle(keyed); // keying: the first keyed transaction stores the seal origin
      try {
        await steps.after({ tx, s, startId, head, position });
        await tx.query('COMMIT');
      } catch (e) {
        await tx.query('ROLLBACK').catch(() => undefined);
        return { outcome: 'refused', reason: message(e) };
      }
      return await judge(keyed, s);
    } finally {
      await tx.end().catch(() => undefined);
      await unkeyed.close();
      await keyed?.close();
    }
  };

/** A position the sequence hands out and a rolled-back insert leaves free; then legacy writes go past it. */
const freePosition = async (url: string, s: Scenario, startId: string, head: number, unkeyed: RecoverableStartBarrierAuthority): Promise<number> => {
  const other = await runtimeSession(url);
  try {
    await other.query('BEGIN');
    const { rows } = await other.query<{ global_position: string }>(INSERT_PG(false), pgLostParams(s, startId, head));
    await other.query('ROLLBACK');
    await lifecycle(unkeyed);
    return Number(rows[0]!.global_position);
  } finally {
    await other.end().catch(() => undefined);
  }
};

export const PG_KEYING_WINDOW_FORGERIES: readonly KeyingWindowForgery[] = [
  {
    name: 'keying window: a runtime transaction opened before keying leaves a free position, then after keying puts a StepRunLost into it below the origin (OVERRIDING SYSTEM VALUE, the old clock)',
    backend: 'postgres',
    expected: 'refused',
    refusedBy: /permission denied for table events/,
    attempt: pgAttempt({
      before: async ({ url, s, startId, head, unkeyed }) => freePosition(url, s, startId, head, unkeyed),
      after: async ({ tx, s, startId, head, position }) => void (await tx.query(INSERT_PG(true), [...pgLostParams(s, startId, head), position])),
    }),
  },
  {
    name: 'keying window: a runtime transaction that straddles keying: its StepRunLost took a position before keying, legacy writes went past it, it commits after keying with the old clock',
    backend: 'postgres',
    expected: 'detected',
    attempt: pgAttempt({
      before: async ({ tx, s, startId, head, unkeyed }) => {
        await tx.query(INSERT_PG(false), pgLostParams(s, startId, head));
        await lifecycle(unkeyed);
        return undefined;
      },
      after: async () => undefined,
    }),
  },
  {
    name: 'keying window: a gap left before the origin and a clock from before it: a runtime transaction opened before keying appends its StepRunLost after keying (the position the sequence gives)',
    backend: 'postgres',
    expected: 'detected',
    attempt: pgAttempt({
      before: async ({ url, s, startId, head, unkeyed }) => freePosition(url, s, startId, head, unkeyed),
      after: async ({ tx, s, startId, head }) => void (await tx.query(INSERT_PG(false), pgLostParams(s, startId, head))),
    }),
  },
];

// ------------------------------------------------------------------ SQLite

const INSERT_SQLITE = `INSERT INTO events (global_position, stream_id, stream_position, event_id, event_type, data_json, committed_at_ms, chain_digest)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;

/** The forger's StepRunLost as the file stores it: the chain link it must carry, its own clock and position. */
const sqliteLostRow = (db: Database.Database, s: Scenario, startId: string, head: number, position: number | null, clockMs: number): unknown[] => {
  const e = lostEvent(s, startId);
  const previous = (db.prepare('SELECT chain_digest FROM events WHERE stream_id = ? AND stream_position = ?').pluck().get(`run-${s.runId}`, head) as string) ?? '';
  const row = { stream_id: `run-${s.runId}`, stream_position: head + 1, ...e, committed_at_ms: clockMs };
  return [position, row.stream_id, row.stream_position, row.event_id, row.event_type, row.data_json, clockMs, eventChainDigest(previous, row)];
};

/**
 * One SQLite attempt: the legacy Run; the forger's connection notes the clock and leaves the
 * next positions free (sqlite_sequence moved on, as anyone who writes the file can); legacy
 * writes go past them; keying; then `forge` puts a StepRunLost into the first free position,
 * below the origin, with the clock from before keying.
 */
const sqliteFreePositionAttempt =
  (forge: (ctx: { db: Database.Database; path: string; s: Scenario; startId: string; head: number; free: number; clock: number }) => Promise<void>) =>
  async (path: string): Promise<Judgement> => {
    const unkeyed = await open('sqlite', path, false);
    const forger = new Database(path);
    forger.pragma('busy_timeout = 10000');
    let keyed: RecoverableStartBarrierAuthority | undefined;
    try {
      const { s, startId, head } = await legacy(unkeyed);
      const clock = forger.prepare(`SELECT ${clockSql('sqlite')} AS now`).pluck().get() as number;
      const free = (forger.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'events'").pluck().get() as number) + 1;
      forger.prepare("UPDATE sqlite_sequence SET seq = seq + 5 WHERE name = 'events'").run();
      await lifecycle(unkeyed);
      await new Promise((r) => setTimeout(r, 5)); // keying happens after the forger's clock
      keyed = await open('sqlite', path, true);
      await lifecycle(keyed);
      try {
        await forge({ db: forger, path, s, startId, head, free, clock });
      } catch (e) {
        return { outcome: 'refused', reason: message(e) };
      }
      return await judge(keyed, s);
    } finally {
      forger.close();
      await unkeyed.close();
      await keyed?.close();
    }
  };

export const SQLITE_KEYING_WINDOW_FORGERIES: readonly KeyingWindowForgery[] = [
  {
    name: 'keying window: another connection leaves positions free before keying, then after keying writes a StepRunLost into one below the origin with a clock from before it',
    backend: 'sqlite',
    expected: 'refused',
    refusedBy: /global position is the next one/,
    attempt: sqliteFreePositionAttempt(async ({ db, s, startId, head, free, clock }) => void db.prepare(INSERT_SQLITE).run(...sqliteLostRow(db, s, startId, head, free, clock))),
  },
  {
    name: 'keying window: past every trigger of the file: a StepRunLost appended without the key, then moved into a position left free before keying, with a clock from before it (the frozen set alone stands)',
    backend: 'sqlite',
    expected: 'detected',
    attempt: sqliteFreePositionAttempt(async ({ db, path, s, head, free, clock }) => {
      // the product without the key appends it with every head it moves, then the file's guards go and come back
      const unkeyed = await open('sqlite', path, false);
      try {
        await unkeyed.runs.handle({ type: 'MarkStepRunLost', data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'intruder', reason: 'worker_lost', requestedAtMs: 3 } });
      } finally {
        await unkeyed.close();
      }
      const guards = db.prepare("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name IN ('events_no_update', 'events_position_is_next')").pluck().all() as string[];
      const stream = `run-${s.runId}`;
      const row = db.prepare('SELECT stream_id, stream_position, event_id, event_type, data_json FROM events WHERE stream_id = ? AND stream_position = ?').get(stream, head + 1) as { stream_id: string; stream_position: number; event_id: string; event_type: string; data_json: string };
      const previous = db.prepare('SELECT chain_digest FROM events WHERE stream_id = ? AND stream_position = ?').pluck().get(stream, head) as string;
      const chain = eventChainDigest(previous, { ...row, committed_at_ms: clock });
      db.transaction(() => {
        db.exec('DROP TRIGGER events_no_update; DROP TRIGGER IF EXISTS events_position_is_next');
        db.prepare('UPDATE events SET global_position = ?, committed_at_ms = ?, chain_digest = ? WHERE event_id = ?').run(free, clock, chain, row.event_id);
        for (const g of guards) db.exec(g);
      })();
    }),
  },
  {
    name: 'keying window: a connection whose transaction straddles keying (its snapshot and clock from before) appends a StepRunLost after keying',
    backend: 'sqlite',
    expected: 'refused',
    refusedBy: /SQLITE_BUSY|database is locked/,
    attempt: async (path) => {
      const unkeyed = await open('sqlite', path, false);
      const forger = new Database(path);
      forger.pragma('busy_timeout = 10000');
      let keyed: RecoverableStartBarrierAuthority | undefined;
      try {
        const { s, startId, head } = await legacy(unkeyed);
        forger.exec('BEGIN');
        const clock = forger.prepare(`SELECT ${clockSql('sqlite')} AS now`).pluck().get() as number;
        forger.prepare('SELECT count(*) FROM events').get(); // the read that takes its snapshot
        await new Promise((r) => setTimeout(r, 5));
        keyed = await open('sqlite', path, true);
        await lifecycle(keyed);
        try {
          forger.prepare(INSERT_SQLITE).run(...sqliteLostRow(forger, s, startId, head, null, clock));
          forger.exec('COMMIT');
        } catch (e) {
          if (forger.inTransaction) forger.exec('ROLLBACK');
          return { outcome: 'refused', reason: message(e) };
        }
        return await judge(keyed, s);
      } finally {
        forger.close();
        await unkeyed.close();
        await keyed?.close();
      }
    },
  },
];

export const keyingWindowForgeries = (backend: BackendName): readonly KeyingWindowForgery[] => (backend === 'sqlite' ? SQLITE_KEYING_WINDOW_FORGERIES : PG_KEYING_WINDOW_FORGERIES);

/** Every keying-window forgery of one backend, each on a store of its own (keying happens once per store). */
export const tryKeyingWindowForgeries = async (backend: BackendName, fresh: () => Promise<{ readonly target: string; destroy(): Promise<void> }>): Promise<ForgeryTally> => {
  const outcomes: ({ name: string } & Judgement)[] = [];
  for (const f of keyingWindowForgeries(backend)) {
    const store = await fresh();
    try {
      outcomes.push({ name: f.name, ...(await f.attempt(store.target)) });
    } finally {
      await store.destroy();
    }
  }
  return tallyOf(outcomes);
};
