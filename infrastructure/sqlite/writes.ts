import type { EvidenceKeyring } from '../../application/evidenceKeys';
import { appendedEventCells, startEventCells } from '../../application/eventSeals';
import type { ChainedCells } from '../../domain/eventChain';
import { randomUUID } from 'node:crypto';
import { CompareAndSetLostError, canonicalJson, evolve, streamNameOf, type RunState, type RunStreamEvent } from '../../domain';
import { eventChainDigest } from '../../domain/eventChain';
import { naturalEventIdOf, runRowOf, stepRunRowOf } from '../../projections/rows';
import type { StoredEvent } from '../../domain/records';
import type { LifecycleUnitOfWork } from '../../application/lifecycleProtocol';
import type { StartUnitOfWork } from '../../application/startProtocol';
import type { StartEventRow, StartWrite, StartWriteStep } from '../../application/startWritePlan';
import type { InvocationPlanRow } from '../../application/invocationPlans';
import { loadRunState, loadStartHead, lookupReplay, readBarrier, stepRunLogOf, type ProbedIdentities } from './reads';
import { nowMsOf, type Statements } from './statements';

// The SQLite writes: the start's write plan executed step by step, and lifecycle appends. Both
// run in one `BEGIN IMMEDIATE` of the authority's one connection, holding the write lock from
// its first read (a start's exact replay is answered before, in a read transaction). Each
// move appends its events first (each with its chain link, R9.2) and then moves the heads, so
// the database's triggers can check that every head move is the image of the event
// just appended.

const casStream = (s: Statements, stream: string, expected: number, next: number): void => {
  if (s.casStream.run(next, stream, expected).changes !== 1) throw new CompareAndSetLostError(`stream ${stream}`, `it moved past version ${expected}`);
};

/** The chain link of the event a transaction appended last: the next one binds it without reading it back. */
type LastLink = { stream: string; position: number; chain: string } | undefined;

/** The chain link of an event: the digest over the link of the event before it (R9.2). */
const linkOf = (s: Statements, stream: string, position: number, eventId: string, type: string, dataJson: string, committedAtMs: number, last: { current: LastLink }): string => {
  const known = last.current;
  const previous =
    position === 1
      ? ''
      : known !== undefined && known.stream === stream && known.position === position - 1
        ? known.chain // appended by this very transaction, just above, or read with the head
        : (s.chainDigest.get(stream, position - 1) as { chain_digest: string | null } | undefined)?.chain_digest ?? '';
  return eventChainDigest(previous, { stream_id: stream, stream_position: position, event_id: eventId, event_type: type, data_json: dataJson, committed_at_ms: committedAtMs });
};

/** Appends one event with its chain link; returns its global position. */
const insertChained = (s: Statements, stream: string, position: number, eventId: string, type: string, dataJson: string, committedAtMs: number, last: { current: LastLink }): number => {
  const chain = linkOf(s, stream, position, eventId, type, dataJson, committedAtMs, last);
  const globalPosition = (s.insertEvent.get(stream, position, eventId, type, dataJson, committedAtMs, chain) as { global_position: number }).global_position;
  last.current = { stream, position, chain };
  return globalPosition;
};

/** A start's events: the same rows and links, without reading back global positions the plan never uses. */
const insertEventRows = (s: Statements, plan: StartWrite, events: readonly StartEventRow[], last: { current: LastLink }): void => {
  for (const e of events) {
    const chain = linkOf(s, plan.streamId, e.position, e.eventId, e.type, e.dataJson, plan.committedAtMs, last);
    s.appendEvent.run(plan.streamId, e.position, e.eventId, e.type, e.dataJson, plan.committedAtMs, chain);
    last.current = { stream: plan.streamId, position: e.position, chain };
  }
};

/** R3.4: status, version and digest together, after the StepRunStarted that makes the move. */
const casStepRun = (s: Statements, plan: StartWrite): void => {
  const { expected, next } = plan.stepRunCas;
  const cas = s.casStepRun.run({ ...next, expected_version: expected.version, expected_status: expected.status, expected_digest: expected.digest });
  if (cas.changes !== 1) throw new CompareAndSetLostError(`StepRun ${plan.stepRunId}`, `it moved from version ${expected.version} before start ${plan.startId} committed`);
};

/** R3.5: the stream head and the Run head, once the start's five events are in the log. */
const casRun = (s: Statements, plan: StartWrite): void => {
  const { expected, next } = plan.runCas;
  casStream(s, plan.streamId, expected, next);
  if (s.casRun.run(next, plan.runId, expected).changes !== 1) throw new CompareAndSetLostError(`Run ${plan.runId}`, `it moved past version ${expected}`);
};

/** One step of the plan: the same rows, in the same order, as every other backend. */
const writeStep = (s: Statements, plan: StartWrite, step: StartWriteStep, last: { current: LastLink }): void => {
  const { rows } = plan;
  switch (step) {
    case 'evidence': // R3.3
      insertEventRows(s, plan, plan.events.evidence, last);
      s.insertAudit.run(rows.audit);
      s.insertTrace.run(rows.trace);
      s.insertReceipt.run(rows.receipt);
      return;
    case 'stepRunCas': // R3.4: made with the RunEvent below (the move follows its event)
    case 'runCas': // R3.5: made with the barrier below
      return;
    case 'runEvent': // R3.6, and R3.4's StepRun move it makes
      insertEventRows(s, plan, plan.events.runEvent, last);
      casStepRun(s, plan);
      s.insertMutation.run(rows.mutation);
      return;
    case 'barrier': // R3.7, and R3.5's head moves over the whole start
      insertEventRows(s, plan, plan.events.barrier, last);
      s.insertBarrier.run(rows.barrier); // refused unless every fact it names carries its start id
      casRun(s, plan);
      return;
    default: {
      const _: never = step;
      throw new Error(`unknown start step ${String(_)}`);
    }
  }
};

