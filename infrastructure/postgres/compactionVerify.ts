import { compactionProblems, type CompactedIdentityRow, type CompactionRow } from '../../application/retentionRules';
import type { VerifyProblem } from '../../application/authority';
import type { Queryable } from './query';
import { liveCompactedSql } from './identities';

// R14.2: what verify checks of compaction on PostgreSQL, as on SQLite (retentionRules.ts): each
// record's digest, the identities kept for it, none also live, no row of a compacted Run left.

const RECORDS = 'SELECT run_id, record_json, compaction_digest FROM ql3.run_compactions ORDER BY run_id';
const IDENTITIES = 'SELECT identity, value, start_id, run_id, command_digest, barrier_digest FROM ql3.compacted_identities ORDER BY identity, value';
/** A compacted identity whose value a live fact's own key holds again. */
const LIVE = liveCompactedSql();
const WITH_ROWS = `SELECT c.run_id FROM ql3.run_compactions c
  WHERE EXISTS (SELECT 1 FROM ql3.runs r WHERE r.run_id = c.run_id) OR EXISTS (SELECT 1 FROM ql3.streams s WHERE s.stream_id = 'run-' || c.run_id)`;

export const compactionProblemsOn = async (q: Queryable): Promise<VerifyProblem[]> => {
  const records = (await q.query<CompactionRow>(RECORDS)).rows;
  const identities = (await q.query<CompactedIdentityRow>(IDENTITIES)).rows;
  if (records.length === 0 && identities.length === 0) return [];
  const live = new Set((await q.query<{ identity: string; value: string }>(LIVE)).rows.map((r) => `${r.identity}\u0000${r.value}`));
  const withRows = new Set((await q.query<{ run_id: string }>(WITH_ROWS)).rows.map((r) => r.run_id));
  return compactionProblems({ records, identities, isLive: (identity, value) => live.has(`${identity}\u0000${value}`), runHasRows: (runId) => withRows.has(runId) });
};
