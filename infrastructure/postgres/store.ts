import { createHash, randomUUID } from 'node:crypto';
import type { Pool, PoolClient, PoolConfig, QueryResultRow } from 'pg';
import {
  ConcurrencyExhaustedError,
  CorruptRecordError,
  SemanticConflictError,
  canonicalJson,
  classifyReplay,
  decodeStartCommand,
  noReplayHits,
  replayKeysOf,
  streamNameOf,
  type DecodedStartCommand,
  type ReplayHit,
  type ReplayHits,
  type ReplayIdentity,
  type ReplayKeys,
  type RunState,
  type RunStreamEvent,
  type StartFacts,
} from '../../domain';
import { attemptValue, naturalEventIdOf, runRowOf, startEventJsonOf, startRowsOf, stepRunRowOf } from '../../projections/rows';
import { decodeRunRow, decodeStepRunRow, runStateOf } from '../../projections/runState';
import { storedEventOf, verifyStartRows } from '../../projections/verifyRows';
import type {
  AppendOutcome,
  PrepareResult,
  StartBarrierAuthority,
  StartStepHook,
  StepRunView,
  StoredBarrier,
  StoredEvent,
} from '../authority';
import {
  decodeLifecycle,
  runLifecycleTransaction,
  runStartTransaction,
  type LifecycleUnitOfWork,
  type StartTransactionResult,
  type StartUnitOfWork,
} from '../startProtocol';
import { SQLSTATE, UNIQUE_CONSTRAINT_IDENTITY, isRetryable, isUniqueViolation, mapTimeout, sqlStateOf } from './errors';
import { assertSchemaCurrent, migratePostgres } from './migrate';
import { bind, prefixed, type NamedSql, type Params } from './named';
import {
  AuditEventRowCodec,
  AuditReceiptRowCodec,
  BarrierRowCodec,
  EventRowCodec,
  IdentityProbeRowCodec,
  MutationRowCodec,
  PgInt,
  ReplayIdentityRowCodec,
  RunRowCodec,
  StepRunRowCodec,
  TraceAnchorRowCodec,
  atMostOne,
  decodeRow,
  decodeRows,
} from './rowCodecs';
import * as SQL from './sql';
import { connectTyped, createOwnedPool, type PoolErrorHandler } from './pool';

export interface PostgresTimeouts {
  /** statement_timeout of every statement of a start or lifecycle transaction (default 5000). */
  readonly statementMs: number;
  /** lock_timeout: how long a start waits for the Run/StepRun row locks (default 2000). */
  readonly lockMs: number;
  /** idle_in_transaction_session_timeout: a stalled client loses its transaction (default 10000). */
  readonly idleInTransactionMs: number;
}

export const DEFAULT_TIMEOUTS: PostgresTimeouts = { statementMs: 5000, lockMs: 2000, idleInTransactionMs: 10_000 };
export const DEFAULT_MAX_RETRIES = 3;

/**
 * `stepwise` runs R3.3 .. R3.7 as five statements with the fault-injection hook between them;
 * `batched` (default) runs them as one statement (one round trip) and calls the hook for each
 * step after it. Both write the same rows through the same SQL fragments (sql.ts).
 */
export type PostgresWriteMode = 'batched' | 'stepwise';

interface CommonOptions {
  /** The ADR fixes schema `ql3` (R5.2); the migrations are written for it. */
  readonly schema?: string;
  readonly timeouts?: Partial<PostgresTimeouts>;
  /** Retries of a whole transaction after 40001/40P01, at most (default 3, R5.2). */
  readonly maxRetries?: number;
  /** Apply pending migrations on open (default true). `false` only checks the schema is current. */
  readonly migrate?: boolean;
  readonly writeMode?: PostgresWriteMode;
  /** Fault injection inside the start transaction (specs only). */
  readonly hooks?: { readonly onStartStep?: StartStepHook };
  /** Errors the authority's own pool emits (idle connections the server closed); default: a process warning. */
  readonly onError?: PoolErrorHandler;
}

/**
 * Where to connect: a connection string (with optional pg `PoolConfig` settings such as ssl
 * and max), a `PoolConfig` alone, or a `pg.Pool` you own (then you also handle its errors).
 */
export type PostgresStartBarrierOptions = CommonOptions &
  (
    | { readonly connectionString: string; readonly poolConfig?: PoolConfig; readonly pool?: undefined }
    | { readonly poolConfig: PoolConfig; readonly connectionString?: undefined; readonly pool?: undefined }
    | { readonly pool: Pool; readonly connectionString?: undefined; readonly poolConfig?: undefined }
  );

