import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { isCallerOwned, isSqliteError, openSqliteConnection } from './connection';
import type { SqliteDatabase } from './database';
import {
  assertExpectedVersionMatchesCurrent,
  type AppendToStreamOptions,
  type AppendToStreamResultWithGlobalPosition,
  type EventStore,
  type EventStoreSession,
  type EventStoreSessionFactory,
  type ReadEvent,
  type ReadEventMetadataWithGlobalPosition,
  type ReadStreamOptions,
  type ReadStreamResult,
} from '@event-driven-io/emmett';
import {
  ConcurrencyExhaustedError,
  CorruptRecordError,
  SemanticConflictError,
  ValidationError,
  TransactionTimeoutError,
  canonicalJson,
  decodeStartCommand,
  streamNameOf,
  type ReplayHits,
  type ReplayIdentity,
  type ReplayKeys,
  type RunState,
  type RunStreamEvent,
  type StartFacts,
  REPLAY_IDENTITIES,
  noReplayHits,
} from '../../domain';
import { attemptValue, runRowOf, startRowsOf, startEventJsonOf, stepRunRowOf, naturalEventIdOf, type BarrierRow, type ReplayIdentityRow, type RunRow, type StepRunRow } from '../../projections/rows';
import { decodeRunRow, decodeStepRunRow, runStateOf } from '../../projections/runState';
import { startEventPositions, storedEventOf, verifyStartRows, type EventRow } from '../../projections/verifyRows';
import type {
  AppendOutcome,
  PrepareResult,
  RecoverableStartBarrierAuthority,
  RecoveryApi,
  StartStepHook,
  StepRunView,
  StoredBarrier,
  StoredEvent,
} from '../authority';
import { loadMigrations, planMigrations, MigrationError } from '../migrations';
import { SerialExecutor } from '../serial';
import {
  decodeLifecycle,
  runAppendTransaction,
  runLifecycleTransaction,
  runStartTransaction,
  type LifecycleUnitOfWork,
  type StartUnitOfWork,
} from '../startProtocol';
import * as SQL from './sql';
import { outcomeRowOf } from '../../projections/recovery';
import { createRecoveryApi } from '../recovery';
import { createSqliteRecoveryView } from './recovery';
import { INSERT_OUTCOME } from './recoverySql';

export type SqliteStartBarrierOptions = SqliteStartBarrierSettings &
  (
    | { /** Database file; created and migrated if absent. */ readonly path: string; readonly database?: undefined }
    | { /** A better-sqlite3 Database you opened and own (closing the authority leaves it open); it is migrated and its pragmas set. */ readonly database: SqliteDatabase; readonly path?: undefined }
  );

export interface SqliteStartBarrierSettings {
  /**
   * FULL (default): a committed start survives power loss. NORMAL: in WAL mode a commit is
   * durable against a process crash but the last commits may roll back on power loss.
   */
  readonly synchronous?: 'FULL' | 'NORMAL';
  /** How long to wait for another process's write lock before TRANSACTION_TIMEOUT (default 5 s). */
  readonly busyTimeoutMs?: number;
  /** Fault injection inside the start transaction (specs only). */
  readonly hooks?: { readonly onStartStep?: StartStepHook };
}

/** emmett's event store over the Run streams, with a transactional session (`withSession`). */
export type RunEventStore = EventStore<ReadEventMetadataWithGlobalPosition> & EventStoreSessionFactory<EventStore<ReadEventMetadataWithGlobalPosition>>;

export interface SqliteStartBarrier extends RecoverableStartBarrierAuthority {
  readonly backend: 'sqlite';
  /**
   * The Run streams as an emmett `EventStore`, so emmett's `CommandHandler` can drive
   * orchestration's lifecycle in one `BEGIN IMMEDIATE` (`withSession`). Every expected-version
   * mode is enforced; start facts can only be appended by `barriers.prepare`.
   */
  readonly eventStore: RunEventStore;
  /** The single connection (the operation authority), a better-sqlite3 `Database`. Exposed for inspection tools and specs. */
  readonly db: SqliteDatabase;
}

type Statement = Database.Statement;

