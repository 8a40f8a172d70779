import type { Pool, PoolConfig } from 'pg';
import { inspect } from 'node:util';
import { connectTyped, createOwnedPool, secretsOf, type PoolErrorHandler } from './pool';
import { StoreUnavailableError, decodeStartAttempt, replayKeysOf, type DecodedStartCommand, type StartAttemptContext } from '../../domain';
import { requireFunction, requireFunctions, requireKnownOptions, requireOneOf } from '../../application/openErrors';
import { decodeAttemptArgs, decodeRunArgs, decodeStartIdArgs, decodeStepRunArgs } from '../../domain/readArgs';
import { stepRunRowOf } from '../../projections/rows';
import type { PlansApi, RecoverableStartBarrierAuthority, RecoveryApi, StartStepHook } from '../../application/authority';
import type { AppendOutcome, PrepareResult, StepRunView, StoredBarrier, StoredEvent } from '../../domain/records';
import { decodeLifecycle, runLifecycleTransaction } from '../../application/lifecycleProtocol';
import { runStartTransaction } from '../../application/startProtocol';
import { claimsOnVerifiedStarts } from '../../application/driverClaimRules';
import { createEvidenceKeyring, type EvidenceKeyring, type EvidenceKeyringOptions } from '../../application/evidenceKeys';
import { isUniqueViolation, mapPgError } from './errors';
import { lifecycleUnitOfWork } from './lifecycleWrite';
import { assertSchemaCurrent, migratePostgres } from './migrate';
import { postgresRecoveryOf } from './postgresRecovery';
import { loadStepRunFromLog, requireHeadsAtLogEnd, readBarrier, readBarrierOfAttempt, readStream } from './reads';
import { postgresSealer, type PostgresSealer } from './postgresSeals';
import * as SQL from './sql';
import { compactedStartAnswer, requireRunNotCompacted } from './compactedReads';
import { existingOfRead, readStart, stateOfRead } from './startRead';
import { prepareInRoundTrips } from './roundTripStart';
import { lookupBeforeBegin, resolveUniqueViolation, startUnitOfWork, type LookupBeforeBegin, type PostgresWriteMode } from './startWrite';
import { answeredOnExhaustion, lifecycleRefusalOnPool, lifecycleRefusalOnRead, startAnswerBeforeBegin, startAnswerOnRead } from './readAnswers';
import type { Queryable } from './query';
import { PostgresTransactions, type AttemptBudget, type BeforeBegin, type PostgresTimeouts, type Tx } from './transactions';
import { postgresDriverClaims } from './postgresDriverClaims';
import { postgresPlanRows } from './postgresPlans';
import { checkedPlanOptions, createInvocationPlans, plansApiOf, type InvocationPlanRow, type InvocationPlans, type PlanStoreOptions } from '../../application/invocationPlans';
import { registerAuthority } from '../../application/execution';
import type { DriverClaims } from '../../domain';

// The cluster authority (R5.2): options, the opener, and the public surface over the start
// (startWrite.ts), the lifecycle (lifecycleWrite.ts), the reads (reads.ts), the transactions
// and the Run turn (transactions.ts) and the recovery view (postgresRecoveryView.ts).

export type { PostgresTimeouts } from './transactions';
export type { PostgresWriteMode } from './startWrite';

export const DEFAULT_TIMEOUTS: PostgresTimeouts = { statementMs: 5000, lockMs: 2000, idleInTransactionMs: 10_000, connectMs: 5000, queryMs: 15_000, deadlineMs: 30_000 };
export const DEFAULT_MAX_RETRIES = 3;

