import { decodeAttemptArgs, decodeStartIdArgs } from '../../domain/readArgs';
import { randomUUID } from 'node:crypto';
import {
  ConcurrencyExhaustedError,
  CorruptRecordError,
  canonicalJson,
  decodeStartCommand,
  noReplayHits,
  streamNameOf,
  type ReplayIdentity,
  type RunState,
  type StartFacts,
} from '../../domain';
import {
  attemptValue,
  naturalEventIdOf,
  runRowOf,
  startRowsOf,
  stepRunRowOf,
  type AuditEventRow,
  type AuditReceiptRow,
  type BarrierRow,
  type MutationRow,
  type ReplayIdentityRow,
  type RunRow,
  type StepRunRow,
  type TraceAnchorRow,
} from '../../projections/rows';
import { decodeRunRow, decodeStepRunRow, runStateOf } from '../../projections/runState';
import { startEventPositions, storedEventOf, verifyStartRows, type EventRow } from '../../projections/verifyRows';
import { outcomeRowOf, type StartOutcomeRow } from '../../projections/recovery';
import type { AppendOutcome, PrepareResult, RecoverableStartBarrierAuthority, RecoveryApi, StartStepHook, StepRunView, StoredBarrier, StoredEvent } from '../authority';
import { createRecoveryApi } from '../recovery';
import { createMemoryNoteStore } from '../notes';
import { createMemoryRecoveryView } from './recovery';
import { SerialExecutor } from '../serial';
import { decodeLifecycle, runLifecycleTransaction, runStartTransaction, type LifecycleUnitOfWork, type StartUnitOfWork } from '../startProtocol';

// An in-memory authority with the same rows, the same protocol and the same verification as
// the SQL backends, for specs and for embedding in tests of callers. Atomic by construction:
// a transaction works on a copy of the tables and swaps it in only on success.

export interface Tables {
  streams: Map<string, number>;
  events: EventRow[];
  eventIds: Set<string>;
  runs: Map<string, RunRow>;
  stepRuns: Map<string, StepRunRow>;
  audit: Map<string, AuditEventRow>;
  trace: Map<string, TraceAnchorRow>;
  receipts: Map<string, AuditReceiptRow>;
  mutations: Map<string, MutationRow>;
  barriers: Map<string, BarrierRow>;
  identities: Map<string, ReplayIdentityRow>;
  /** Recovery read model (issue 5): outcome rows by start id. */
  outcomes: Map<string, StartOutcomeRow>;
}

const emptyTables = (): Tables => ({
  streams: new Map(),
  events: [],
  eventIds: new Set(),
  runs: new Map(),
  stepRuns: new Map(),
  audit: new Map(),
  trace: new Map(),
  receipts: new Map(),
  mutations: new Map(),
  barriers: new Map(),
  identities: new Map(),
  outcomes: new Map(),
});

const copyTables = (t: Tables): Tables => ({
  streams: new Map(t.streams),
  events: [...t.events],
  eventIds: new Set(t.eventIds),
  runs: new Map(t.runs),
  stepRuns: new Map(t.stepRuns),
  audit: new Map(t.audit),
  trace: new Map(t.trace),
  receipts: new Map(t.receipts),
  mutations: new Map(t.mutations),
  barriers: new Map(t.barriers),
  identities: new Map(t.identities),
  outcomes: new Map(t.outcomes),
});

const identityKey = (identity: string, value: string) => `${identity}\u0000${value}`;
const stepKey = (runId: string, stepRunId: string) => `${runId}\u0000${stepRunId}`;

const insertUnique = <V>(map: Map<string, V>, key: string, value: V, what: string): void => {
  if (map.has(key)) throw new Error(`unique violation: ${what} ${key}`);
  map.set(key, value);
};

export interface MemoryStartBarrierOptions {
  readonly hooks?: { readonly onStartStep?: StartStepHook };
  /** The store's clock; defaults to Date.now (this backend has no database clock). */
  readonly clock?: () => number;
}

export const openMemoryStartBarrier = async (options: MemoryStartBarrierOptions = {}): Promise<RecoverableStartBarrierAuthority> =>
  new MemoryAuthority(options.hooks?.onStartStep, options.clock ?? Date.now);

class MemoryAuthority implements RecoverableStartBarrierAuthority {
  readonly backend = 'memory' as const;
  private tables = emptyTables();
  private readonly serial = new SerialExecutor();

  constructor(
    private readonly hook: StartStepHook | undefined,
    private readonly clock: () => number,
  ) {}

  private transact<T>(body: (t: Tables) => Promise<T>): Promise<T> {
    return this.serial.run(async () => {
      const draft = copyTables(this.tables);
      const result = await body(draft);
      this.tables = draft;
      return result;
    });
  }