const UNIQUE_TO_IDENTITY: Record<string, ReplayIdentity> = {
  'events.event_id': 'runEventId',
  'security_audit_events.audit_event_id': 'auditEventId',
  'trace_anchors.trace_id': 'traceId',
  'audit_receipts.audit_receipt_id': 'auditReceiptId',
  'audit_receipts.audit_event_id': 'auditEventId',
  'audit_receipts.trace_id': 'traceId',
  'step_run_mutations.mutation_id': 'mutationId',
  'step_run_mutations.run_event_id': 'runEventId',
  'tool_execution_start_barriers.start_id': 'startId',
  'tool_execution_start_barriers.mutation_id': 'mutationId',
  'tool_execution_start_barriers.run_event_id': 'runEventId',
  'tool_execution_start_barriers.trace_id': 'traceId',
  'tool_execution_start_barriers.audit_event_id': 'auditEventId',
  'tool_execution_start_barriers.audit_receipt_id': 'auditReceiptId',
};

/** Driver errors never leave the adapter raw: busy is a timeout, a unique hit is a conflict. */
const mapSqliteError = (e: unknown, startId?: string): unknown => {
  if (!isSqliteError(e)) return e;
  if (e.code === 'SQLITE_BUSY' || e.code === 'SQLITE_BUSY_TIMEOUT') return new TransactionTimeoutError('busy', `database is locked by another writer (${e.message})`);
  if (e.code === 'SQLITE_CONSTRAINT_UNIQUE' || e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    const column = /failed: ([\w.]+)/.exec(e.message)?.[1] ?? '';
    const identity = UNIQUE_TO_IDENTITY[column];
    if (identity !== undefined) return new SemanticConflictError(identity, column, undefined, `${identity} is already used by another record (${column})${startId ? ` while starting ${startId}` : ''}`);
  }
  return e;
};

export const openSqliteStartBarrier = async (options: SqliteStartBarrierOptions): Promise<SqliteStartBarrier> => {
  const db = openSqliteConnection(options);
  try {
    for (const p of SQL.PRAGMAS(options.synchronous ?? 'FULL', options.busyTimeoutMs ?? 5000)) db.pragma(p);
    migrate(db);
  } catch (e) {
    if (!isCallerOwned(db)) db.close();
    throw mapSqliteError(e);
  }
  return new SqliteAuthority(db, options.hooks?.onStartStep);
};

const migrate = (db: Database.Database): void => {
  db.exec(SQL.MIGRATIONS_TABLE);
  const known = loadMigrations('sqlite');
  db.exec('BEGIN IMMEDIATE');
  try {
    const applied = db.prepare(SQL.SELECT_APPLIED).all() as { name: string; checksum: string }[];
    for (const m of planMigrations(known, applied)) {
      db.exec(m.sql);
      db.prepare(SQL.INSERT_APPLIED).run(m.name, m.checksum, Date.now());
    }
    db.exec('COMMIT');
  } catch (e) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw e instanceof MigrationError ? e : e;
  }
};

class SqliteAuthority implements SqliteStartBarrier {
  readonly backend = 'sqlite' as const;
  private readonly serial = new SerialExecutor();
  private readonly s: Record<string, Statement>;
  private closed = false;

  constructor(
    readonly db: Database.Database,
    private readonly hook: StartStepHook | undefined,
  ) {
    const prepare = (sql: string) => db.prepare(sql);
    this.s = {
      now: prepare(SQL.NOW_MS),
      lookup: prepare(SQL.LOOKUP_REPLAY),
      identitiesOfStart: prepare(SQL.IDENTITIES_OF_START),
      runHead: prepare(SQL.SELECT_RUN_HEAD),
      streamVersion: prepare(SQL.SELECT_STREAM_VERSION),
      stepRun: prepare(SQL.SELECT_STEP_RUN),
      insertStream: prepare(SQL.INSERT_STREAM),
      casStream: prepare(SQL.CAS_STREAM),
      insertEvent: prepare(SQL.INSERT_EVENT),
      streamEvents: prepare(SQL.SELECT_STREAM_EVENTS),
      insertRun: prepare(SQL.INSERT_RUN),
      casRun: prepare(SQL.CAS_RUN),
      upsertStepRun: prepare(SQL.UPSERT_STEP_RUN),
      casStepRun: prepare(SQL.CAS_STEP_RUN),
      insertAudit: prepare(SQL.INSERT_AUDIT),
      insertTrace: prepare(SQL.INSERT_TRACE),
      insertReceipt: prepare(SQL.INSERT_RECEIPT),
      insertMutation: prepare(SQL.INSERT_MUTATION),
      insertBarrier: prepare(SQL.INSERT_BARRIER),
      insertIdentity: prepare(SQL.INSERT_IDENTITY),
      insertOutcome: prepare(INSERT_OUTCOME),
      barrier: prepare(SQL.SELECT_BARRIER),
      audit: prepare(SQL.SELECT_AUDIT),
      trace: prepare(SQL.SELECT_TRACE),
      receipt: prepare(SQL.SELECT_RECEIPT),
      mutation: prepare(SQL.SELECT_MUTATION),
      attempt: prepare(SQL.SELECT_ATTEMPT),
    };
  }

