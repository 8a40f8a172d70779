import type Database from 'better-sqlite3';
import { isCallerOwned, openSqliteConnection } from './connection';
import type { SqliteDatabase } from './database';
import { decodeStartAttempt, type DriverClaims, type StartAttemptContext } from '../../domain';
import { requireHeadIsItsLog } from '../../application/checks/readChecks';
import { requireFunctions, requireKnownOptions, requireOneOf } from '../../application/openErrors';
import { decodeAttemptArgs, decodeRunArgs, decodeStartIdArgs, decodeStepRunArgs } from '../../domain/readArgs';
import { stepRunRowOf } from '../../projections/rows';
import type { PlansApi, RecoverableStartBarrierAuthority, RecoveryApi, StartStepHook, RunEventStore } from '../../application/authority';
import type { AppendOutcome, PrepareResult, StepRunView, StoredBarrier, StoredEvent } from '../../domain/records';
import { SerialExecutor } from '../../application/serialExecutor';
import { decodeLifecycle, runLifecycleTransaction } from '../../application/lifecycleProtocol';
import { replayOf, runStartTransaction } from '../../application/startProtocol';
import { createRecoveryApi } from '../../application/recoveryRules';
import { claimsOnVerifiedStarts } from '../../application/driverClaimRules';
import { createEvidenceKeyring, type EvidenceKeyring, type EvidenceKeyringOptions } from '../../application/evidenceKeys';
import { mapSqliteError, mappedRead } from './errors';
import { createRunEventStore } from './eventStore';
import { openReadOnlyBarrierFile, openWritable, schemaGuard } from './fileIdentity';
import { createSqliteNoteStore } from './sqliteNotes';
import { loadRunState, readBarrier, readBarrierOfAttempt, readStream, stepRunLogOf, streamHeadsOf } from './reads';
import { createSqliteRecoveryView } from './sqliteRecoveryView';
import { nowMsOf, prepareStatements, type Statements } from './statements';
import { lifecycleUnitOfWork, startUnitOfWork, type Sealer } from './writes';
import { readSealedSpan, sqliteSealer } from './sqliteSeals';
import { sqliteDriverClaims } from './sqliteDriverClaims';
import { sqlitePlanRows } from './sqlitePlans';
import { checkedPlanOptions, createInvocationPlans, plansApiOf, type InvocationPlanRow, type InvocationPlans, type PlanStoreOptions } from '../../application/invocationPlans';
import { registerAuthority } from '../../application/execution';
export type { RunEventStore } from '../../application/authority';

export type SqliteStartBarrierOptions = SqliteStartBarrierSettings &
  (
    | { /** Database file; created and migrated if absent (unless `readOnly`). */ readonly path: string; readonly database?: undefined }
    | { /** A better-sqlite3 Database you opened and own (closing the authority leaves it open); it is migrated and its pragmas set. */ readonly database: SqliteDatabase; readonly path?: undefined }
  );

export interface SqliteStartBarrierSettings {
  /**
   * Open an existing, current barrier file read-only (R10.3): nothing is created, migrated or
   * written; any other file is refused unchanged. Writes then fail. Only with `path`.
   */
  readonly readOnly?: boolean;
  /**
   * FULL (default): a committed start survives power loss. NORMAL: in WAL mode a commit is
   * durable against a process crash but the last commits may roll back on power loss.
   */
  readonly synchronous?: 'FULL' | 'NORMAL';
  /** How long to wait for another process's write lock before TRANSACTION_TIMEOUT (default 5 s). */
  readonly busyTimeoutMs?: number;
  /** Fault injection inside the start transaction (specs only). */
  readonly hooks?: { readonly onStartStep?: StartStepHook };
  /** Keyed evidence (R9.4): seal new barriers, and verify every barrier read. */
  readonly evidenceKeys?: EvidenceKeyringOptions;
  /** Sealed invocation plans (R12.2): the keyring that seals tool inputs; execution opens only with it (R12.4). */
  readonly plans?: PlanStoreOptions;
}

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

