import { requireFunction, requireFunctions, requireKnownOptions } from '../../application/openErrors';
import { decodeAttemptArgs, decodeRunArgs, decodeStartIdArgs, decodeStepRunArgs } from '../../domain/readArgs';
import { randomUUID } from 'node:crypto';
import { CompareAndSetLostError, CorruptRecordError, PreconditionError, canonicalJson, decodeStartAttempt, streamNameOf, type DriverClaims, type RunState, type StartAttemptContext } from '../../domain';
import { attemptValue, naturalEventIdOf, runRowOf, stepRunRowOf } from '../../projections/rows';
import { decodeRunRow, decodeStepRunRow, runStateOf } from '../../projections/runState';
import { startEventPositions } from '../../domain/eventRows';
import { checkStartRows } from '../../application/checks/checkRows';
import { outcomeRowOf } from '../../projections/outcomeRows';
import type { PlansApi, RecoverableStartBarrierAuthority, RecoveryApi, RetentionApi, StartStepHook } from '../../application/authority';
import type { AppendOutcome, PrepareResult, StepRunView, StoredBarrier, StoredEvent } from '../../domain/records';
import { compactMemory, memoryReplayHits } from './memoryRetention';
import { createRecoveryApi } from '../../application/recoveryRules';
import { checkedPlanOptions, createInvocationPlans, plansApiOf, type InvocationPlanRow, type InvocationPlans, type PlanStoreOptions } from '../../application/invocationPlans';
import { registerAuthority } from '../../application/execution';
import { memoryPlanRows } from './memoryPlans';
import { createEvidenceKeyring, type EvidenceKeyring, type EvidenceKeyringOptions } from '../../application/evidenceKeys';
import { agreedAttemptStart, requireAttemptNotInLog, requireHeadIsItsLog, requireNoLogOfHeadless, requireNoTraceOfStart, wholeStream } from '../../application/checks/readChecks';
import { createMemoryRecoveryView } from './memoryRecoveryView';
import { memorySealedSpan, sealMemoryEvents } from './memorySeals';
import { appendedEventCells, requireSealedSpan, startEventCells } from '../../application/eventSeals';
import { copyTables, emptyTables, insertUnique, lastStepRunEventRow, stepRunLogRows, requireFollowsLogIn, streamEventsOfType, streamHeadsOf, type Tables } from './tables';
import { SerialExecutor } from '../../application/serialExecutor';
import { decodeLifecycle, runLifecycleTransaction, type LifecycleUnitOfWork } from '../../application/lifecycleProtocol';
import { runStartTransaction, type StartUnitOfWork } from '../../application/startProtocol';
import type { StartEventRow, StartWrite, StartWriteStep } from '../../application/startWritePlan';
import { createMemoryNoteStore } from './memoryNotes';
import { claimsOnVerifiedStarts, memoryDriverClaims } from '../../application/driverClaimRules';

// An in-memory authority with the same rows, the same protocol and the same verification as
// the SQL backends, for specs and for embedding in tests of callers. Atomic by construction:
// a transaction works on a copy of the tables and swaps it in only on success.
export type { Tables } from './tables';
const identityKey = (identity: string, value: string) => `${identity}\u0000${value}`;
const stepKey = (runId: string, stepRunId: string) => `${runId}\u0000${stepRunId}`;

export interface MemoryStartBarrierOptions {
  readonly hooks?: { readonly onStartStep?: StartStepHook };
  readonly clock?: () => number; // the store's clock; defaults to Date.now (this backend has no database clock)
  /** Keyed evidence (R9.4): seal new barriers, and verify every barrier read. */
  readonly evidenceKeys?: EvidenceKeyringOptions;
  /** Sealed invocation plans (R12.2): the key that seals tool inputs; execution opens only with it (R12.4). */
  readonly plans?: PlanStoreOptions;
}