  // ---------------------------------------------------------------- transactions

  /** One `BEGIN IMMEDIATE` per operation on the one connection (R5.1, R6.3). */
  private write<T>(body: () => Promise<T>, startId?: string): Promise<T> {
    return this.serial.run(async () => {
      this.assertOpen();
      try {
        this.db.exec('BEGIN IMMEDIATE');
      } catch (e) {
        throw mapSqliteError(e, startId);
      }
      try {
        const result = await body();
        this.db.exec('COMMIT');
        return result;
      } catch (e) {
        if (this.db.inTransaction) this.db.exec('ROLLBACK');
        throw mapSqliteError(e, startId);
      }
    });
  }

  /** Reads run in a deferred transaction so every row comes from one snapshot. */
  private read<T>(body: () => T): Promise<T> {
    return this.serial.run(async () => {
      this.assertOpen();
      this.db.exec('BEGIN DEFERRED');
      try {
        return body();
      } finally {
        if (this.db.inTransaction) this.db.exec('COMMIT');
      }
    });
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the SQLite start barrier authority is closed');
  }

  /** `read` for async bodies (the recovery view): one snapshot, still one operation at a time. */
  private snapshot<T>(body: () => Promise<T>): Promise<T> {
    return this.serial.run(async () => {
      this.assertOpen();
      this.db.exec('BEGIN DEFERRED');
      try {
        return await body();
      } finally {
        if (this.db.inTransaction) this.db.exec('COMMIT');
      }
    });
  }

  private nowMs(): number {
    return (this.s.now!.get() as { now_ms: number }).now_ms;
  }

  // ---------------------------------------------------------------- reads shared by both paths

  private loadRunState(runId: string, stepRunIds: readonly string[]): RunState {
    const head = this.s.runHead!.get(streamNameOf(runId), runId) as (RunRow & { stream_version: number | null }) | undefined;
    if (head === undefined) {
      const stream = this.s.streamVersion!.get(streamNameOf(runId)) as { version: number } | undefined;
      if (stream !== undefined) throw new CorruptRecordError('run', runId, 'stream exists but its run head is missing');
      return runStateOf(null, []);
    }
    const run = decodeRunRow(head, head.stream_version);
    const stepRuns = stepRunIds
      .map((id) => this.s.stepRun!.get(runId, id) as StepRunRow | undefined)
      .filter((r): r is StepRunRow => r !== undefined)
      .map(decodeStepRunRow);
    return runStateOf(run, stepRuns);
  }

  private lookupReplay(keys: ReplayKeys): ReplayHits {
    const rows = this.s.lookup!.all(
      keys.startId,
      keys.mutationId,
      keys.runEventId,
      keys.traceId,
      keys.auditEventId,
      keys.auditReceiptId,
      attemptValue(keys.attempt.runId, keys.attempt.stepRunId, keys.attempt.startedStepRunVersion),
    ) as ReplayIdentityRow[];
    const hits = noReplayHits() as Record<ReplayIdentity, { startId: string; commandDigest: string }[]>;
    for (const r of rows) {
      if (!(REPLAY_IDENTITIES as readonly string[]).includes(r.identity)) throw new CorruptRecordError('replay index', r.value, `unknown identity ${r.identity}`);
      hits[r.identity] = [...hits[r.identity], { startId: r.start_id, commandDigest: r.command_digest }];
    }
    return hits;
  }