interface CommonOptions {
  /** The ADR fixes schema `ql3` (R5.2); the migrations are written for it. */
  readonly schema?: string;
  readonly timeouts?: Partial<PostgresTimeouts>;
  /** Retries of a whole transaction after 40001/40P01, at most (default 3, R5.2). */
  readonly maxRetries?: number;
  /** Apply pending migrations on open (default true). `false` only checks the schema is current. */
  readonly migrate?: boolean;
  readonly writeMode?: PostgresWriteMode;
  /** Keyed evidence (R9.4): seal new barriers, and verify every barrier read. */
  readonly evidenceKeys?: EvidenceKeyringOptions;
  /** Sealed invocation plans (R12.2): the keyring that seals tool inputs; execution opens only with it (R12.4). */
  readonly plans?: PlanStoreOptions;
  /** Fault injection inside the start transaction, and a count of transaction attempts (specs only). */
  readonly hooks?: { readonly onStartStep?: StartStepHook; readonly onAttempt?: (attempt: number) => void };
  /** Errors the authority's own pool emits (idle connections the server closed); default: a process warning. */
  readonly onError?: PoolErrorHandler;
  /**
   * Refuse every start while the primary has no synchronous standby attached (STORE_UNAVAILABLE,
   * reason `no_sync_standby`, nothing written), so no start is acknowledged on one node only
   * (R13.3). Default false. Checked in the start's write transaction.
   */
  readonly requireSynchronousStandby?: boolean;
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

export interface PostgresStartBarrier extends RecoverableStartBarrierAuthority {
  readonly backend: 'postgres';
  /** The pool every transaction runs on. Exposed for inspection tools and specs. */
  readonly pool: Pool;
  readonly timeouts: PostgresTimeouts;
  readonly writeMode: PostgresWriteMode;
  /** Starts are refused while no synchronous standby is attached (option `requireSynchronousStandby`). */
  readonly requireSynchronousStandby: boolean;
}

/** The same authority: every PostgreSQL authority offers recovery (kept as a name for callers). */
export type RecoverablePostgresStartBarrier = PostgresStartBarrier;

const validTimeout = (name: string, ms: number): number => {
  if (!Number.isSafeInteger(ms) || ms < 1 || ms > 3_600_000) throw new RangeError(`timeouts.${name} must be an integer in 1..3600000 ms, got ${ms}`);
  return ms;
};

/**
 * The options that choose between behaviours take only the values that name one: `migrate:
 * 'false'` (text from a config file) would migrate, a misspelt write mode would run the
 * fault-injection `stepwise` mode, and a pool given beside a connection string would silently win.
 */
const checkPostgresChoices = (options: PostgresStartBarrierOptions): void => {
  requireOneOf('migrate', options.migrate, [true, false]);
  requireOneOf('writeMode', options.writeMode, ['batched', 'stepwise']);
  requireOneOf('requireSynchronousStandby', options.requireSynchronousStandby, [true, false]);
  const { pool } = options as { pool?: unknown };
  if (pool !== undefined) {
    const given = (['connectionString', 'poolConfig', 'onError'] as const).filter((k) => (options as unknown as Record<string, unknown>)[k] !== undefined);
    if (given.length > 0) throw new RangeError(`pool is a pool you own and configure: give it alone, not with ${given.join(', ')}`);
    if (typeof pool !== 'object' || pool === null || typeof (pool as { connect?: unknown }).connect !== 'function' || typeof (pool as { query?: unknown }).query !== 'function') {
      throw new RangeError('pool must be a pg Pool');
    }
  }
  requireFunction('onError', options.onError);
  requireFunctions('hooks', options.hooks, ['onStartStep', 'onAttempt']);
};

export const openPostgresStartBarrier = async (options: PostgresStartBarrierOptions): Promise<PostgresStartBarrier> => {
  requireKnownOptions('PostgreSQL options', options, ['connectionString', 'poolConfig', 'pool', 'schema', 'timeouts', 'maxRetries', 'migrate', 'writeMode', 'evidenceKeys', 'plans', 'hooks', 'onError', 'requireSynchronousStandby']);
  if (options.timeouts !== undefined) requireKnownOptions('timeouts', options.timeouts, Object.keys(DEFAULT_TIMEOUTS));
  checkPostgresChoices(options);
  if (options.schema !== undefined && options.schema !== SQL.SCHEMA) {
    throw new RangeError(`schema must be "${SQL.SCHEMA}" (ADR-0158 R5.2: the migrations and the role grants are written for it), got "${options.schema}"`);
  }
  const given: Partial<Record<string, number>> = options.timeouts ?? {};
  const timeouts = Object.fromEntries(Object.entries(DEFAULT_TIMEOUTS).map(([name, ms]) => [name, validTimeout(name, given[name] ?? ms)])) as unknown as PostgresTimeouts;
  const keys = options.evidenceKeys === undefined ? undefined : createEvidenceKeyring(options.evidenceKeys);
  const plans = checkedPlanOptions(options.plans);
  const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
  if (!Number.isSafeInteger(maxRetries) || maxRetries < 0 || maxRetries > 3) {
    throw new RangeError(`maxRetries must be 0..3 (R5.2: at most three retries), got ${maxRetries}`);
  }
  const owned = options.pool === undefined;
  // Our own pool also bounds the reads that run outside a transaction, at session level, and
  // bounds on the client side what the server cannot: a connect that gets no answer and a
  // statement whose answer never comes (a frozen or partitioned server), R9.5. A pool the
  // caller supplies keeps the caller's own bounds.
  const pool =
    options.pool ??
    createOwnedPool({ connectionString: options.connectionString, poolConfig: options.poolConfig, onError: options.onError, session: timeouts });
  try {
    const client = await connectTyped(pool, owned ? secretsOf(options) : []);
    try {
      if (options.migrate ?? true) await migratePostgres(client, undefined, { deadlineMs: timeouts.deadlineMs });
      else await assertSchemaCurrent(client);
    } finally {
      client.release();
    }
  } catch (e) {
    if (owned) await pool.end().catch(() => undefined);
    throw mapPgError(e);
  }
  return new PostgresAuthority(pool, owned, timeouts, maxRetries, options.writeMode ?? 'batched', options.hooks?.onStartStep, options.hooks?.onAttempt, keys, plans, options.requireSynchronousStandby ?? false);
};

class PostgresAuthority implements PostgresStartBarrier {
  readonly backend = 'postgres' as const;
  closed = false;
  readonly planStore: InvocationPlans;
  readonly plans: PlansApi;
  private readonly tx: PostgresTransactions;