export const openMemoryStartBarrier = async (options: MemoryStartBarrierOptions = {}): Promise<RecoverableStartBarrierAuthority & { readonly retention: RetentionApi }> => {
  requireKnownOptions('in-memory options', options, ['hooks', 'clock', 'evidenceKeys', 'plans']);
  requireFunctions('hooks', options.hooks, ['onStartStep']);
  requireFunction('clock', options.clock);
  const rows = memoryPlanRows(), plans = createInvocationPlans(checkedPlanOptions(options.plans), rows);
  return new MemoryAuthority(options.hooks?.onStartStep, options.clock ?? Date.now, options.evidenceKeys === undefined ? undefined : createEvidenceKeyring(options.evidenceKeys), rows, plans);
};

class MemoryAuthority implements RecoverableStartBarrierAuthority {
  readonly backend = 'memory' as const;
  private tables = emptyTables();
  private readonly serial = new SerialExecutor();

  closed = false; // close() ends what tickets minted on it may do
  constructor(
    private readonly hook: StartStepHook | undefined,
    private readonly clock: () => number,
    private readonly keys: EvidenceKeyring | undefined,
    /** Sealed plans, outside the evidence tables (a spec may damage a row here). */
    readonly planRows: ReturnType<typeof memoryPlanRows>,
    readonly planStore: InvocationPlans,
  ) {
    registerAuthority(this, () => !this.closed, planStore, (command, sealed) => this.prepareStart(command, sealed));
  }
  readonly plans: PlansApi = plansApiOf(() => this.planStore, decodeStartIdArgs);

  /** `onCommit` runs in the same turn as the swap: no other operation sees one without the other. */
  private transact<T>(body: (t: Tables) => Promise<T>, onCommit?: (result: T) => void): Promise<T> {
    return this.serial.run(async () => {
      const draft = copyTables(this.tables);
      const result = await body(draft);
      this.tables = draft;
      onCommit?.(result);
      return result;
    });
  }

  private loadRunState(t: Tables, runId: string, stepRunIds: readonly string[]): RunState {
    const row = t.runs.get(runId);
    if (t.compactions.has(runId)) throw new PreconditionError('run_compacted', `Run ${runId} was compacted (R14.2)`);
    if (row === undefined) {
      // A Run is absent only if no stream of it is either (as the SQL stores read it).
      if (t.streams.has(streamNameOf(runId)) || streamHeadsOf(t, runId).starts > 0) throw new CorruptRecordError('run', runId, 'its stream or a start barrier exists but its run head is missing');
      return runStateOf(null, []);
    }
    const run = decodeRunRow(row, t.streams.get(streamNameOf(runId)) ?? null);
    const stepRuns = stepRunIds.flatMap((id) => {
      const r = t.stepRuns.get(stepKey(runId, id));
      if (r === undefined) requireNoLogOfHeadless(runId, id, lastStepRunEventRow(t, streamNameOf(runId), id));
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
      requireFollowsLogIn(t, stream, event.type, event.data);
      t.eventIds.add(eventId);
      t.events.push({ stream_id: stream, stream_position: position, event_id: eventId, event_type: event.type, data_json: canonicalJson(event.data), committed_at_ms: committedAtMs });
      return { eventId, streamPosition: position, globalPosition: t.events.length, committedAtMs, event: event as never };
    });
  }

  private casStream(t: Tables, stream: string, expected: number, next: number): void {
    if (t.streams.get(stream) !== expected) throw new CompareAndSetLostError(`stream ${stream}`, `it moved past version ${expected}`);
    t.streams.set(stream, next);
  }