  private loadRunState(t: Tables, runId: string, stepRunIds: readonly string[]): RunState {
    const row = t.runs.get(runId);
    if (row === undefined) return runStateOf(null, []);
    const run = decodeRunRow(row, t.streams.get(streamNameOf(runId)) ?? null);
    const stepRuns = stepRunIds.flatMap((id) => {
      const r = t.stepRuns.get(stepKey(runId, id));
      return r === undefined ? [] : [decodeStepRunRow(r)];
    });
    return runStateOf(run, stepRuns);
  }

  private insertEvents(t: Tables, stream: string, from: number, events: readonly { type: string; data: unknown }[], committedAtMs: number): StoredEvent[] {
    return events.map((event, i) => {
      const eventId = naturalEventIdOf(event as never) ?? randomUUID();
      if (t.eventIds.has(eventId)) throw new Error(`unique violation: event ${eventId}`);
      const position = from + i + 1;
      if (t.events.some((e) => e.stream_id === stream && e.stream_position === position)) throw new Error(`unique violation: ${stream}@${position}`);
      t.eventIds.add(eventId);
      t.events.push({ stream_id: stream, stream_position: position, event_id: eventId, event_type: event.type, data_json: canonicalJson(event.data), committed_at_ms: committedAtMs });
      return { eventId, streamPosition: position, globalPosition: t.events.length, committedAtMs, event: event as never };
    });
  }

  private casStream(t: Tables, stream: string, expected: number, next: number): void {
    if (t.streams.get(stream) !== expected) throw new ConcurrencyExhaustedError(1, `stream ${stream} moved past version ${expected}`);
    t.streams.set(stream, next);
  }

  private readBarrier(t: Tables, startId: string): StoredBarrier | null {
    const barrier = t.barriers.get(startId);
    if (barrier === undefined) return null;
    let sequence = 0;
    try {
      sequence = Number((JSON.parse(barrier.barrier_json) as { runEvent?: { runEventSequence?: number } }).runEvent?.runEventSequence ?? 0);
    } catch {
      // reported by verifyStartRows
    }
    const positions = startEventPositions(sequence);
    const stream = streamNameOf(barrier.run_id);
    return verifyStartRows({
      barrier,
      audit: t.audit.get(barrier.audit_event_id),
      trace: t.trace.get(barrier.trace_id),
      receipt: t.receipts.get(barrier.audit_receipt_id),
      mutation: t.mutations.get(barrier.mutation_id),
      events: t.events.filter((e) => e.stream_id === stream && positions.includes(e.stream_position)).sort((a, b) => a.stream_position - b.stream_position),
      identities: [...t.identities.values()].filter((r) => r.start_id === startId),
    });
  }

  private startUow(t: Tables): StartUnitOfWork {
    return {
      lookupReplay: async (keys) => {
        const hits = noReplayHits() as Record<ReplayIdentity, { startId: string; commandDigest: string }[]>;
        const values: Record<ReplayIdentity, string> = {
          ...keys,
          attempt: attemptValue(keys.attempt.runId, keys.attempt.stepRunId, keys.attempt.startedStepRunVersion),
        };
        for (const [identity, value] of Object.entries(values) as [ReplayIdentity, string][]) {
          const row = t.identities.get(identityKey(identity, value));
          if (row) hits[identity] = [{ startId: row.start_id, commandDigest: row.command_digest }];
        }
        return hits;
      },
      lockForStart: async (runId, stepRunId) => this.loadRunState(t, runId, [stepRunId]),
      readBarrier: async (startId) => this.readBarrier(t, startId),
      appendStart: async (facts: StartFacts, before: RunState, hook: StartStepHook) => {
        const run = before.run!;
        const stream = streamNameOf(run.runId);
        const committedAtMs = this.clock();
        const rows = startRowsOf(facts, committedAtMs);
        const [audit, trace, receipt, started, committed] = facts;
        const from = before.stepRuns[started.data.stepRunId]!;
        this.insertEvents(t, stream, run.version, [audit, trace, receipt], committedAtMs);
        insertUnique(t.audit, rows.audit.audit_event_id, rows.audit, 'audit event');
        insertUnique(t.trace, rows.trace.trace_id, rows.trace, 'trace anchor');
        insertUnique(t.receipts, rows.receipt.audit_receipt_id, rows.receipt, 'audit receipt');
        await hook('evidence');
        const key = stepKey(from.runId, from.stepRunId);
        const current = t.stepRuns.get(key);
        if (current?.version !== from.version || current.status !== from.status || current.digest !== started.data.fromStepRunDigest) {
          throw new ConcurrencyExhaustedError(1, `StepRun ${from.stepRunId} moved before the start committed`);
        }
        t.stepRuns.set(key, stepRunRowOf({ ...from, status: 'running', version: started.data.stepRunVersion, lastStartId: started.data.startId }));
        await hook('stepRunCas');
        const nextVersion = run.version + facts.length;
        this.casStream(t, stream, run.version, nextVersion);
        t.runs.set(run.runId, { ...t.runs.get(run.runId)!, version: nextVersion });
        await hook('runCas');
        this.insertEvents(t, stream, run.version + 3, [started], committedAtMs);
        insertUnique(t.mutations, rows.mutation.mutation_id, rows.mutation, 'mutation');
        await hook('runEvent');
        this.insertEvents(t, stream, run.version + 4, [committed], committedAtMs);
        insertUnique(t.barriers, rows.barrier.start_id, rows.barrier, 'barrier');
        for (const r of rows.identities) insertUnique(t.identities, identityKey(r.identity, r.value), r, 'replay identity');
        await hook('barrier');
        return { record: committed.data.barrier, barrierDigest: committed.data.barrierDigest, committedAtMs };
      },
    };
  }

