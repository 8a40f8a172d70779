import { CorruptRecordError, streamNameOf } from '../../domain';
import { EpochMillis, Identity, decodeOrThrow, integer, strictObject } from '../../domain/codecs';
import type { InDoubtStart } from '../../domain/records';
import { inDoubtStartOf } from '../../projections/outcomeRows';
import { startsInLog } from '../checks/readChecks';
import type { RecoveryApi } from '../authority';
import { requireSealedSpan } from '../eventSeals';
import type { EvidenceKeyring } from '../evidenceKeys';
import { attemptMismatch, outcomeOf, requireBarrierOfRunning, requireRunHeadsAgree } from './agreement';
import type { InDoubtIndexRow, RecoveryBackend, RecoveryView } from './view';

// `recovery.inDoubt`: the committed starts with no outcome fact yet, each a verified read that
// agrees with its StepRun (R9.3); a running StepRun or a logged start the listing would leave
// out fails it closed, never shortens it.

export const MAX_IN_DOUBT_LIMIT = 10_000;
const InDoubtLimit = integer('InDoubtLimit', 1, MAX_IN_DOUBT_LIMIT);
const InDoubtQueryCodec = strictObject('InDoubtQuery', {}, { projectId: Identity, runId: Identity, olderThanMs: EpochMillis, limit: InDoubtLimit });

type Scope = { readonly projectId?: string | undefined; readonly runId?: string | undefined; readonly olderThanMs?: number | undefined };

/**
 * One listed start, checked: its barrier, its Run's heads (once per Run), no outcome and its
 * StepRun running this attempt; from a page of the index, the index row as the barrier holds it.
 */
const listedStart = async (v: RecoveryView, startId: string, keys: EvidenceKeyring | undefined, now: number, runsChecked: Set<string>, indexRow?: InDoubtIndexRow): Promise<InDoubtStart> => {
  const barrier = await v.readBarrier(startId);
  if (barrier === null) throw new CorruptRecordError('start barrier', startId, 'listed as in doubt but unreadable');
  const b = barrier.record;
  if (indexRow !== undefined && (b.runId !== indexRow.run_id || b.projectId !== indexRow.project_id || barrier.committedAtMs !== Number(indexRow.committed_at_ms))) {
    throw new CorruptRecordError('in-doubt index', startId, 'its row does not hold what its barrier holds (Project, Run, commit time)');
  }
  if (!runsChecked.has(b.runId)) {
    await requireRunHeadsAgree(v, b.runId);
    runsChecked.add(b.runId);
  }
  // The listing says "no outcome row"; re-check through the same path reads use.
  const outcome = await outcomeOf(v, startId, keys);
  const mismatch = await attemptMismatch(v, barrier, outcome);
  if (outcome !== null || mismatch !== undefined) throw new CorruptRecordError('start outcome', startId, mismatch ?? 'listed as in doubt but has an outcome');
  return inDoubtStartOf(barrier, now);
};

/**
 * R9.4: an outcome appended without the key would take its start off the list. Every Run stream
 * whose outcome does so is checked whole (its seals, one read per Run).
 */
const requireRunsSealed = async (v: RecoveryView, keys: EvidenceKeyring, runIds: readonly string[]): Promise<void> => {
  for (const runId of runIds) {
    const stream = streamNameOf(runId);
    requireSealedSpan(keys, stream, await v.sealedSpan(stream, 1, Number.MAX_SAFE_INTEGER), 1, Number.MAX_SAFE_INTEGER);
  }
};

const scopeOf = (q: Scope) => ({ ...(q.projectId === undefined ? {} : { projectId: q.projectId }), ...(q.runId === undefined ? {} : { runId: q.runId }) });

/**
 * A page of the listing (a limit given): read from the in-doubt index, so it costs the rows
 * it lists (each checked as the whole listing checks it: its barrier, its Run's heads, no
 * outcome, its StepRun running this attempt, and the index row as the barrier holds it),
 * whatever the number in doubt. What a page does not read it does not vouch for: when it is
 * short and no age cutoff is given it lists the whole scope, so a running StepRun beyond it
 * (its barrier or its index row gone) fails it closed; the unlimited listing and `verify`
 * check the whole store. Keyed (R9.4), a page checks the MACs of what it reads (each listed
 * barrier; no listed start has an outcome to check): an outcome appended without the key
 * that took some other start off the index is found by the whole listing and `verify`,
 * which read every Run with an outcome, never by a page (that read would cost the store).
 */
