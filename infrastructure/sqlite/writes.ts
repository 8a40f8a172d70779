import type { EvidenceKeyring } from '../../application/evidenceKeys';
import { randomUUID } from 'node:crypto';
import { CompareAndSetLostError, canonicalJson, streamNameOf, type RunStreamEvent } from '../../domain';
import { naturalEventIdOf, runRowOf, stepRunRowOf } from '../../projections/rows';
import type { StoredEvent } from '../../application/authority';
import type { LifecycleUnitOfWork } from '../../application/lifecycleProtocol';
import type { StartUnitOfWork } from '../../application/startProtocol';
import type { StartEventRow, StartWrite, StartWriteStep } from '../../application/startWrite';
import { loadRunState, lookupReplay, readBarrier } from './reads';
import { nowMsOf, type Statements } from './statements';

// The SQLite writes: the start's write plan executed step by step, and lifecycle appends. Both
// run inside the authority's `BEGIN IMMEDIATE` on its one connection.

const casStream = (s: Statements, stream: string, expected: number, next: number): void => {
  if (s.casStream.run(next, stream, expected).changes !== 1) throw new CompareAndSetLostError(`stream ${stream}`, `it moved past version ${expected}`);
};

const insertEventRows = (s: Statements, plan: StartWrite, events: readonly StartEventRow[]): void => {
  for (const e of events) s.insertEvent.get(plan.streamId, e.position, e.eventId, e.type, e.dataJson, plan.committedAtMs);
};

/** One step of the plan: the same rows, in the same order, as every other backend. */
const writeStep = (s: Statements, plan: StartWrite, step: StartWriteStep): void => {
  const { rows } = plan;
  switch (step) {
    case 'evidence': // R3.3
      insertEventRows(s, plan, plan.events.evidence);
      s.insertAudit.run(rows.audit);
      s.insertTrace.run(rows.trace);
      s.insertReceipt.run(rows.receipt);
      return;
    case 'stepRunCas': {
      // R3.4: status, version and digest together
      const { expected, next } = plan.stepRunCas;
      const cas = s.casStepRun.run({ ...next, expected_version: expected.version, expected_status: expected.status, expected_digest: expected.digest });
      if (cas.changes !== 1) throw new CompareAndSetLostError(`StepRun ${plan.stepRunId}`, `it moved from version ${expected.version} before start ${plan.startId} committed`);
      return;
    }
    case 'runCas': {
      // R3.5: the stream head and the Run head
      const { expected, next } = plan.runCas;
      casStream(s, plan.streamId, expected, next);
      if (s.casRun.run(next, plan.runId, expected).changes !== 1) throw new CompareAndSetLostError(`Run ${plan.runId}`, `it moved past version ${expected}`);
      return;
    }
    case 'runEvent': // R3.6
      insertEventRows(s, plan, plan.events.runEvent);
      s.insertMutation.run(rows.mutation);
      return;
    case 'barrier': // R3.7
      insertEventRows(s, plan, plan.events.barrier);
      s.insertBarrier.run(rows.barrier);
      for (const identity of rows.identities) s.insertIdentity.run(identity);
      return;
    default: {
      const _: never = step;
      throw new Error(`unknown start step ${String(_)}`);
    }
  }
};

export const startUnitOfWork = (s: Statements, keys?: EvidenceKeyring): StartUnitOfWork => ({
  lookupReplay: async (keys) => lookupReplay(s, keys),
  lockForStart: async (runId, stepRunId) => loadRunState(s, runId, [stepRunId]),
  readBarrier: async (startId) => readBarrier(s, startId, keys),
  clockMs: async () => nowMsOf(s),
  writesAtOnce: false,
  writeStart: async (plan, steps) => {
    for (const step of steps) writeStep(s, plan, step);
  },
  ...(keys === undefined
    ? {}
    : {
        sealEvidence: async (plan: StartWrite) => {
          const mac = keys.seal(plan.result);
          s.insertEvidenceMac.run(plan.startId, mac.key_id, mac.mac);
        },
      }),
});

const insertEvents = (s: Statements, stream: string, fromVersion: number, events: readonly RunStreamEvent[], committedAtMs: number): StoredEvent[] =>
  events.map((event, i) => {
    const eventId = naturalEventIdOf(event) ?? randomUUID();
    const position = fromVersion + i + 1;
    const { global_position } = s.insertEvent.get(stream, position, eventId, event.type, canonicalJson(event.data), committedAtMs) as { global_position: number };
    return { eventId, streamPosition: position, globalPosition: global_position, committedAtMs, event };
  });

/** The lifecycle unit of work; appended events are pushed to `collect`. */
export const lifecycleUnitOfWork = (s: Statements, collect: StoredEvent[]): LifecycleUnitOfWork => ({
  lockForLifecycle: async (runId, stepRunId) => loadRunState(s, runId, stepRunId === undefined ? [] : [stepRunId]),
  appendLifecycle: async (events, before, after) => {
    const run = after.run!;
    const stream = streamNameOf(run.runId);
    const committedAtMs = nowMsOf(s);
    const from = before.run?.version ?? 0;
    if (before.run === null) {
      s.insertStream.run(stream, 'run', run.version);
      s.insertRun.run(runRowOf(run));
    } else {
      casStream(s, stream, from, run.version);
      if (s.casRun.run(run.version, run.runId, from).changes !== 1) throw new CompareAndSetLostError(`Run ${run.runId}`, `it moved past version ${from}`);
    }
    // An outcome event's recovery row is written by the projection trigger, in the same statement.
    collect.push(...insertEvents(s, stream, from, events, committedAtMs));
    for (const [id, state] of Object.entries(after.stepRuns)) {
      if (before.stepRuns[id] === state) continue;
      if (s.upsertStepRun.run(stepRunRowOf(state)).changes !== 1) throw new CompareAndSetLostError(`StepRun ${id}`, `it moved past version ${state.version - 1}`);
    }
  },
});