  private lifecycleUow(t: Tables, collect: StoredEvent[]): LifecycleUnitOfWork {
    return {
      lockForLifecycle: async (runId, stepRunId) => this.loadRunState(t, runId, stepRunId === undefined ? [] : [stepRunId]),
      appendLifecycle: async (events, before, after) => {
        const run = after.run!;
        const stream = streamNameOf(run.runId);
        const from = before.run?.version ?? 0;
        if (before.run === null) {
          if (t.streams.has(stream)) throw new ConcurrencyExhaustedError(1, `stream ${stream} already exists`);
          t.streams.set(stream, run.version);
        } else {
          this.casStream(t, stream, from, run.version);
        }
        t.runs.set(run.runId, runRowOf(run));
        const appended = this.insertEvents(t, stream, from, events, this.clock());
        collect.push(...appended);
        // Recovery read model (issue 5), inline: swapped in with the events or not at all.
        for (const e of appended) {
          const row = outcomeRowOf(e);
          if (row !== undefined) insertUnique(t.outcomes, row.start_id, row, 'start outcome');
        }
        for (const [id, s] of Object.entries(after.stepRuns)) if (before.stepRuns[id] !== s) t.stepRuns.set(stepKey(s.runId, id), stepRunRowOf(s));
      },
    };
  }

  readonly barriers = {
    prepare: async (command: unknown): Promise<PrepareResult> => {
      const decoded = decodeStartCommand(command);
      return this.transact((t) => runStartTransaction(this.startUow(t), decoded, this.hook));
    },
    getByStartId: async (startId: string) => this.readBarrier(this.tables, decodeStartIdArgs(startId)),
    getByStepRunAttempt: async (runIdArg: string, stepRunIdArg: string, version: number) => {
      const { runId, stepRunId, startedStepRunVersion: v } = decodeAttemptArgs(runIdArg, stepRunIdArg, version);
      const row = this.tables.identities.get(identityKey('attempt', attemptValue(runId, stepRunId, v)));
      if (row === undefined) return null;
      const found = this.readBarrier(this.tables, row.start_id);
      if (found === null) throw new CorruptRecordError('replay index', row.value, `names start ${row.start_id}, which has no barrier`);
      return found;
    },
  };

  readonly runs = {
    handle: async (command: unknown): Promise<AppendOutcome> => {
      const decoded = decodeLifecycle(command);
      const events: StoredEvent[] = [];
      const decision = await this.transact((t) => runLifecycleTransaction(this.lifecycleUow(t, events), decoded));
      return { runVersion: decision.after.run!.version, events };
    },
    getStepRun: async (runId: string, stepRunId: string): Promise<StepRunView | null> => {
      const s = this.loadRunState(this.tables, runId, [stepRunId]).stepRuns[stepRunId];
      return s === undefined ? null : { ...s, digest: stepRunRowOf(s).digest };
    },
    readStream: async (runId: string): Promise<readonly StoredEvent[]> => {
      const stream = streamNameOf(runId);
      return this.tables.events.flatMap((e, i) => (e.stream_id === stream ? [storedEventOf({ ...e, global_position: i + 1 })] : []));
    },
  };

  /** Recovery read models and operator resolutions (issue 5), over the current tables. */
  readonly recovery: RecoveryApi = createRecoveryApi({
    snapshot: async (body) => {
      const tables = this.tables;
      return body(createMemoryRecoveryView(tables, { readBarrier: (id) => this.readBarrier(tables, id), nowMs: () => this.clock() }));
    },
    handle: (command) => this.runs.handle(command),
    clock: () => this.clock(),
    notes: createMemoryNoteStore(() => this.clock()),
  });

  async close(): Promise<void> {}
}