  private readBarrierSync(startId: string): StoredBarrier | null {
    const barrier = this.s.barrier!.get(startId) as BarrierRow | undefined;
    if (barrier === undefined) return null;
    let sequence = 0;
    let probes: string[] = [];
    try {
      const b = JSON.parse(barrier.barrier_json) as {
        runEvent?: { runEventSequence?: number; runEventId?: string };
        mutation?: { mutationId?: string };
        trace?: { traceId?: string };
        audit?: { auditEventId?: string; auditReceiptId?: string };
        runId?: string;
        stepRunId?: string;
        attempt?: { startedStepRunVersion?: number };
      };
      sequence = Number(b.runEvent?.runEventSequence ?? 0);
      probes = [
        startId,
        String(b.mutation?.mutationId),
        String(b.runEvent?.runEventId),
        String(b.trace?.traceId),
        String(b.audit?.auditEventId),
        String(b.audit?.auditReceiptId),
        attemptValue(String(b.runId), String(b.stepRunId), Number(b.attempt?.startedStepRunVersion)),
      ];
    } catch {
      // verifyStartRows reports the undecodable JSON with its own message.
    }
    const positions = startEventPositions(sequence);
    const events =
      sequence > 3 ? (this.s.streamEvents!.all(`run-${barrier.run_id}`, positions[0], positions[4]) as EventRow[]) : [];
    const identityRows = probes.length === 7 ? (this.s.identitiesOfStart!.all(...probes, startId) as (ReplayIdentityRow & { row_id: number })[]) : [];
    const unique = [...new Map(identityRows.map((r) => [r.row_id, r])).values()].map(({ row_id: _, ...r }) => r);
    return verifyStartRows({
      barrier,
      audit: this.s.audit!.get(barrier.audit_event_id) as never,
      trace: this.s.trace!.get(barrier.trace_id) as never,
      receipt: this.s.receipt!.get(barrier.audit_receipt_id) as never,
      mutation: this.s.mutation!.get(barrier.mutation_id) as never,
      events,
      identities: unique,
    });
  }

  // ---------------------------------------------------------------- appends

  /** `json[i]`, when given, is the canonical JSON of `events[i].data`, already computed. */
  private insertEvents(stream: string, fromVersion: number, events: readonly RunStreamEvent[], committedAtMs: number, json?: readonly string[]): StoredEvent[] {
    return events.map((event, i) => {
      const eventId = naturalEventIdOf(event) ?? randomUUID();
      const position = fromVersion + i + 1;
      const data = json?.[i] ?? canonicalJson(event.data);
      const { global_position } = this.s.insertEvent!.get(stream, position, eventId, event.type, data, committedAtMs) as {
        global_position: number;
      };
      return { eventId, streamPosition: position, globalPosition: global_position, committedAtMs, event };
    });
  }

  private casStream(stream: string, expected: number, next: number): void {
    if (this.s.casStream!.run(next, stream, expected).changes !== 1) {
      throw new ConcurrencyExhaustedError(1, `stream ${stream} moved past version ${expected}`);
    }
  }

  private readonly startUow: StartUnitOfWork = {
    lookupReplay: async (keys) => this.lookupReplay(keys),
    lockForStart: async (runId, stepRunId) => this.loadRunState(runId, [stepRunId]),
    readBarrier: async (startId) => this.readBarrierSync(startId),
    appendStart: async (facts: StartFacts, before: RunState, hook: StartStepHook) => {
      const run = before.run!;
      const stream = streamNameOf(run.runId);
      const committedAtMs = this.nowMs();
      const rows = startRowsOf(facts, committedAtMs);
      const json = startEventJsonOf(rows);
      const [audit, trace, receipt, started, committed] = facts;
      const from = before.stepRuns[started.data.stepRunId]!;

      // R3.3 evidence
      this.insertEvents(stream, run.version, [audit, trace, receipt], committedAtMs, json.slice(0, 3));
      this.s.insertAudit!.run(rows.audit);
      this.s.insertTrace!.run(rows.trace);
      this.s.insertReceipt!.run(rows.receipt);
      await hook('evidence');

      // R3.4 StepRun compare-and-set
      const next = stepRunRowOf({ ...from, status: 'running', version: started.data.stepRunVersion, lastStartId: started.data.startId });
      const cas = this.s.casStepRun!.run({
        ...next,
        expected_version: from.version,
        expected_status: from.status,
        expected_digest: started.data.fromStepRunDigest,
      });
      if (cas.changes !== 1) throw new ConcurrencyExhaustedError(1, `StepRun ${from.stepRunId} moved before the start committed`);
      await hook('stepRunCas');

      // R3.5 Run version / event sequence compare-and-set
      const nextVersion = run.version + facts.length;
      this.casStream(stream, run.version, nextVersion);
      if (this.s.casRun!.run(nextVersion, run.runId, run.version).changes !== 1) {
        throw new ConcurrencyExhaustedError(1, `Run ${run.runId} moved past version ${run.version}`);
      }
      await hook('runCas');

      // R3.6 RunEvent and mutation ledger
      this.insertEvents(stream, run.version + 3, [started], committedAtMs, json.slice(3, 4));
      this.s.insertMutation!.run(rows.mutation);
      await hook('runEvent');

      // R3.7 the immutable barrier and its replay identities
      this.insertEvents(stream, run.version + 4, [committed], committedAtMs, json.slice(4, 5));
      this.s.insertBarrier!.run(rows.barrier);
      for (const identity of rows.identities) this.s.insertIdentity!.run(identity);
      await hook('barrier');

      return { record: committed.data.barrier, barrierDigest: committed.data.barrierDigest, committedAtMs };
    },
  };