export interface PostgresStartBarrier extends StartBarrierAuthority {
  readonly backend: 'postgres';
  /** The pool every transaction runs on. Exposed for inspection tools and specs. */
  readonly pool: Pool;
  readonly timeouts: PostgresTimeouts;
  readonly writeMode: PostgresWriteMode;
}

type Queryable = Pick<PoolClient, 'query'>;

/**
 * The statements every start runs are prepared by name, once per connection: an unnamed
 * statement is parsed and planned again on every call, and for these that was a third of the
 * server's CPU per start (issue 6 bench). Each result is a fixed set of columns (counts,
 * json), so a later migration can only make PostgreSQL re-plan them, never change their type.
 */
const PREPARED = new Map<NamedSql, string>(
  [SQL.LOOKUP_REPLAY, SQL.LOCK_RUN_STATE, SQL.START_BATCHED_STATEMENT, SQL.READ_BARRIER].map((sql) => [
    sql,
    `ql3_${createHash('sha256').update(sql.text).digest('hex').slice(0, 24)}`,
  ]),
);

const run = async <R extends QueryResultRow>(q: Queryable, sql: NamedSql, params: Params): Promise<R[]> => {
  const values = bind(sql, params);
  const name = PREPARED.get(sql);
  return (await (name === undefined ? q.query<R>(sql.text, values) : q.query<R>({ name, text: sql.text, values }))).rows;
};

const validTimeout = (name: string, ms: number): number => {
  if (!Number.isSafeInteger(ms) || ms < 1 || ms > 3_600_000) throw new RangeError(`timeouts.${name} must be an integer in 1..3600000 ms, got ${ms}`);
  return ms;
};

export const openPostgresStartBarrier = async (options: PostgresStartBarrierOptions): Promise<PostgresStartBarrier> => {
  if (options.schema !== undefined && options.schema !== SQL.SCHEMA) {
    throw new RangeError(`schema must be "${SQL.SCHEMA}" (ADR-0158 R5.2: the migrations and the role grants are written for it), got "${options.schema}"`);
  }
  const timeouts: PostgresTimeouts = {
    statementMs: validTimeout('statementMs', options.timeouts?.statementMs ?? DEFAULT_TIMEOUTS.statementMs),
    lockMs: validTimeout('lockMs', options.timeouts?.lockMs ?? DEFAULT_TIMEOUTS.lockMs),
    idleInTransactionMs: validTimeout('idleInTransactionMs', options.timeouts?.idleInTransactionMs ?? DEFAULT_TIMEOUTS.idleInTransactionMs),
  };
  const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
  if (!Number.isSafeInteger(maxRetries) || maxRetries < 0 || maxRetries > 3) {
    throw new RangeError(`maxRetries must be 0..3 (R5.2: at most three retries), got ${maxRetries}`);
  }
  const owned = options.pool === undefined;
  // Our own pool also bounds the reads that run outside a transaction, at session level.
  const pool =
    options.pool ??
    createOwnedPool({ connectionString: options.connectionString, poolConfig: options.poolConfig, onError: options.onError, session: timeouts });
  try {
    const client = await connectTyped(pool);
    try {
      if (options.migrate ?? true) await migratePostgres(client);
      else await assertSchemaCurrent(client);
    } finally {
      client.release();
    }
  } catch (e) {
    if (owned) await pool.end();
    throw e;
  }
  return new PostgresAuthority(pool, owned, timeouts, maxRetries, options.writeMode ?? 'batched', options.hooks?.onStartStep);
};

/** What one transaction attempt hands its body: the connection and the clock read once (R3.10). */
interface Tx {
  readonly client: PoolClient;
  readonly nowMs: number;
}

class PostgresAuthority implements PostgresStartBarrier {
  readonly backend = 'postgres' as const;
  private closed = false;

  constructor(
    readonly pool: Pool,
    private readonly ownsPool: boolean,
    readonly timeouts: PostgresTimeouts,
    private readonly maxRetries: number,
    readonly writeMode: PostgresWriteMode,
    private readonly hook: StartStepHook | undefined,
  ) {
    this.beginText = SQL.beginConfigured(timeouts);
  }

  /** BEGIN + SET LOCAL of the timeouts + the transaction clock, one round trip (sql.ts). */
  private readonly beginText: string;

