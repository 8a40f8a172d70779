import { randomUUID } from 'node:crypto';
import { canonicalJson, streamNameOf, type RunStreamEvent } from '../../domain';
import { naturalEventIdOf } from '../../projections/rows';
import type { StoredEvent } from '../../domain/records';
import type { LifecycleUnitOfWork } from '../../application/lifecycleProtocol';
import type { EvidenceKeyring } from '../../application/evidenceKeys';
import { run } from './query';
import { loadRunState, readBarrier, stepRunLogOf } from './reads';
import { PgInt, decodeRow } from './rowCodecs';
import * as SQL from './sql';
import { INSERT_SEALED_EVENTS, sealParams, type PostgresSealer } from './postgresSeals';
import type { Tx } from './transactions';

// Lifecycle appends on PostgreSQL: the events alone. The heads they move and the outcome read
// model are kept by triggers on the event log.

const insertLifecycleEvents = async (tx: Tx, stream: string, from: number, events: readonly RunStreamEvent[], sealer: PostgresSealer | undefined): Promise<StoredEvent[]> => {
  const ids = events.map((e) => naturalEventIdOf(e) ?? randomUUID());
  const data = events.map((e) => canonicalJson(e.data));
  const params = {
    stream_id: stream,
    committed_at_ms: tx.nowMs,
    positions: events.map((_, i) => from + i + 1),
    event_ids: ids,
    event_types: events.map((e) => e.type),
    data,
  };
  // keyed (R9.4): the seal of these events goes in with them, in the same statement
  const sealed = async () => {
    const cells = events.map((e, i) => ({ stream_id: stream, stream_position: from + i + 1, event_id: ids[i]!, event_type: e.type, data_json: data[i]!, committed_at_ms: tx.nowMs }));
    return sealParams(await sealer!(tx, stream, cells));
  };
  const rows =
    sealer === undefined || events.length === 0
      ? await run(tx.client, SQL.INSERT_EVENTS, params)
      : await run(tx.client, INSERT_SEALED_EVENTS, { ...params, ...(await sealed()) });
  const byPosition = new Map(rows.map((r) => [decodeRow(PgInt, r.stream_position, 'event', stream), decodeRow(PgInt, r.global_position, 'event', stream)]));
  return events.map((event, i) => {
    const streamPosition = from + i + 1;
    const globalPosition = byPosition.get(streamPosition);
    if (globalPosition === undefined) throw new Error(`event ${stream}@${streamPosition} was not inserted`);
    return { eventId: ids[i]!, streamPosition, globalPosition, committedAtMs: tx.nowMs, event };
  });
};

/**
 * The lifecycle unit of work over one transaction; appended events are pushed to `collect`.
 * Only the events are inserted: the event trigger moves the stream, Run and StepRun
 * heads from them and refuses a move the lifecycle does not allow (R9.1).
 */
export const lifecycleUnitOfWork = (tx: Tx, collect: StoredEvent[], sealer?: PostgresSealer, keys?: EvidenceKeyring): LifecycleUnitOfWork => ({
  lockForLifecycle: (runId, stepRunId) => loadRunState(tx.client, runId, stepRunId),
  readBarrier: (startId) => readBarrier(tx.client, startId, keys),
  stepRunLog: (runId, stepRunId) => stepRunLogOf(tx.client, runId, stepRunId),
  appendLifecycle: async (events, before, after) => {
    const head = after.run;
    if (head === null) throw new Error('a lifecycle append needs a Run');
    collect.push(...(await insertLifecycleEvents(tx, streamNameOf(head.runId), before.run?.version ?? 0, events, sealer)));
  },
});