  private lifecycleUow(collect: StoredEvent[]): LifecycleUnitOfWork {
    return {
      lockForLifecycle: async (runId, stepRunId) => this.loadRunState(runId, stepRunId === undefined ? [] : [stepRunId]),
      appendLifecycle: async (events, before, after) => {
        const run = after.run!;
        const stream = streamNameOf(run.runId);
        const committedAtMs = this.nowMs();
        const from = before.run?.version ?? 0;
        if (before.run === null) {
          this.s.insertStream!.run(stream, 'run', run.version);
          this.s.insertRun!.run(runRowOf(run));
        } else {
          this.casStream(stream, from, run.version);
          if (this.s.casRun!.run(run.version, run.runId, from).changes !== 1) throw new ConcurrencyExhaustedError(1, `Run ${run.runId} moved`);
        }
        const appended = this.insertEvents(stream, from, events, committedAtMs);
        collect.push(...appended);
        // Recovery read model (issue 5), inline: an outcome event and its row commit together.
        for (const e of appended) {
          const row = outcomeRowOf(e);
          if (row !== undefined) this.s.insertOutcome!.run(row);
        }
        for (const [id, s] of Object.entries(after.stepRuns)) {
          if (before.stepRuns[id] === s) continue;
          if (this.s.upsertStepRun!.run(stepRunRowOf(s)).changes !== 1) throw new ConcurrencyExhaustedError(1, `StepRun ${id} moved`);
        }
      },
    };
  }

  // ---------------------------------------------------------------- emmett event store

  private runIdOfStream(streamName: string): string {
    if (!streamName.startsWith('run-')) throw new ValidationError('stream name', [{ path: '(root)', reason: 'invalid_value', message: `${streamName} is not a Run stream (run-<runId>)` }]);
    return streamName.slice(4);
  }

  private currentVersion(streamName: string): number {
    return (this.s.streamVersion!.get(streamName) as { version: number } | undefined)?.version ?? 0;
  }

  private rawReadStream(streamName: string, options?: ReadStreamOptions): ReadStreamResult<RunStreamEvent, ReadEventMetadataWithGlobalPosition> {
    this.runIdOfStream(streamName);
    const current = this.currentVersion(streamName);
    assertExpectedVersionMatchesCurrent(BigInt(current), options?.expectedStreamVersion, 0n);
    const from = Number(options?.from ?? 0n);
    const to = Number(options?.to ?? (options?.maxCount !== undefined ? BigInt(from) + options.maxCount : BigInt(current)));
    const rows = this.s.streamEvents!.all(streamName, from + 1, to) as (EventRow & { global_position: number })[];
    const events = rows.map((r) => {
      const stored = storedEventOf(r);
      return {
        ...stored.event,
        kind: 'Event',
        metadata: { streamName, messageId: r.event_id, streamPosition: BigInt(r.stream_position), globalPosition: BigInt(r.global_position) },
      } as unknown as ReadEvent<RunStreamEvent, ReadEventMetadataWithGlobalPosition>;
    });
    return { currentStreamVersion: BigInt(current), events, streamExists: current > 0 };
  }

  private async rawAppend(streamName: string, events: { type: string; data: unknown }[], options?: AppendToStreamOptions): Promise<AppendToStreamResultWithGlobalPosition> {
    const stored: StoredEvent[] = [];
    const { before, after } = await runAppendTransaction(this.lifecycleUow(stored), this.runIdOfStream(streamName), events, options?.expectedStreamVersion);
    return {
      nextExpectedStreamVersion: BigInt(after.run!.version),
      createdNewStream: before.run === null,
      lastEventGlobalPosition: BigInt(stored[stored.length - 1]?.globalPosition ?? 0),
    };
  }