  private readBarrier(t: Tables, startId: string): StoredBarrier | null {
    const barrier = t.barriers.get(startId);
    if (barrier === undefined) {
      // No barrier under this id is an answer only if nothing else claims the start exists (R9.3).
      const named = (rows: Iterable<{ readonly start_id: string }>) => [...rows].filter((r) => r.start_id === startId).length;
      return requireNoTraceOfStart(startId, named(t.identities.values()), named(t.mutations.values()), t.events.filter((e) => e.event_id === `barrier:${startId}`).length);
    }
    // As the SQL backends: the five events around the RunEvent the barrier names.
    const stream = streamNameOf(barrier.run_id);
    const anchor = t.events.find((e) => e.event_id === barrier.run_event_id && e.stream_id === stream);
    const positions = anchor === undefined ? [] : startEventPositions(anchor.stream_position);
    const verified = checkStartRows({
      barrier,
      audit: t.audit.get(barrier.audit_event_id),
      trace: t.trace.get(barrier.trace_id),
      receipt: t.receipts.get(barrier.audit_receipt_id),
      mutation: t.mutations.get(barrier.mutation_id),
      events: t.events.filter((e) => e.stream_id === stream && positions.includes(e.stream_position)).sort((a, b) => a.stream_position - b.stream_position),
      identities: [...t.identities.values()].filter((r) => r.start_id === startId).map((r) => ({ ...r, command_digest: barrier.command_digest })),
    });
    const mac = t.macs.get(startId);
    return this.keys === undefined ? verified : this.keys.verify(verified, mac === undefined ? [] : [mac]);
  }

  private startUow(t: Tables): StartUnitOfWork {
    return {
      lookupReplay: async (keys) => memoryReplayHits(t, keys),
      lockForStart: async (runId, stepRunId) => this.loadRunState(t, runId, [stepRunId]),
      readBarrier: async (startId) => this.readBarrier(t, startId),
      clockMs: async () => this.clock(),
      writesAtOnce: false,
      writeStart: async (plan, steps) => void steps.forEach((step) => this.writeStep(t, plan, step)),
      // the events' seal (its head check, the origin) before the barrier's MAC, as the SQL stores write them
      ...(this.keys !== undefined && {
        sealEvidence: async (plan: StartWrite) => {
          sealMemoryEvents(this.keys!, t, plan.streamId, startEventCells(plan), plan.committedAtMs);
          insertUnique(t.macs, plan.startId, this.keys!.seal(plan.result), 'evidence MAC');
        },
      }),
    };
  }

  /** One step of the plan, with the same unique and compare-and-set checks as the SQL tables. */
  private writeStep(t: Tables, plan: StartWrite, step: StartWriteStep): void {
    const { rows } = plan;
    switch (step) {
      case 'evidence':
        this.insertEventRows(t, plan, plan.events.evidence);
        insertUnique(t.audit, rows.audit.audit_event_id, rows.audit, 'audit event');
        insertUnique(t.trace, rows.trace.trace_id, rows.trace, 'trace anchor');
        insertUnique(t.receipts, rows.receipt.audit_receipt_id, rows.receipt, 'audit receipt');
        return;
      case 'stepRunCas': {
        const key = stepKey(plan.runId, plan.stepRunId);
        const current = t.stepRuns.get(key);
        const expected = plan.stepRunCas.expected;
        if (current?.version !== expected.version || current.status !== expected.status || current.digest !== expected.digest) {
          throw new CompareAndSetLostError(`StepRun ${plan.stepRunId}`, `it moved from version ${expected.version} before start ${plan.startId} committed`);
        }
        t.stepRuns.set(key, plan.stepRunCas.next);
        return;
      }
      case 'runCas':
        this.casStream(t, plan.streamId, plan.runCas.expected, plan.runCas.next);
        t.runs.set(plan.runId, { ...t.runs.get(plan.runId)!, version: plan.runCas.next });
        return;
      case 'runEvent':
        this.insertEventRows(t, plan, plan.events.runEvent);
        insertUnique(t.mutations, rows.mutation.mutation_id, rows.mutation, 'mutation');
        return;
      case 'barrier':
        this.insertEventRows(t, plan, plan.events.barrier);
        insertUnique(t.barriers, rows.barrier.start_id, rows.barrier, 'barrier');
        for (const { command_digest: _, ...r } of rows.identities) insertUnique(t.identities, identityKey(r.identity, r.value), r, 'replay identity');
        return;
      default: {
        const _: never = step;
        throw new Error(`unknown start step ${String(_)}`);
      }
    }
  }

