import { PreconditionError, REPLAY_IDENTITIES, classifyReplay, noReplayHits, replayKeysOf, type DecodedStartCommand, type ReplayHit, type ReplayIdentity } from '../../domain';
import { replayValuesOf } from '../../projections/rows';
import type { Queryable } from './query';

// R14.2 on PostgreSQL: what a compacted Run still answers. The start path never reads these
// tables: a compacted Run has no head (the decider says run_not_found) and a compacted identity
// refuses its reuse in the database (the barrier's insert trigger raises the unique violation a live identity would). Only
// such a refusal reads them, to answer as SQLite does: START_COMPACTED for an exact replay, a
// conflict for drift, run_compacted for a new command on the Run.

const LOOKUP_COMPACTED = `SELECT i.identity, i.value, i.start_id, i.run_id, i.command_digest, i.barrier_digest, c.compaction_digest
  FROM ql3.compacted_identities i LEFT JOIN ql3.run_compactions c ON c.run_id = i.run_id
  WHERE (i.identity, i.value) IN (SELECT * FROM unnest($1::text[], $2::text[]))`;
const RUN_COMPACTED = 'SELECT EXISTS (SELECT 1 FROM ql3.run_compactions WHERE run_id = $1) AS compacted';

const isRunNotFound = (e: unknown): boolean => e instanceof PreconditionError && e.reason === 'run_not_found';

/** A Run with no head that compaction removed: run_compacted, else the refusal as it was. */
export const requireRunNotCompacted = async (q: Queryable, runId: string, refusal: unknown): Promise<never> => {
  if (isRunNotFound(refusal) && (await q.query<{ compacted: boolean }>(RUN_COMPACTED, [runId])).rows[0]?.compacted === true) {
    throw new PreconditionError('run_compacted', `Run ${runId} was compacted (R14.2)`);
  }
  throw refusal;
};

/** A start refused for its missing Run: answered from the compacted identities when they hold any of its own. */
export const compactedStartAnswer = async (q: Queryable, decoded: DecodedStartCommand, refusal: unknown): Promise<never> => {
  if (!isRunNotFound(refusal)) throw refusal;
  const values = replayValuesOf(replayKeysOf(decoded.command));
  const rows = (
    await q.query<{ identity: ReplayIdentity; value: string; start_id: string; run_id: string; command_digest: string; barrier_digest: string; compaction_digest: string | null }>(LOOKUP_COMPACTED, [
      [...REPLAY_IDENTITIES],
      REPLAY_IDENTITIES.map((identity) => values[identity]),
    ])
  ).rows;
  if (rows.length > 0) {
    const hits = noReplayHits() as Record<ReplayIdentity, ReplayHit[]>;
    for (const r of rows) {
      hits[r.identity] = [...hits[r.identity], { startId: r.start_id, commandDigest: r.command_digest, compacted: { runId: r.run_id, barrierDigest: r.barrier_digest, compactionDigest: r.compaction_digest ?? '' } }];
    }
    classifyReplay(decoded, hits); // throws: START_COMPACTED, or the identity in conflict
  }
  return requireRunNotCompacted(q, decoded.command.stepRun.runId, refusal);
};