/** The options' cells, checked before anything is opened (R10.1: one input, one meaning). */
const checkSqliteOptions = (options: SqliteStartBarrierOptions): void => {
  requireKnownOptions('SQLite options', options, ['path', 'database', 'readOnly', 'synchronous', 'busyTimeoutMs', 'hooks', 'evidenceKeys', 'plans']);
  const path: unknown = options.path;
  if (path !== undefined && typeof path !== 'string') throw new RangeError(`path must be a file path (text), got ${typeof path}`);
  requireOneOf('synchronous', options.synchronous, ['FULL', 'NORMAL']);
  const busy = options.busyTimeoutMs;
  if (busy !== undefined && !(Number.isSafeInteger(busy) && busy >= 0 && busy <= 2_147_483_647)) throw new RangeError(`busyTimeoutMs must be an integer in 0..2147483647 ms, got ${String(busy)}`);
  requireOneOf('readOnly', options.readOnly, [true, false]);
  if (path !== undefined && options.database !== undefined) throw new RangeError('give path or database, not both');
  requireFunctions('hooks', options.hooks, ['onStartStep']);
};

export const openSqliteStartBarrier = async (options: SqliteStartBarrierOptions): Promise<SqliteStartBarrier> => {
  checkSqliteOptions(options);
  const keys = options.evidenceKeys === undefined ? undefined : createEvidenceKeyring(options.evidenceKeys), plans = checkedPlanOptions(options.plans);
  // R10.3: a read-only authority never creates, migrates or changes the file.
  const readOnly = options.readOnly === true && options.path !== undefined;
  const open = () => (readOnly ? openReadOnlyBarrierFile(options.path!) : openSqliteConnection(options));
  let db: ReturnType<typeof open>;
  try {
    db = open();
  } catch (e) {
    throw mapSqliteError(e);
  }
  try {
    if (readOnly) {
      db.pragma(`busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5000)}`);
    } else {
      openWritable(db, options.path ?? db.name, options.synchronous ?? 'FULL', options.busyTimeoutMs ?? 5000);
    }
  } catch (e) {
    if (!isCallerOwned(db)) db.close();
    throw mapSqliteError(e);
  }
  try {
    return new SqliteAuthority(db, options.hooks?.onStartStep, keys, plans);
  } catch (e) {
    // preparing its statements: a table or column they name is gone (mapped as damage)
    if (!isCallerOwned(db)) db.close();
    throw mapSqliteError(e);
  }
};

class SqliteAuthority implements SqliteStartBarrier {
  readonly backend = 'sqlite' as const;
  private readonly serial = new SerialExecutor();
  closed = false;
  private readonly s: Statements;
  private readonly seal: Sealer | undefined;
  private readonly schemaAsOpened: () => void;
  private readonly tx: { readonly deferred: Database.Statement; readonly immediate: Database.Statement; readonly commit: Database.Statement; readonly rollback: Database.Statement };

  constructor(
    readonly db: Database.Database,
    private readonly hook: StartStepHook | undefined,
    private readonly keys: EvidenceKeyring | undefined,
    plans: PlanStoreOptions | undefined,
  ) {
    this.planStore = createInvocationPlans(plans, this.planRows);
    this.plans = plansApiOf(() => this.planStore, decodeStartIdArgs);
    this.s = prepareStatements(db);
    this.tx = { deferred: db.prepare('BEGIN DEFERRED'), immediate: db.prepare('BEGIN IMMEDIATE'), commit: db.prepare('COMMIT'), rollback: db.prepare('ROLLBACK') };
    this.schemaAsOpened = schemaGuard(db);
    this.seal = keys === undefined ? undefined : sqliteSealer(this.s, keys);
    this.eventStore = createRunEventStore(this.s, { read: (body) => this.read(body), write: (body) => this.write(body) }, false, this.seal, keys);
    registerAuthority(this, () => !this.closed, this.planStore, (command, sealed) => this.prepareStart(command, sealed));
  }