  private insertEventRows(t: Tables, plan: StartWrite, events: readonly StartEventRow[]): void {
    for (const e of events) {
      if (t.eventIds.has(e.eventId)) throw new Error(`unique violation: event ${e.eventId}`);
      if (t.events.some((r) => r.stream_id === plan.streamId && r.stream_position === e.position)) throw new Error(`unique violation: ${plan.streamId}@${e.position}`);
      if (e.type === 'StepRunStarted' || e.type === 'ToolExecutionStartBarrierCommitted') requireFollowsLogIn(t, plan.streamId, e.type, JSON.parse(e.dataJson));
      t.eventIds.add(e.eventId);
      t.events.push({ stream_id: plan.streamId, stream_position: e.position, event_id: e.eventId, event_type: e.type, data_json: e.dataJson, committed_at_ms: plan.committedAtMs });
    }
  }

  private lifecycleUow(t: Tables, collect: StoredEvent[]): LifecycleUnitOfWork {
    return {
      lockForLifecycle: async (runId, stepRunId) => this.loadRunState(t, runId, stepRunId === undefined ? [] : [stepRunId]),
      readBarrier: async (startId) => this.readBarrier(t, startId),
      stepRunLog: async (runId, stepRunId) => stepRunLogRows(t, streamNameOf(runId), stepRunId),
      appendLifecycle: async (events, before, after) => {
        const run = after.run!;
        const stream = streamNameOf(run.runId);
        const from = before.run?.version ?? 0;
        if (before.run === null) {
          if (t.streams.has(stream)) throw new CompareAndSetLostError(`stream ${stream}`, 'it already exists');
          t.streams.set(stream, run.version);
        } else {
          this.casStream(t, stream, from, run.version);
        }
        t.runs.set(run.runId, runRowOf(run));
        const now = this.clock();
        const appended = this.insertEvents(t, stream, from, events, now);
        if (this.keys !== undefined) sealMemoryEvents(this.keys, t, stream, appendedEventCells(stream, appended), now);
        collect.push(...appended);
        // Recovery read model, inline: swapped in with the events or not at all.
        for (const e of appended) {
          const row = outcomeRowOf(e);
          if (row !== undefined) insertUnique(t.outcomes, row.start_id, row, 'start outcome');
        }
        for (const [id, s] of Object.entries(after.stepRuns)) if (before.stepRuns[id] !== s) t.stepRuns.set(stepKey(s.runId, id), stepRunRowOf(s));
      },
    };
  }

  /** The plan side table is outside the copied tables: a created start's plan is stored with the swap (R12.2). */
  private async prepareStart(command: unknown, sealed?: InvocationPlanRow, context?: StartAttemptContext): Promise<PrepareResult> {
    const decoded = decodeStartAttempt(command, context);
    return this.transact((t) => runStartTransaction(this.startUow(t), decoded, this.hook, sealed), (r) => void (r.outcome === 'created' && sealed !== undefined && !this.planRows.rows.has(sealed.start_id) && this.planRows.rows.set(sealed.start_id, sealed)));
  }