  constructor(
    readonly pool: Pool,
    private readonly ownsPool: boolean,
    readonly timeouts: PostgresTimeouts,
    maxRetries: number,
    readonly writeMode: PostgresWriteMode,
    private readonly hook: StartStepHook | undefined,
    onAttempt: ((attempt: number) => void) | undefined,
    private readonly keys: EvidenceKeyring | undefined,
    plans: PlanStoreOptions | undefined,
    readonly requireSynchronousStandby: boolean,
  ) {
    this.tx = new PostgresTransactions(pool, timeouts, maxRetries, onAttempt);
    this.planStore = createInvocationPlans(plans, postgresPlanRows(() => this.pool));
    this.plans = plansApiOf(() => this.planStore, decodeStartIdArgs);
    this.sealer = keys === undefined ? undefined : postgresSealer(keys);
    registerAuthority(this, () => !this.closed, this.planStore, (command, sealed) => this.prepareStart(command, sealed));
  }

  private readonly sealer: PostgresSealer | undefined;

  private assertOpen(): void {
    if (this.closed) throw new StoreUnavailableError('closed', 'the PostgreSQL start barrier authority is closed; nothing was written, open a new one');
  }

  /** What `util.inspect` shows: the settings, never the pool's connection string or a password (pool.ts). */
  [inspect.custom](_depth: number, opts: Parameters<typeof inspect>[1], insp: typeof inspect): string {
    const shown = { backend: this.backend, closed: this.closed, writeMode: this.writeMode, requireSynchronousStandby: this.requireSynchronousStandby, timeouts: this.timeouts, ownsPool: this.ownsPool, pool: this.ownsPool ? this.pool : '[a pool you own]' };
    return `PostgresStartBarrier ${insp(shown, opts)}`;
  }

