import {
  CorruptRecordError,
  noReplayHits,
  canonicalJson,
  compactionRecordOf,
  compactionBlockerOf,
  compactionDigestOf,
  decodeCompactOptions,
  streamNameOf,
  type CompactReport,
  type ReplayHit,
  type ReplayHits,
  type ReplayIdentity,
  type ReplayKeys,
  type StepRunStatus,
} from '../../domain';
import type { VerifyProblem } from '../../domain/records';
import { compactionProblems } from '../../application/retentionRules';
import type { Tables } from './tables';
import { replayValuesOf } from '../../projections/rows';

// R14.2 on the in-memory store: the same rule and the same record as the SQL stores. Atomic by
// construction (one transaction over a copy of the tables); memory has no roles, so whoever
// holds the authority is its operator.

export interface MemoryRetentionHost {
  transact<T>(body: (t: Tables) => Promise<T>): Promise<T>;
  clock(): number;
  /** Whether a driver holds a live lease on the start. */
  liveClaim(startId: string): Promise<boolean>;
  /** Shred the sealed plans and purge the notes of compacted starts (side records outside the tables). */
  forget(startIds: readonly string[]): Promise<void>;
}

const identityKey = (identity: string, value: string) => `${identity}\u0000${value}`;
const byId = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export const compactMemory = async (host: MemoryRetentionHost, options: unknown): Promise<CompactReport> => {
  const { beforeMs } = decodeCompactOptions(options);
  const forgotten: string[] = [];
  const report = await host.transact(async (t) => {
    const compacted: CompactReport['compacted'][number][] = [];
    const kept: CompactReport['kept'][number][] = [];
    for (const runId of [...t.runs.keys()].sort(byId)) {
      const stream = streamNameOf(runId);
      const events = t.events.flatMap((e, i) => (e.stream_id === stream ? [{ ...e, global_position: i + 1 }] : []));
      const barriers = [...t.barriers.values()].filter((b) => b.run_id === runId).sort((a, b) => byId(a.start_id, b.start_id));
      const stepRuns = [...t.stepRuns.values()].filter((s) => s.run_id === runId);
      let liveClaims = 0;
      for (const b of barriers) if (await host.liveClaim(b.start_id)) liveClaims += 1;
      const reason = compactionBlockerOf(
        {
          stepRunStatuses: stepRuns.map((s) => s.status as StepRunStatus),
          starts: barriers.length,
          outcomes: barriers.filter((b) => t.outcomes.has(b.start_id)).length,
          liveClaims,
          finishedAtMs: Math.max(...events.map((e) => e.committed_at_ms)),
        },
        beforeMs,
      );
      if (reason !== undefined) {
        kept.push({ runId, reason });
        continue;
      }
      const starts = new Set(barriers.map((b) => b.start_id));
      const identities = [...t.identities.values()].filter((r) => starts.has(r.start_id));
      const record = compactionRecordOf({ runId, projectId: t.runs.get(runId)!.project_id, streamVersion: t.streams.get(stream) ?? 0, events, barriers, identities, beforeMs, compactedAtMs: host.clock() });
      const digest = compactionDigestOf(record);
      t.compactions.set(runId, { run_id: runId, record_json: canonicalJson(record), compaction_digest: digest });
      for (const r of identities) {
        const b = t.barriers.get(r.start_id)!;
        t.compactedIdentities.set(identityKey(r.identity, r.value), { identity: r.identity, value: r.value, start_id: r.start_id, run_id: runId, command_digest: b.command_digest, barrier_digest: b.barrier_digest });
        t.identities.delete(identityKey(r.identity, r.value));
      }
      removeRun(t, runId, starts);
      forgotten.push(...starts);
      compacted.push({ runId, compactionDigest: digest, starts: barriers.length, events: events.length });
    }
    return { beforeMs, compacted, kept };
  });
  await host.forget(forgotten);
  return report;
};

const removeRun = (t: Tables, runId: string, starts: ReadonlySet<string>): void => {
  const stream = streamNameOf(runId);
  for (const e of t.events) if (e.stream_id === stream) t.eventIds.delete(e.event_id);
  t.events = t.events.filter((e) => e.stream_id !== stream);
  t.streams.delete(stream);
  t.runs.delete(runId);
  for (const [k, s] of t.stepRuns) if (s.run_id === runId) t.stepRuns.delete(k);
  for (const map of [t.audit, t.trace, t.receipts, t.mutations, t.barriers, t.outcomes, t.macs] as Map<string, { readonly start_id: string }>[]) {
    for (const [k, r] of map) if (starts.has(r.start_id)) map.delete(k);
  }
  for (const [k, r] of t.eventMacs) if (r.stream_id === stream) t.eventMacs.delete(k);
};

/** The replay index's hits for a command's identities: live ones with their barrier's command digest, compacted ones with their record's. */
export const memoryReplayHits = (t: Tables, keys: ReplayKeys): ReplayHits => {
  const hits = noReplayHits() as Record<ReplayIdentity, ReplayHit[]>;
  for (const [identity, value] of Object.entries(replayValuesOf(keys)) as [ReplayIdentity, string][]) {
    const row = t.identities.get(identityKey(identity, value));
    const compacted = row === undefined ? compactedHit(t, identity, value) : undefined;
    if (compacted !== undefined) hits[identity] = [compacted];
    else if (row) {
      const named = t.barriers.get(row.start_id);
      if (named === undefined) throw new CorruptRecordError('replay index', value, `names start ${row.start_id}, which has no barrier`);
      hits[identity] = [{ startId: row.start_id, commandDigest: named.command_digest }];
    }
  }
  return hits;
};

/** The replay hit of a compacted start's identity, or undefined (R14.2: it still refuses reuse). */
export const compactedHit = (t: Tables, identity: string, value: string): ReplayHit | undefined => {
  const row = t.compactedIdentities.get(identityKey(identity, value));
  if (row === undefined) return undefined;
  const compaction = t.compactions.get(row.run_id);
  return {
    startId: row.start_id,
    commandDigest: row.command_digest,
    compacted: { runId: row.run_id, barrierDigest: row.barrier_digest, compactionDigest: compaction?.compaction_digest ?? '' },
  };
};

/** `verify`'s view of compaction on the in-memory tables. */
export const memoryCompactionProblems = (t: Tables): VerifyProblem[] =>
  compactionProblems({
    records: [...t.compactions.values()],
    identities: [...t.compactedIdentities.values()],
    isLive: (identity, value) => t.identities.has(identityKey(identity, value)),
    runHasRows: (runId) => t.runs.has(runId) || t.streams.has(streamNameOf(runId)),
  });
