import { randomUUID } from 'node:crypto';
import { CompareAndSetLostError, canonicalJson, streamNameOf, type RunStreamEvent } from '../../domain';
import { naturalEventIdOf, runRowOf, stepRunRowOf } from '../../projections/rows';
import type { StoredEvent } from '../../application/authority';
import type { LifecycleUnitOfWork } from '../../application/lifecycleProtocol';
import { prefixed, type Params } from './named';
import { run } from './query';
import { loadRunState } from './reads';
import { PgInt, decodeRow } from './rowCodecs';
import * as SQL from './sql';
import type { Tx } from './transactions';

// Lifecycle appends on PostgreSQL: the Run and stream heads by compare-and-set, the events,
// and the StepRun rows they move. The outcome read model is kept by the projection trigger.

const insertLifecycleEvents = async (tx: Tx, stream: string, from: number, events: readonly RunStreamEvent[]): Promise<StoredEvent[]> => {
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
};

/** The lifecycle unit of work over one transaction; appended events are pushed to `collect`. */
export const lifecycleUnitOfWork = (tx: Tx, collect: StoredEvent[]): LifecycleUnitOfWork => ({
  lockForLifecycle: (runId, stepRunId) => loadRunState(tx.client, runId, stepRunId, true),
  appendLifecycle: async (events, before, after) => {
    const head = after.run;
    if (head === null) throw new Error('a lifecycle append needs a Run');
    const stream = streamNameOf(head.runId);
    const from = before.run?.version ?? 0;
    const [counts] =
      before.run === null
        ? await run(tx.client, SQL.CREATE_RUN_HEAD, { stream_id: stream, next_run_version: head.version, ...prefixed('run_', runRowOf(head)) })
        : await run(tx.client, SQL.CAS_RUN_HEAD, { stream_id: stream, run_id: head.runId, next_run_version: head.version, expected_run_version: from });
    if (counts?.stream_cas !== 1 || counts?.run_cas !== 1) throw new CompareAndSetLostError(`Run ${head.runId}`, `it moved past version ${from}`);
    collect.push(...(await insertLifecycleEvents(tx, stream, from, events)));
    for (const [id, s] of Object.entries(after.stepRuns)) {
      if (before.stepRuns[id] === s) continue;
      const upserted = await run(tx.client, SQL.UPSERT_STEP_RUN, stepRunRowOf(s) as unknown as Params);
      if (upserted.length !== 1) throw new CompareAndSetLostError(`StepRun ${id}`, `it moved past version ${s.version - 1}`);
    }
  },
});