  readonly barriers = {
    prepare: (command: unknown, context?: StartAttemptContext): Promise<PrepareResult> => this.prepareStart(command, undefined, context),
    getByStartId: async (startId: string) => this.readBarrier(this.tables, decodeStartIdArgs(startId)),
    getByStepRunAttempt: async (runIdArg: string, stepRunIdArg: string, version: number) => {
      const { runId, stepRunId, startedStepRunVersion: v } = decodeAttemptArgs(runIdArg, stepRunIdArg, version);
      const t = this.tables;
      const attempt = attemptValue(runId, stepRunId, v);
      const row = t.identities.get(identityKey('attempt', attempt));
      const claimed = [...t.barriers.values()].filter((b) => b.run_id === runId && b.step_run_id === stepRunId && b.started_step_run_version === v);
      const startId = agreedAttemptStart(attempt, row === undefined ? [] : [row.start_id], claimed.map((b) => b.start_id));
      if (startId === undefined) return requireAttemptNotInLog(attempt, stepRunId, v, streamEventsOfType(t, streamNameOf(runId), 'StepRunStarted'));
      const found = this.readBarrier(t, startId);
      if (found === null) throw new CorruptRecordError('replay index', attempt, `names start ${startId}, which has no barrier`);
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
    getStepRun: async (runIdArg: string, stepRunIdArg: string): Promise<StepRunView | null> => {
      const { runId, stepRunId } = decodeStepRunArgs(runIdArg, stepRunIdArg);
      const s = this.loadRunState(this.tables, runId, [stepRunId]).stepRuns[stepRunId];
      if (s === undefined) return null; // loadRunState asked the log first (R9.3)
      requireHeadIsItsLog(s, ...stepRunLogRows(this.tables, streamNameOf(runId), stepRunId));
      return { ...s, digest: stepRunRowOf(s).digest };
    },
    readStream: async (runId: string): Promise<readonly StoredEvent[]> => {
      const id = decodeRunArgs(runId), stream = streamNameOf(id);
      const rows = this.tables.events.flatMap((e, i) => (e.stream_id === stream ? [{ ...e, global_position: i + 1 }] : []));
      const events = wholeStream(stream, streamHeadsOf(this.tables, id), rows.sort((a, b) => a.stream_position - b.stream_position));
      if (this.keys !== undefined && events.length > 0) requireSealedSpan(this.keys, stream, memorySealedSpan(this.tables, stream, 1, events.length), 1, events.length);
      return events;
    },
  };

  private claims: DriverClaims | undefined;
  /** One claim table per in-memory store, like the row table a real store has. */
  driverClaims(): DriverClaims {
    return (this.claims ??= claimsOnVerifiedStarts(memoryDriverClaims(() => this.clock(), (id) => this.tables.barriers.has(id)), (id) => this.barriers.getByStartId(id)));
  }

  /** The note side record; a field so a spec can play a resolve that stopped after its note. */
  private readonly noteStore = createMemoryNoteStore(() => this.clock());
  private readonly recoveryView = (tables: Tables) => createMemoryRecoveryView(tables, { readBarrier: (id) => this.readBarrier(tables, id), nowMs: () => this.clock() });

  /** Recovery read models and operator resolutions, over the current tables. */
  readonly recovery: RecoveryApi = createRecoveryApi({
    snapshot: async (body) => body(this.recoveryView(this.tables)),
    // committed tables are never changed, only replaced: holding one is holding a snapshot
    verifySession: async (body) => {
      const [view, notes] = [this.recoveryView(this.tables), await this.noteStore.all()];
      return body({ read: (read) => read(view), notes: { all: async () => notes, rows: async (id) => notes.filter((n) => n.start_id === id) } });
    },
    handle: (command) => this.runs.handle(command),
    keyring: () => this.keys,
    clock: () => this.clock(),
    notes: this.noteStore,
    plans: () => this.planStore,
  });

  /** R14.2: memory has no roles, so whoever holds the authority is its operator. */
  readonly retention: RetentionApi = {
    compact: (options) => compactMemory({ transact: (body) => this.transact(body), clock: () => this.clock(), forget: async (ids) => ids.forEach((id) => this.planRows.rows.delete(id)),
      liveClaim: async (id) => (await this.driverClaims().history(id)).some((c) => !c.released && c.leaseUntilMs > this.clock()) }, options),
  };
  async close(): Promise<void> {
    this.closed = true;
  }
}