/** Keyed evidence (R9.4): stores the seal of what one transaction appended to one stream. */
export type Sealer = (streamId: string, events: readonly ChainedCells[]) => void;

/**
 * `reuseLookup`: the barrier read takes the replay lookup's index rows for the identity values
 * it probed (reads.ts), sound only when nothing can write between the two on this connection
 * (another connection's commits are not in this transaction's snapshot): false when a
 * fault-injection hook runs between them.
 */
export const startUnitOfWork = (s: Statements, keys?: EvidenceKeyring, seal?: Sealer, reuseLookup = false, insertPlan?: (row: InvocationPlanRow) => void): StartUnitOfWork => {
  const probed: { current?: ProbedIdentities } = {};
  const last: { current: LastLink } = { current: undefined };
  let clock: number | undefined;
  return {
  lookupReplay: async (replayKeys) => lookupReplay(s, replayKeys, reuseLookup ? probed : undefined),
  lockForStart: async (runId, stepRunId) => {
    // The clock and the link the first event binds come with the head: one statement, not three.
    const { state, chain, nowMs } = loadStartHead(s, runId, stepRunId);
    clock = nowMs;
    if (chain !== undefined && state.run !== null) last.current = { stream: streamNameOf(runId), position: state.run.version, chain };
    return state;
  },
  readBarrier: async (startId) => readBarrier(s, startId, keys, probed.current),
  clockMs: async () => clock ?? nowMsOf(s),
  writesAtOnce: false,
  writeStart: async (plan, steps) => {
    for (const step of steps) writeStep(s, plan, step, last);
    // R12.2: the sealed plan with the barrier, in the start's transaction
    if (plan.invocationPlan !== undefined && steps.includes('barrier')) insertPlan!(plan.invocationPlan);
  },
  ...(keys === undefined
    ? {}
    : {
        sealEvidence: async (plan: StartWrite) => {
          // the head check and the origin first: a start's own MAC is evidence the check reads
          seal?.(plan.streamId, startEventCells(plan));
          const mac = keys.seal(plan.result);
          s.insertEvidenceMac.run(plan.startId, mac.key_id, mac.mac);
        },
      }),
  };
};

const insertEvent = (s: Statements, stream: string, position: number, event: RunStreamEvent, committedAtMs: number, last: { current: LastLink }): StoredEvent => {
  const eventId = naturalEventIdOf(event) ?? randomUUID();
  const globalPosition = insertChained(s, stream, position, eventId, event.type, canonicalJson(event.data), committedAtMs, last);
  return { eventId, streamPosition: position, globalPosition, committedAtMs, event };
};

/** The lifecycle unit of work; appended events are pushed to `collect`. */
export const lifecycleUnitOfWork = (s: Statements, collect: StoredEvent[], seal?: Sealer, keys?: EvidenceKeyring): LifecycleUnitOfWork => ({
  lockForLifecycle: async (runId, stepRunId) => loadRunState(s, runId, stepRunId === undefined ? [] : [stepRunId]),
  readBarrier: async (startId) => readBarrier(s, startId, keys),
  stepRunLog: async (runId, stepRunId) => stepRunLogOf(s, runId, stepRunId),
  appendLifecycle: async (events, before, after) => {
    const run = after.run!;
    const stream = streamNameOf(run.runId);
    const committedAtMs = nowMsOf(s);
    const from = before.run?.version ?? 0;
    if (before.run === null) s.insertStream.run(stream, 'run', 1); // the events' foreign key; RunCreated is at 1
    // Event by event, each followed by the head moves it makes (the triggers check each move
    // against the event just appended). An outcome event's recovery row is its trigger's.
    let state: RunState = before;
    let head = from;
    const appended: StoredEvent[] = [];
    const last: { current: LastLink } = { current: undefined };
    for (const [i, event] of events.entries()) {
      const position = from + i + 1;
      const next = evolve(state, event);
      appended.push(insertEvent(s, stream, position, event, committedAtMs, last));
      if (state.run === null) s.insertRun.run(runRowOf(next.run!));
      else if (position > 1) {
        casStream(s, stream, head, position);
        if (s.casRun.run(position, run.runId, head).changes !== 1) throw new CompareAndSetLostError(`Run ${run.runId}`, `it moved past version ${head}`);
      }
      head = position;
      for (const [id, stepRun] of Object.entries(next.stepRuns)) {
        if (state.stepRuns[id] === stepRun) continue;
        if (s.upsertStepRun.run(stepRunRowOf(stepRun)).changes !== 1) throw new CompareAndSetLostError(`StepRun ${id}`, `it moved past version ${stepRun.version - 1}`);
      }
      state = next;
    }
    if (head !== run.version) throw new Error(`lifecycle append of Run ${run.runId} ended at ${head}, its decision at ${run.version}`);
    seal?.(stream, appendedEventCells(stream, appended));
    collect.push(...appended);
  },
});