  private readonly planRows = sqlitePlanRows(() => this.db, { write: (body) => this.write(body), read: (body) => this.read(body) });
  readonly eventStore: RunEventStore;
  readonly planStore: InvocationPlans;
  readonly plans: PlansApi;

  // ---------------------------------------------------------------- transactions
  /** One `BEGIN IMMEDIATE` per operation on the one connection (R5.1, R6.3). */
  private write<T>(body: () => Promise<T>, startId?: string): Promise<T> {
    return this.serial.run(async () => {
      this.assertOpen();
      try {
        return await this.transaction(this.tx.immediate, body);
      } catch (e) {
        throw mapSqliteError(e, startId);
      }
    });
  }

  /**
   * A start reads first (R3.1, R5.1): the replay lookup in a read transaction (a WAL snapshot),
   * so an exact replay or drift is answered without the write lock. A new start is then decided
   * again, from the lookup on, in one `BEGIN IMMEDIATE` that waits its turn (busy_timeout) and
   * holds the write lock from its first read: a racing writer's commit is seen, and no deferred
   * upgrade can be refused (SQLITE_BUSY_SNAPSHOT).
   */
  private start<T>(replay: () => Promise<T | null>, body: () => Promise<T>, startId: string): Promise<T> {
    return this.serial.run(async () => {
      this.assertOpen();
      try {
        return (await this.transaction(this.tx.deferred, replay)) ?? (await this.transaction(this.tx.immediate, body));
      } catch (e) {
        throw mapSqliteError(e, startId);
      }
    });
  }

  /** One transaction, committed when `body` returns and rolled back when it throws; errors raw. */
  private async transaction<T>(begin: Database.Statement, body: () => Promise<T>): Promise<T> {
    begin.run();
    try {
      this.schemaAsOpened();
      const result = await body();
      this.tx.commit.run();
      return result;
    } catch (e) {
      try {
        if (this.db.inTransaction) this.tx.rollback.run();
      } catch {
        // SQLite may already have rolled back (SQLITE_FULL); the first error is the answer
      }
      throw e;
    }
  }

  /** Reads: one deferred transaction (one snapshot), refused on a schema changed since the open checked it. */
  private read<T>(body: () => T): Promise<T> {
    return this.serial.run(async () => {
      this.assertOpen();
      try {
        this.tx.deferred.run();
        try {
          this.schemaAsOpened();
          return body();
        } finally {
          if (this.db.inTransaction) this.tx.commit.run();
        }
      } catch (e) {
        throw mapSqliteError(e);
      }
    });
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the SQLite start barrier authority is closed');
  }

  /**
   * `read` for async bodies (the recovery view): one snapshot, still one operation at a time.
   * `verify` reads a damaged schema to report it (its integrity checks list each object).
   */
  private snapshot<T>(body: () => Promise<T>, checkSchema = true): Promise<T> {
    return this.serial.run(async () => {
      this.assertOpen();
      try {
        this.db.exec('BEGIN DEFERRED');
        try {
          if (checkSchema) this.schemaAsOpened();
          return await body();
        } finally {
          if (this.db.inTransaction) this.db.exec('COMMIT');
        }
      } catch (e) {
        throw mapSqliteError(e);
      }
    });
  }

  // ---------------------------------------------------------------- the public surface

  /** `sealed`: the start's sealed plan, written in its transaction (R12.2). A fresh unit of work per attempt: nothing rolled back is carried on. */
  private async prepareStart(command: unknown, sealed?: InvocationPlanRow, context?: StartAttemptContext): Promise<PrepareResult> {
    const decoded = decodeStartAttempt(command, context); // bad input: typed error, nothing opened
    const uow = () => startUnitOfWork(this.s, this.keys, this.seal, this.hook === undefined, this.planRows.insertInStart);
    const replay = async (): Promise<PrepareResult | null> => {
      const existing = await replayOf(uow(), decoded, this.hook, sealed);
      return existing === null ? null : { outcome: 'existing', barrier: existing };
    };
    return this.start(replay, () => runStartTransaction(uow(), decoded, this.hook, sealed), decoded.command.startId);
  }