  private emmett(session: boolean): RunEventStore {
    const read = <T>(body: () => T): Promise<T> => (session ? Promise.resolve().then(body) : this.read(body));
    const write = <T>(body: () => Promise<T>): Promise<T> => (session ? body() : this.write(body));
    const store: RunEventStore = {
      readStream: ((streamName: string, options?: ReadStreamOptions) => read(() => this.rawReadStream(streamName, options))) as RunEventStore['readStream'],
      aggregateStream: (async (streamName: string, options: { evolve: (s: unknown, e: unknown) => unknown; initialState: () => unknown; read?: ReadStreamOptions }) => {
        const result = await read(() => this.rawReadStream(streamName, options.read));
        return { currentStreamVersion: result.currentStreamVersion, streamExists: result.streamExists, state: result.events.reduce(options.evolve, options.initialState()) };
      }) as unknown as RunEventStore['aggregateStream'],
      appendToStream: ((streamName: string, events: { type: string; data: unknown }[], options?: AppendToStreamOptions) =>
        write(() => this.rawAppend(streamName, events, options))) as unknown as RunEventStore['appendToStream'],
      streamExists: (streamName: string) => read(() => this.currentVersion(streamName) > 0),
      withSession: <T>(callback: (session: EventStoreSession<EventStore<ReadEventMetadataWithGlobalPosition>>) => Promise<T>): Promise<T> =>
        session ? callback({ eventStore: store, close: async () => undefined }) : this.write(() => callback({ eventStore: this.emmett(true), close: async () => undefined })),
    };
    return store;
  }

  readonly eventStore: RunEventStore = this.emmett(false);

  // ---------------------------------------------------------------- the public surface

  readonly barriers = {
    prepare: async (command: unknown): Promise<PrepareResult> => {
      const decoded = decodeStartCommand(command); // bad input: typed error, nothing opened
      return this.write(() => runStartTransaction(this.startUow, decoded, this.hook), decoded.command.startId);
    },
    getByStartId: (startId: string): Promise<StoredBarrier | null> => this.read(() => this.readBarrierSync(startId)),
    getByStepRunAttempt: (runId: string, stepRunId: string, startedStepRunVersion: number): Promise<StoredBarrier | null> =>
      this.read(() => {
        const value = attemptValue(runId, stepRunId, startedStepRunVersion);
        const rows = this.s.attempt!.all(value) as { start_id: string }[];
        if (rows.length > 1) throw new CorruptRecordError('replay index', value, `attempt is bound to ${rows.length} barriers`);
        if (rows.length === 0) return null;
        const found = this.readBarrierSync(rows[0]!.start_id);
        if (found === null) throw new CorruptRecordError('replay index', value, `attempt names start ${rows[0]!.start_id}, which has no barrier`);
        return found;
      }),
  };

  readonly runs = {
    handle: async (command: unknown): Promise<AppendOutcome> => {
      const decoded = decodeLifecycle(command);
      const events: StoredEvent[] = [];
      const decision = await this.write(() => runLifecycleTransaction(this.lifecycleUow(events), decoded));
      return { runVersion: decision.after.run!.version, events };
    },
    getStepRun: (runId: string, stepRunId: string): Promise<StepRunView | null> =>
      this.read(() => {
        const s = this.loadRunState(runId, [stepRunId]).stepRuns[stepRunId];
        return s === undefined ? null : { ...s, digest: stepRunRowOf(s).digest };
      }),
    readStream: (runId: string): Promise<readonly StoredEvent[]> =>
      this.read(() =>
        (this.s.streamEvents!.all(streamNameOf(runId), 1, Number.MAX_SAFE_INTEGER) as (EventRow & { global_position: number })[]).map((r) => storedEventOf(r)),
      ),
  };

  private recoveryView: ReturnType<typeof createSqliteRecoveryView> | undefined;

  /** Recovery read models and operator resolutions (issue 5). */
  readonly recovery: RecoveryApi = createRecoveryApi({
    snapshot: (body) =>
      this.snapshot(() => body((this.recoveryView ??= createSqliteRecoveryView({ db: this.db, readBarrier: (id) => this.readBarrierSync(id), nowMs: () => this.nowMs() })))),
    handle: (command) => this.runs.handle(command),
  });

  close(): Promise<void> {
    return this.serial.run(async () => {
      if (this.closed) return;
      this.closed = true;
      if (!isCallerOwned(this.db)) this.db.close();
    });
  }
}