  private transaction<T>(runId: string, body: (tx: Tx) => Promise<T>, beforeBegin?: BeforeBegin, budget?: AttemptBudget, queueFirst = false): Promise<T> {
    this.assertOpen();
    return this.tx.transaction(runId, body, beforeBegin, budget, queueFirst);
  }

  private read<T>(body: (q: Queryable) => Promise<T>): Promise<T> {
    this.assertOpen();
    return this.tx.read(body);
  }

  /** `sealed`: the start's sealed plan, written in the start's own transaction (R12.2). */
  private async prepareStart(command: unknown, sealed?: InvocationPlanRow, context?: StartAttemptContext): Promise<PrepareResult> {
    this.assertOpen();
    const decoded = decodeStartAttempt(command, context); // bad input: typed error, no transaction opened
    const budget = this.tx.budget(); // one budget for every attempt of this start (R9.5)
    const underTurn = (d: DecodedStartCommand, b: AttemptBudget, busy: boolean) => this.prepareInTransaction(d, b, 'batched', busy, sealed); // a turn still held: queue for it before beginning
    const ctx = { pool: this.pool, timeouts: this.timeouts, tx: this.tx, keys: this.keys, sealer: this.sealer, hook: this.hook, requireSyncStandby: this.requireSynchronousStandby, underTurn };
    const started = this.writeMode === 'stepwise' ? this.prepareInTransaction(decoded, budget, 'stepwise', false, sealed) : prepareInRoundTrips(ctx, decoded, budget, sealed);
    // out of write transactions: a racer of the writer that was first reads its answer (readAnswers.ts); a compacted start answers typed
    return answeredOnExhaustion(started, { pool: this.pool, runId: decoded.command.stepRun.runId, timeouts: this.timeouts, budget }, () => startAnswerOnRead(this.pool, decoded, this.keys)).catch((e: unknown) => compactedStartAnswer(this.pool, decoded, e));
  }

  readonly barriers = {
    prepare: (command: unknown, context?: StartAttemptContext): Promise<PrepareResult> => this.prepareStart(command, undefined, context),
    getByStartId: async (startId: string): Promise<StoredBarrier | null> => {
      const id = decodeStartIdArgs(startId);
      return this.read((q) => readBarrier(q, id, this.keys));
    },
    getByStepRunAttempt: async (runIdArg: string, stepRunIdArg: string, version: number): Promise<StoredBarrier | null> => {
      const { runId, stepRunId, startedStepRunVersion } = decodeAttemptArgs(runIdArg, stepRunIdArg, version);
      return this.read((q) => readBarrierOfAttempt(q, runId, stepRunId, startedStepRunVersion, this.keys));
    },
  };

  /**
   * A start in a transaction that takes the Run's turn first and decides under it: `stepwise`
   * (one statement per step, the fault hook between them), and a `batched` start that lost the
   * turn in its two round trips (roundTripStart.ts). Its first read is the two-round-trip
   * path's, so an exact replay (R4.2) or drift (R4.3) is answered from it in one round trip,
   * without a transaction or the Run's turn.
   */
  private async prepareInTransaction(decoded: DecodedStartCommand, budget: AttemptBudget, mode: PostgresWriteMode, turnBusy: boolean, sealed: InvocationPlanRow | undefined): Promise<PrepareResult> {
    const runId = decoded.command.stepRun.runId;
    try {
      const { first, existing } = await this.read(async (q) => {
        const read = await readStart(q as Pool, decoded);
        return { first: read, existing: await existingOfRead(read, decoded, this.keys, q) };
      });
      if (existing !== null) return { outcome: 'existing', barrier: existing };
      // with the turn busy the transaction waits for it first, so the lookup is read again after the wait
      let fresh: LookupBeforeBegin | undefined = turnBusy ? undefined : { hits: first.hits, runVersion: stateOfRead(first, decoded).run?.version ?? null };
      const keys = replayKeysOf(decoded.command);
      // again after a wait or a retry; an exact replay or drift is answered from it, with no BEGIN (readAnswers.ts)
      const lookup = async (q: Queryable) => {
        const hits = fresh ?? (await lookupBeforeBegin(q, keys, runId));
        fresh = undefined;
        return startAnswerBeforeBegin(q, decoded, hits, this.keys);
      };
      const start = async (tx: Tx) => {
        if (this.requireSynchronousStandby) await tx.client.query(SQL.REQUIRE_SYNC_STANDBY); // before any write
        return runStartTransaction(startUnitOfWork(tx, mode, this.keys, this.sealer), decoded, this.hook, sealed);
      };
      return await this.transaction(runId, start, lookup, budget, turnBusy);
    } catch (e) {
      if (!isUniqueViolation(e)) throw e;
      return this.transaction(runId, (tx) => resolveUniqueViolation(tx.client, decoded, e, this.keys), undefined, budget);
    }
  }