const inDoubtPage = async (v: RecoveryView, keys: EvidenceKeyring | undefined, q: Scope, limit: number): Promise<readonly InDoubtStart[]> => {
  const now = await v.nowMs();
  const scope = scopeOf(q);
  const cutoff = q.olderThanMs === undefined ? undefined : now - q.olderThanMs;
  const rows = await v.inDoubtIndexPage({ ...scope, ...(cutoff === undefined ? {} : { committedAtOrBeforeMs: cutoff }), limit });
  const out: InDoubtStart[] = [];
  const runsChecked = new Set<string>();
  for (const row of rows) out.push(await listedStart(v, row.start_id, keys, now, runsChecked, row));
  if (rows.length < limit && cutoff === undefined) {
    // The whole scope is listed: every running StepRun in it is one listed start's attempt.
    const listed = new Set(out.map((d) => `${d.runId}\u0000${d.stepRunId}`));
    for (const row of await v.runningStepRuns({ ...scope, limit: out.length + 1 })) {
      if (listed.has(`${row.run_id}\u0000${row.step_run_id}`)) continue;
      const startId = await requireBarrierOfRunning(v, row, keys);
      throw new CorruptRecordError('in-doubt index', startId, 'its StepRun runs this start, which has no outcome, but the in-doubt index does not list it');
    }
  }
  return out;
};

/** The whole listing (no limit): from the barriers with no outcome row, each checked, and every running StepRun of the scope. */
const inDoubtListing = async (v: RecoveryView, keys: EvidenceKeyring | undefined, q: Scope): Promise<readonly InDoubtStart[]> => {
  const now = await v.nowMs();
  const ids = await v.inDoubtStartIds({ ...scopeOf(q), ...(q.olderThanMs === undefined ? {} : { committedAtOrBeforeMs: now - q.olderThanMs }) });
  const out: InDoubtStart[] = [];
  const runsChecked = new Set<string>();
  for (const startId of ids) out.push(await listedStart(v, startId, keys, now, runsChecked));
  // The listing starts from barriers; a running StepRun whose barrier is gone must not
  // make the answer "nothing in doubt" (R9.3).
  for (const row of await v.runningStepRuns(scopeOf(q))) await requireBarrierOfRunning(v, row, keys);
  // Scoped to one whole Run, its log says which starts it made: each is listed or has its
  // outcome, so a start whose barrier and StepRun rows are both gone is not left out.
  if (q.runId !== undefined && q.projectId === undefined && q.olderThanMs === undefined) {
    const listed = new Set(out.map((d) => d.startId));
    for (const { startId } of startsInLog(await v.stepRunStartedRows(q.runId))) {
      if (listed.has(startId) || (await outcomeOf(v, startId, keys)) !== null) continue;
      throw new CorruptRecordError('start outcome', startId, "the Run's log starts it and no outcome is stored for it, but it is not listed as in doubt");
    }
  }
  // R9.4: a store-wide listing costs one such read per Run with an outcome in its scope.
  if (keys !== undefined) {
    const runIds =
      q.runId !== undefined
        ? [q.runId]
        : await v.resolvedRunIds({
            ...(q.projectId === undefined ? {} : { projectId: q.projectId }),
            ...(q.olderThanMs === undefined ? {} : { committedAtOrBeforeMs: now - q.olderThanMs }),
          });
    await requireRunsSealed(v, keys, runIds);
  }
  return out;
};

export const inDoubtOperation =
  (backend: RecoveryBackend): RecoveryApi['inDoubt'] =>
  async (query = {}) => {
    const q = decodeOrThrow(InDoubtQueryCodec, 'in-doubt query', query);
    const keys = backend.keyring?.();
    return backend.snapshot((v) => (q.limit === undefined ? inDoubtListing(v, keys, q) : inDoubtPage(v, keys, q, q.limit)));
  };
