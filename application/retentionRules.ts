import { compactionRecordProblem, type CompactionRecord } from '../domain';
import type { VerifyProblem } from './authority';

// R14.2, what `verify` checks of compaction on every backend: each record matches its digest
// and is its Run's, each kept identity is one its record binds (as stored), every identity a
// record binds is kept, none is also live, and no row of a compacted Run is left (half done).

export interface CompactionRow {
  readonly run_id: string;
  readonly record_json: string;
  readonly compaction_digest: string;
}
export interface CompactedIdentityRow {
  readonly identity: string;
  readonly value: string;
  readonly start_id: string;
  readonly run_id: string;
  readonly command_digest: string;
  readonly barrier_digest: string;
}

export interface CompactionFacts {
  readonly records: readonly CompactionRow[];
  readonly identities: readonly CompactedIdentityRow[];
  /** Whether the live replay index also holds this identity value. */
  isLive(identity: string, value: string): boolean;
  /** Whether a Run head or stream of this Run is still stored. */
  runHasRows(runId: string): boolean;
}

const key = (identity: string, value: string) => `${identity}\u0000${value}`;

export const compactionProblems = (f: CompactionFacts): VerifyProblem[] => {
  const problems: VerifyProblem[] = [];
  const bound = new Map<string, string>();
  const whole = new Set<string>();
  for (const c of f.records) {
    const record = `run_compactions ${c.run_id}`;
    const problem = compactionRecordProblem(c.run_id, c.record_json, c.compaction_digest);
    if (problem !== undefined) {
      problems.push({ kind: 'compaction', record, problem });
      continue;
    }
    whole.add(c.run_id);
    const r = JSON.parse(c.record_json) as CompactionRecord;
    const starts = new Map(r.barriers.map((b) => [b.startId, b]));
    for (const i of r.identities) bound.set(key(i.identity, i.value), [i.startId, c.run_id, starts.get(i.startId)?.commandDigest, starts.get(i.startId)?.barrierDigest].join('\u0000'));
    if (f.runHasRows(c.run_id)) problems.push({ kind: 'compaction', record, problem: 'its Run still holds rows: compacted only in part' });
  }
  const kept = new Set<string>();
  for (const row of f.identities) {
    const k = key(row.identity, row.value);
    kept.add(k);
    const record = `compacted_identities ${row.identity} ${row.value}`;
    if (bound.get(k) !== [row.start_id, row.run_id, row.command_digest, row.barrier_digest].join('\u0000')) {
      if (whole.has(row.run_id) || !f.records.some((c) => c.run_id === row.run_id)) problems.push({ kind: 'compaction', record, problem: 'no compaction record binds this identity as stored' });
    }
    if (f.isLive(row.identity, row.value)) problems.push({ kind: 'duplicate_identity', record, problem: 'bound both live and compacted (R4.1)' });
  }
  for (const k of bound.keys()) if (!kept.has(k)) problems.push({ kind: 'compaction', record: `compacted_identities ${k.replace('\u0000', ' ')}`, problem: 'an identity its compaction record binds is missing' });
  return problems;
};

/** The global positions the records say compaction removed, as ranges (the log is dense with them, R9.2). */
export const compactedPositionRanges = (records: readonly CompactionRow[]): (readonly [number, number])[] =>
  records.flatMap((c) => {
    try {
      return (JSON.parse(c.record_json) as CompactionRecord).globalPositions ?? [];
    } catch {
      return [];
    }
  });