  readonly runs = {
    handle: async (command: unknown): Promise<AppendOutcome> => {
      this.assertOpen();
      const decoded = decodeLifecycle(command);
      let events: StoredEvent[] = [];
      const budget = this.tx.budget(); // one budget and deadline for every transaction of the command (R13.1)
      // after a lost race, a refusal (run_exists, ...) is decided on a read, with no BEGIN (readAnswers.ts)
      const refusalOnRead = async (q: Queryable) => (budget.attempts > 0 ? lifecycleRefusalOnRead(q, decoded, this.keys, this.timeouts) : undefined);
      const body = (tx: Tx) => {
        events = [];
        return runLifecycleTransaction(lifecycleUnitOfWork(tx, events, this.sealer, this.keys), decoded);
      };
      const attempt = () => this.transaction(decoded.data.runId, body, refusalOnRead, budget);
      // A concurrent creator won (CreateRun, CreateStepRun): re-decide on fresh state, which
      // turns the race into the typed precondition the decider raises (run_exists, ...).
      const decided = attempt().catch(async (e: unknown) => {
        if (!isUniqueViolation(e)) throw e;
        return attempt().catch(async (again: unknown) => {
          // decided again on fresh state and still a taken key: the heads may be behind the log
          if (isUniqueViolation(again)) await this.read((q) => requireHeadsAtLogEnd(q, decoded.data.runId));
          throw again;
        });
      });
      const decision = await answeredOnExhaustion(decided, { pool: this.pool, runId: decoded.data.runId, timeouts: this.timeouts, budget }, () => lifecycleRefusalOnPool(this.pool, decoded, this.keys, this.timeouts)).catch(
        (e: unknown) => requireRunNotCompacted(this.pool, decoded.data.runId, e),
      );
      return { runVersion: decision.after.run!.version, events };
    },
    getStepRun: async (runIdArg: string, stepRunIdArg: string): Promise<StepRunView | null> => {
      const { runId, stepRunId } = decodeStepRunArgs(runIdArg, stepRunIdArg);
      return this.read(async (q) => {
        // One statement reads the head and the StepRun's log: no head is null only where the log
        // holds none of it, and a head is answered only as the StepRun its log made.
        const s = await loadStepRunFromLog(q, runId, stepRunId);
        return s === undefined ? null : { ...s, digest: stepRunRowOf(s).digest };
      });
    },
    readStream: async (runId: string): Promise<readonly StoredEvent[]> => {
      const id = decodeRunArgs(runId);
      return this.read((q) => readStream(q, id, this.keys));
    },
  };

  /** Recovery read models and operator resolutions, in REPEATABLE READ snapshots. */
  driverClaims(): DriverClaims {
    return claimsOnVerifiedStarts(postgresDriverClaims(this.pool, this.timeouts), (id) => this.barriers.getByStartId(id));
  }

  readonly recovery: RecoveryApi = postgresRecoveryOf(this, () => this.keys, () => this.planStore);

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsPool) await this.pool.end();
  }
}