  readonly barriers = {
    prepare: (command: unknown, context?: StartAttemptContext): Promise<PrepareResult> => this.prepareStart(command, undefined, context),
    getByStartId: async (startId: string): Promise<StoredBarrier | null> => {
      const id = decodeStartIdArgs(startId);
      return this.read(() => readBarrier(this.s, id, this.keys));
    },
    getByStepRunAttempt: async (runIdArg: string, stepRunIdArg: string, version: number): Promise<StoredBarrier | null> => {
      const { runId, stepRunId, startedStepRunVersion } = decodeAttemptArgs(runIdArg, stepRunIdArg, version);
      return this.read(() => readBarrierOfAttempt(this.s, runId, stepRunId, startedStepRunVersion, this.keys));
    },
  };

  readonly runs = {
    handle: async (command: unknown): Promise<AppendOutcome> => {
      const decoded = decodeLifecycle(command);
      const events: StoredEvent[] = [];
      const decision = await this.write(() => runLifecycleTransaction(lifecycleUnitOfWork(this.s, events, this.seal, this.keys), decoded));
      return { runVersion: decision.after.run!.version, events };
    },
    getStepRun: async (runIdArg: string, stepRunIdArg: string): Promise<StepRunView | null> => {
      const { runId, stepRunId } = decodeStepRunArgs(runIdArg, stepRunIdArg);
      return this.read(() => {
        const s = loadRunState(this.s, runId, [stepRunId]).stepRuns[stepRunId];
        if (s === undefined) return null; // loadRunState asked the log first (R9.3)
        requireHeadIsItsLog(s, ...stepRunLogOf(this.s, runId, stepRunId));
        return { ...s, digest: stepRunRowOf(s).digest };
      });
    },
    readStream: async (runId: string): Promise<readonly StoredEvent[]> => {
      const id = decodeRunArgs(runId);
      return this.read(() => readStream(this.s, id, this.keys));
    },
  };

  private recoveryView: ReturnType<typeof createSqliteRecoveryView> | undefined;
  /** Claims go through this connection, one operation at a time: never inside a start's transaction. */
  driverClaims(): DriverClaims {
    return claimsOnVerifiedStarts(sqliteDriverClaims(this.db, { write: (body) => this.write(body), read: (body) => this.read(body) }), (id) => this.barriers.getByStartId(id));
  }

  private view(): ReturnType<typeof createSqliteRecoveryView> {
    return (this.recoveryView ??= createSqliteRecoveryView({
      db: this.db,
      readBarrier: (id) => readBarrier(this.s, id, this.keys),
      nowMs: () => nowMsOf(this.s),
      runHeads: (runId) => streamHeadsOf(this.s, runId),
      sealedSpan: (streamId, from, to) => readSealedSpan(this.s, streamId, from, to),
    }));
  }

  private readonly notes = createSqliteNoteStore(() => this.db, (body) => this.write(body));

  readonly recovery: RecoveryApi = createRecoveryApi({
    snapshot: (body) => this.snapshot(() => body(this.view())),
    // one deferred transaction for all of verify, notes too: other connections never wait on it
    verifySession: (body) => this.snapshot(() => body({ read: (read) => mappedRead(() => read(this.view())), notes: this.notes }), false),
    handle: (command) => this.runs.handle(command),
    keyring: () => this.keys,
    notes: this.notes,
    plans: () => this.planStore,
  });

  close(): Promise<void> {
    return this.serial.run(async () => {
      if (this.closed) return;
      this.closed = true;
      if (!isCallerOwned(this.db)) this.db.close();
    });
  }
}