  // ---------------------------------------------------------------- transactions

  /**
   * One short SERIALIZABLE transaction, re-run from BEGIN at most `maxRetries` times and only
   * after 40001/40P01 (R5.2). Timeouts become TransactionTimeoutError; a 23505 is passed up
   * raw for the caller to resolve as a replay; everything else propagates as thrown.
   *
   * A retry first takes its turn on the Run (see `attempt`): the losers of one race were all
   * parked on the same row lock and woke together, and would otherwise meet there again.
   */
  private async transaction<T>(runId: string, body: (tx: Tx) => Promise<T>): Promise<T> {
    this.assertOpen();
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.attempt(body, runId, attempt > 1);
      } catch (e) {
        if (!isRetryable(e)) throw mapTimeout(e);
        if (attempt > this.maxRetries) {
          throw new ConcurrencyExhaustedError(attempt, `${sqlStateOf(e)}: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    }
  }

  /**
   * One attempt on one pooled connection. The connection first waits for a session advisory
   * lock keyed by the Run (its turn), bounded by lock_timeout, and holds it until its
   * transaction has committed or rolled back: writers of one Run go one after another, each
   * with a snapshot taken after the previous one committed, so they do not fail each other
   * under SERIALIZABLE (a retry only remains for cross-Run predicate-lock conflicts). It costs
   * one round trip (the take; the end rides with COMMIT); the lock lives exactly as long as the
   * attempt (PostgreSQL also drops it if the session dies).
   */
  private async attempt<T>(body: (tx: Tx) => Promise<T>, runId: string, retry: boolean): Promise<T> {
    const client = await this.pool.connect();
    let broken: unknown;
    const onError = (err: Error) => {
      broken ??= err;
    };
    client.on('error', onError);
    let turn: { readonly key: string; readonly previousLockTimeout: string } | undefined;
    try {
      try {
        const [taken] = await run<{ previous: string }>(client, retry ? SQL.TAKE_RETRY_TURN : SQL.TAKE_RUN_TURN, {
          key: runId,
          lock_timeout: String(this.timeouts.lockMs),
        });
        turn = { key: runId, previousLockTimeout: taken?.previous ?? '0' };
      } catch (e) {
        broken ??= e; // it may hold one of its two locks: discard the session (sql.ts)
        throw e;
      }
      const begun = (await client.query(this.beginText)) as unknown as { rows: { now_ms?: unknown }[] }[];
      const nowMs = decodeRow(PgInt, begun[1]?.rows[0]?.now_ms, 'transaction clock', 'transaction_timestamp()');
      const result = await body({ client, nowMs });
      await client.query(SQL.commitAndEndTurn(retry, turn.key, turn.previousLockTimeout, (v) => client.escapeLiteral(v)));
      turn = undefined; // committed and ended in one round trip
      return result;
    } catch (e) {
      if (broken === undefined) {
        try {
          await client.query(SQL.ROLLBACK);
        } catch (rollbackError) {
          broken = rollbackError;
        }
      }
      // The server ends a session idle in a transaction too long; the statement that follows
      // fails with a connection error, and the reason arrives as the client's error event.
      if (sqlStateOf(e) === undefined && sqlStateOf(broken) === SQLSTATE.idleInTransactionTimeout) throw broken;
      throw e;
    } finally {
      if (turn !== undefined && broken === undefined) {
        try {
          await run(client, retry ? SQL.END_RETRY_TURN : SQL.END_RUN_TURN, { key: turn.key, lock_timeout: turn.previousLockTimeout });
        } catch (unlockError) {
          broken = unlockError; // destroying the session releases the lock and the setting
        }
      }
      client.off('error', onError);
      client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the PostgreSQL start barrier authority is closed');
  }

  /** Reads outside a transaction: one statement, one snapshot, timeouts mapped. */
  private async read<T>(body: (q: Queryable) => Promise<T>): Promise<T> {
    this.assertOpen();
    try {
      return await body(this.pool);
    } catch (e) {
      throw mapTimeout(e);
    }
  }

  // ---------------------------------------------------------------- reads shared by both paths

  private async loadRunState(q: Queryable, runId: string, stepRunId: string | undefined, lock: boolean): Promise<RunState> {
    const [row] = await run<{ run: unknown; stream_version: unknown; step_run: unknown }>(q, lock ? SQL.LOCK_RUN_STATE : SQL.READ_RUN_STATE, {
      run_id: runId,
      stream_id: streamNameOf(runId),
      step_run_id: stepRunId ?? null,
    });
    if (row === undefined || row.run === null) {
      if (row !== undefined && (row.stream_version !== null || row.step_run !== null)) {
        throw new CorruptRecordError('run', runId, 'the stream or a StepRun exists but the run head is missing');
      }
      return runStateOf(null, []);
    }
    const head = decodeRunRow(
      decodeRow(RunRowCodec, row.run, 'run', runId),
      row.stream_version === null ? null : decodeRow(PgInt, row.stream_version, 'stream', streamNameOf(runId)),
    );
    const stepRuns = row.step_run === null ? [] : [decodeStepRunRow(decodeRow(StepRunRowCodec, row.step_run, 'step run', `${runId}/${stepRunId}`))];
    return runStateOf(head, stepRuns);
  }

  private async lookupReplay(q: Queryable, keys: ReplayKeys): Promise<ReplayHits> {
    const rows = await run(q, SQL.LOOKUP_REPLAY, {
      start_id: keys.startId,
      mutation_id: keys.mutationId,
      run_event_id: keys.runEventId,
      trace_id: keys.traceId,
      audit_event_id: keys.auditEventId,
      audit_receipt_id: keys.auditReceiptId,
      attempt: attemptValue(keys.attempt.runId, keys.attempt.stepRunId, keys.attempt.startedStepRunVersion),
    });
    const hits = noReplayHits() as Record<ReplayIdentity, ReplayHit[]>;
    for (const raw of rows) {
      const r = decodeRow(ReplayIdentityRowCodec, raw, 'replay index', keys.startId);
      hits[r.identity] = [...hits[r.identity], { startId: r.start_id, commandDigest: r.command_digest }];
    }
    return hits;
  }

  /** R5.3: one statement fetches every row a barrier binds; verifyStartRows re-derives them all. */
  private async readBarrier(q: Queryable, startId: string): Promise<StoredBarrier | null> {
    const [row] = await run<Record<string, unknown>>(q, SQL.READ_BARRIER, { start_id: startId });
    if (row === undefined) return null;
    const kind = 'start barrier';
    const barrier = atMostOne(decodeRows(BarrierRowCodec, row.barriers, kind, startId), kind, startId);
    const probes = decodeRows(IdentityProbeRowCodec, row.identities, 'replay index', startId);
    if (barrier === undefined) {
      // No barrier under this id is an answer only if nothing else claims the start exists.
      if (probes.length > 0) throw new CorruptRecordError(kind, startId, 'the replay index names this start but its barrier row is missing');
      return null;
    }
    const identities = [...new Map(probes.map(({ row_id, ...r }) => [row_id, r])).values()];
    return verifyStartRows({
      barrier,
      audit: atMostOne(decodeRows(AuditEventRowCodec, row.audits, 'security audit event', startId), 'security audit event', startId),
      trace: atMostOne(decodeRows(TraceAnchorRowCodec, row.traces, 'trace anchor', startId), 'trace anchor', startId),
      receipt: atMostOne(decodeRows(AuditReceiptRowCodec, row.receipts, 'audit receipt', startId), 'audit receipt', startId),
      mutation: atMostOne(decodeRows(MutationRowCodec, row.mutations, 'step run mutation', startId), 'step run mutation', startId),
      events: decodeRows(EventRowCodec, row.events, 'event', startId),
      identities,
    });
  }

  // ---------------------------------------------------------------- the start (R3)

  private startUnitOfWork(tx: Tx): StartUnitOfWork {
    return {
      lookupReplay: (keys) => this.lookupReplay(tx.client, keys),
      lockForStart: (runId, stepRunId) => this.loadRunState(tx.client, runId, stepRunId, true),
      readBarrier: (startId) => this.readBarrier(tx.client, startId),
      appendStart: (facts, before, hook) => this.appendStart(tx, facts, before, hook),
    };
  }

  private async appendStart(tx: Tx, facts: StartFacts, before: RunState, hook: StartStepHook): Promise<StoredBarrier> {
    const [, , , started, committed] = facts;
    const head = before.run;
    const from = before.stepRuns[started.data.stepRunId];
    if (head === null || from === undefined) throw new Error('appendStart needs the locked Run and StepRun');
    const rows = startRowsOf(facts, tx.nowMs);
    const next = stepRunRowOf({ ...from, status: 'running', version: started.data.stepRunVersion, lastStartId: started.data.startId });
    const json = startEventJsonOf(rows); // each fact canonicalised once, in startRowsOf
    const events = facts.map((event, i) => ({
      position: head.version + i + 1,
      id: naturalEventIdOf(event)!,
      type: event.type,
      data: json[i]!,
    }));
    const eventParams = (prefix: string, slice: typeof events) => ({
      [`${prefix}positions`]: slice.map((e) => e.position),
      [`${prefix}event_ids`]: slice.map((e) => e.id),
      [`${prefix}event_types`]: slice.map((e) => e.type),
      [`${prefix}data`]: slice.map((e) => e.data),
    });
    const params: Params = {
      stream_id: streamNameOf(head.runId),
      run_id: started.data.runId,
      step_run_id: started.data.stepRunId,
      committed_at_ms: tx.nowMs,
      // R3.3
      ...eventParams('evidence_', events.slice(0, 3)),
      ...prefixed('audit_', rows.audit),
      ...prefixed('trace_', rows.trace),
      ...prefixed('receipt_', rows.receipt),
      // R3.4
      next_status: next.status,
      next_step_run_version: next.version,
      next_digest: next.digest,
      next_state_json: next.state_json,
      expected_step_run_version: from.version,
      expected_status: from.status,
      expected_digest: started.data.fromStepRunDigest,
      // R3.5
      expected_run_version: head.version,
      next_run_version: head.version + facts.length,
      // R3.6
      ...eventParams('run_event_', events.slice(3, 4)),
      ...prefixed('mutation_', rows.mutation),
      // R3.7
      ...eventParams('barrier_event_', events.slice(4, 5)),
      ...prefixed('barrier_', rows.barrier),
      identity_names: rows.identities.map((i) => i.identity),
      identity_values: rows.identities.map((i) => i.value),
      identity_start_ids: rows.identities.map((i) => i.start_id),
      identity_command_digests: rows.identities.map((i) => i.command_digest),
    };

    if (this.writeMode === 'stepwise') {
      for (const [step, sql] of SQL.START_STEP_STATEMENTS) {
        this.checkCounts(await run(tx.client, sql, params), started.data.startId);
        await hook(step);
      }
    } else {
      this.checkCounts(await run(tx.client, SQL.START_BATCHED_STATEMENT, params), started.data.startId);
      for (const [step] of SQL.START_STEP_STATEMENTS) await hook(step);
    }
    return { record: committed.data.barrier, barrierDigest: committed.data.barrierDigest, committedAtMs: tx.nowMs };
  }

  /** Every CTE reports its row count; a compare-and-set that matched nothing aborts (R5.2). */
  private checkCounts(rows: readonly Record<string, unknown>[], startId: string): void {
    const counts = rows[0] ?? {};
    for (const [name, value] of Object.entries(counts)) {
      const expected = SQL.EXPECTED_COUNTS[name];
      if (value === expected) continue;
      if (name.endsWith('_cas')) {
        throw new ConcurrencyExhaustedError(1, `compare-and-set ${name} matched ${String(value)} rows while starting ${startId}: the locked state moved`);
      }
      throw new Error(`start ${startId}: step ${name} wrote ${String(value)} rows, expected ${String(expected)}`);
    }
  }

  /**
   * A unique index refused a value: another transaction committed it after our lookup. Look
   * again in a fresh transaction: an exact replay is `existing`, anything else a typed
   * conflict (R4.2, R4.3), never a version conflict and never the raw 23505.
   */
  private resolveUniqueViolation(decoded: DecodedStartCommand, violation: { constraint?: string | undefined; detail?: string | undefined }): Promise<StartTransactionResult> {
    return this.transaction(decoded.command.stepRun.runId, async (tx) => {
      const c = decoded.command;
      const decision = classifyReplay(decoded, await this.lookupReplay(tx.client, replayKeysOf(c)));
      if (decision.kind === 'existing') {
        const barrier = await this.readBarrier(tx.client, c.startId);
        if (barrier === null) throw new CorruptRecordError('replay index', c.startId, 'the index names this start but its barrier is missing');
        return { outcome: 'existing', barrier };
      }
      const identity = identityOfViolation(violation);
      if (identity === undefined) {
        // not an identity of R4.1: a stream position taken under us is a lost compare-and-set
        throw new ConcurrencyExhaustedError(1, `${SQLSTATE.uniqueViolation}: ${violation.constraint ?? 'unique index'} while starting ${c.startId}`);
      }
      const keys = replayKeysOf(c);
      const value = identity === 'attempt' ? attemptValue(keys.attempt.runId, keys.attempt.stepRunId, keys.attempt.startedStepRunVersion) : keys[identity];
      throw new SemanticConflictError(identity, value, undefined, `${identity} ${value} is already used by another record (${violation.constraint ?? 'unique index'}) (R4.3)`);
    });
  }

  private lifecycleUnitOfWork(tx: Tx, collect: StoredEvent[]): LifecycleUnitOfWork {
    return {
      lockForLifecycle: (runId, stepRunId) => this.loadRunState(tx.client, runId, stepRunId, true),
      appendLifecycle: async (events, before, after) => {
        const head = after.run;
        if (head === null) throw new Error('a lifecycle append needs a Run');
        const stream = streamNameOf(head.runId);
        const from = before.run?.version ?? 0;
        const [counts] =
          before.run === null
            ? await run(tx.client, SQL.CREATE_RUN_HEAD, { stream_id: stream, next_run_version: head.version, ...prefixed('run_', runRowOf(head)) })
            : await run(tx.client, SQL.CAS_RUN_HEAD, { stream_id: stream, run_id: head.runId, next_run_version: head.version, expected_run_version: from });
        if (counts?.stream_cas !== 1 || counts?.run_cas !== 1) throw new ConcurrencyExhaustedError(1, `Run ${head.runId} moved past version ${from}`);
        collect.push(...(await this.insertLifecycleEvents(tx, stream, from, events)));
        for (const [id, s] of Object.entries(after.stepRuns)) {
          if (before.stepRuns[id] === s) continue;
          const upserted = await run(tx.client, SQL.UPSERT_STEP_RUN, stepRunRowOf(s) as unknown as Params);
          if (upserted.length !== 1) throw new ConcurrencyExhaustedError(1, `StepRun ${id} moved past version ${s.version - 1}`);
        }
      },
    };
  }

  private async insertLifecycleEvents(tx: Tx, stream: string, from: number, events: readonly RunStreamEvent[]): Promise<StoredEvent[]> {
    const ids = events.map((e) => naturalEventIdOf(e) ?? randomUUID());
    const rows = await run(tx.client, SQL.INSERT_EVENTS, {
      stream_id: stream,
      committed_at_ms: tx.nowMs,
      positions: events.map((_, i) => from + i + 1),
      event_ids: ids,
      event_types: events.map((e) => e.type),
      data: events.map((e) => canonicalJson(e.data)),
    });
    const byPosition = new Map(rows.map((r) => [decodeRow(PgInt, r.stream_position, 'event', stream), decodeRow(PgInt, r.global_position, 'event', stream)]));
    return events.map((event, i) => {
      const streamPosition = from + i + 1;
      const globalPosition = byPosition.get(streamPosition);
      if (globalPosition === undefined) throw new Error(`event ${stream}@${streamPosition} was not inserted`);
      return { eventId: ids[i]!, streamPosition, globalPosition, committedAtMs: tx.nowMs, event };
    });
  }

  // ---------------------------------------------------------------- the public surface

  readonly barriers = {
    prepare: async (command: unknown): Promise<PrepareResult> => {
      this.assertOpen();
      const decoded = decodeStartCommand(command); // bad input: typed error, no transaction opened
      try {
        return await this.transaction(decoded.command.stepRun.runId, (tx) => runStartTransaction(this.startUnitOfWork(tx), decoded, this.hook));
      } catch (e) {
        if (!isUniqueViolation(e)) throw e;
        return this.resolveUniqueViolation(decoded, e);
      }
    },
    getByStartId: (startId: string): Promise<StoredBarrier | null> => this.read((q) => this.readBarrier(q, startId)),
    getByStepRunAttempt: (runId: string, stepRunId: string, startedStepRunVersion: number): Promise<StoredBarrier | null> =>
      this.read(async (q) => {
        if (!Number.isSafeInteger(startedStepRunVersion) || startedStepRunVersion < 1) return null;
        const value = attemptValue(runId, stepRunId, startedStepRunVersion);
        const rows = await run<{ source: string; start_id: string }>(q, SQL.FIND_ATTEMPT, {
          attempt: value,
          run_id: runId,
          step_run_id: stepRunId,
          started_step_run_version: startedStepRunVersion,
        });
        const indexed = rows.filter((r) => r.source === 'index').map((r) => r.start_id);
        const barriers = rows.filter((r) => r.source === 'barrier').map((r) => r.start_id);
        if (indexed.length > 1) throw new CorruptRecordError('replay index', value, `attempt is bound to ${indexed.length} barriers`);
        if (barriers.length > 1) throw new CorruptRecordError('start barrier', value, `${barriers.length} barriers claim this attempt`);
        if (indexed.length === 0 && barriers.length === 0) return null;
        if (indexed[0] !== barriers[0]) {
          throw new CorruptRecordError('replay index', value, `the index names start ${indexed[0] ?? '(none)'} but the barrier table names ${barriers[0] ?? '(none)'}`);
        }
        const found = await this.readBarrier(q, indexed[0]!);
        if (found === null) throw new CorruptRecordError('replay index', value, `attempt names start ${indexed[0]!}, which has no barrier`);
        return found;
      }),
  };

  readonly runs = {
    handle: async (command: unknown): Promise<AppendOutcome> => {
      this.assertOpen();
      const decoded = decodeLifecycle(command);
      let events: StoredEvent[] = [];
      const decision = await this.transaction(decoded.data.runId, (tx) => {
        events = [];
        return runLifecycleTransaction(this.lifecycleUnitOfWork(tx, events), decoded);
      }).catch((e: unknown) => {
        // A concurrent creator won (CreateRun, CreateStepRun): re-decide on fresh state, which
        // turns the race into the typed precondition the decider raises (run_exists, ...).
        if (!isUniqueViolation(e)) throw e;
        events = [];
        return this.transaction(decoded.data.runId, (tx) => runLifecycleTransaction(this.lifecycleUnitOfWork(tx, events), decoded));
      });
      return { runVersion: decision.after.run!.version, events };
    },
    getStepRun: (runId: string, stepRunId: string): Promise<StepRunView | null> =>
      this.read(async (q) => {
        const s = (await this.loadRunState(q, runId, stepRunId, false)).stepRuns[stepRunId];
        return s === undefined ? null : { ...s, digest: stepRunRowOf(s).digest };
      }),
    readStream: (runId: string): Promise<readonly StoredEvent[]> =>
      this.read(async (q) => {
        const stream = streamNameOf(runId);
        const [row] = await run<{ stream_version: unknown; events: unknown }>(q, SQL.READ_STREAM, { stream_id: stream });
        const rows = decodeRows(EventRowCodec, row?.events ?? null, 'event', stream);
        const version = row?.stream_version === null || row?.stream_version === undefined ? 0 : decodeRow(PgInt, row.stream_version, 'stream', stream);
        if (version !== rows.length) throw new CorruptRecordError('stream', stream, `stream head is at version ${version} but it holds ${rows.length} events`);
        return rows.map((r, i) => {
          if (r.stream_position !== i + 1) throw new CorruptRecordError('stream', stream, `expected position ${i + 1}, found ${r.stream_position}`);
          return storedEventOf(r);
        });
      }),
  };

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsPool) await this.pool.end();
  }
}

/** The identity a unique constraint guards; event ids carry their kind as a prefix (rows.ts). */
const identityOfViolation = (violation: { constraint?: string | undefined; detail?: string | undefined }): ReplayIdentity | undefined => {
  const constraint = violation.constraint ?? '';
  if (constraint === 'events_event_id_key') {
    const id = /\(event_id\)=\(([^)]*)\)/.exec(violation.detail ?? '')?.[1] ?? '';
    if (id.startsWith('audit:')) return 'auditEventId';
    if (id.startsWith('trace:')) return 'traceId';
    if (id.startsWith('receipt:')) return 'auditReceiptId';
    if (id.startsWith('barrier:')) return 'startId';
    return 'runEventId';
  }
  if (constraint === 'start_replay_identities_key') {
    const identity = /\(identity, value\)=\(([A-Za-z]+),/.exec(violation.detail ?? '')?.[1];
    if (identity !== undefined && identity in IDENTITY_NAMES) return identity as ReplayIdentity;
  }
  return UNIQUE_CONSTRAINT_IDENTITY[constraint];
};

const IDENTITY_NAMES: Readonly<Record<string, true>> = {
  startId: true,
  mutationId: true,
  runEventId: true,
  traceId: true,
  auditEventId: true,
  auditReceiptId: true,
  attempt: true,
};
