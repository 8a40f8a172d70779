import { expect } from 'chai';
import {
  PreconditionError,
  REPLAY_IDENTITIES,
  SemanticConflictError,
  ValidationError,
  type EventOf,
  replayKeysOfBarrier,
  type ReplayIdentity,
  type StartBarrierRecord,
} from '../../domain';
import { buildScenario, type Scenario } from '../../domain/scenario';
import { noteDigestOf } from '../../domain/resolution';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import type { StoredBarrier } from '../../domain/records';
import { normaliseOutcomeRow, outcomeRowOf, rebuildOutcomeRows, startOutcomeOf, type StartOutcomeRow } from '../../projections/outcomeRows';
import type { EventRow } from '../../domain/eventRows';
import { rejects } from '../../testkit/rejects';
export { rejects };

// The recovery read models (issue 5), one suite run unchanged against in-memory, SQLite and
// PostgreSQL. Every expectation about a read model is also checked against the event log.

export interface RecoveryConformanceBackend {
  readonly name: string;
  /** A fresh, empty authority. `clock` is honoured where the backend's clock is ours (memory). */
  open(options?: { clock?: () => number }): Promise<RecoverableStartBarrierAuthority>;
  /** Whether `open` honours `clock` (the SQL backends use the database clock, R3.10). */
  readonly controlsClock: boolean;
  /** The raw event log (global order) and the stored outcome rows, for the rebuild comparison. */
  raw(authority: RecoverableStartBarrierAuthority): Promise<{ events: EventRow[]; outcomes: StartOutcomeRow[] }>;
  /** Writes a resolution note row as `resolve` does first: a resolve that stopped before its outcome event. */
  orphanNote(authority: RecoverableStartBarrierAuthority, startId: string, noteDigest: string, text: string): Promise<void>;
}


export const readyScenario = async (a: RecoverableStartBarrierAuthority, options: Parameters<typeof buildScenario>[0] = {}): Promise<Scenario> => {
  const s = buildScenario(options);
  for (const c of s.lifecycle) await a.runs.handle(c);
  return s;
};

/** A ready StepRun and a committed start for it: an in-doubt attempt. */
export const startedScenario = async (a: RecoverableStartBarrierAuthority, options: Parameters<typeof buildScenario>[0] = {}) => {
  const s = await readyScenario(a, options);
  const prepared = await a.barriers.prepare(s.startCommand());
  return { s, barrier: prepared.barrier, startId: prepared.barrier.record.startId };
};

const identityValue = (b: StartBarrierRecord, identity: ReplayIdentity) => replayKeysOfBarrier(b)[identity];

const byStart = (a: StartOutcomeRow, b: StartOutcomeRow) => (a.start_id < b.start_id ? -1 : 1);

export const recoveryConformance = (backend: RecoveryConformanceBackend): void => {
  describe(`recovery read models: ${backend.name}`, function () {
    this.timeout(60_000);
    let a: RecoverableStartBarrierAuthority;
    let now = 1_790_000_000_000;
    beforeEach(async () => {
      now = 1_790_000_000_000;
      a = await backend.open({ clock: () => now });
    });
    afterEach(() => a.close());

    describe('in doubt', () => {
      it('issue 5: a committed start with no outcome fact is in doubt, with attempt, adapter, trace id and age by the database clock', async () => {
        const before = Date.now();
        const { s, barrier, startId } = await startedScenario(a);
        if (backend.controlsClock) now += 42_000;
        const [entry, ...rest] = await a.recovery.inDoubt();
        expect(rest).to.have.length(0);
        expect(entry).to.include({
          startId,
          projectId: s.projectId,
          runId: s.runId,
          stepRunId: s.stepRunId,
          attempt: 3,
          executionClass: 'process',
          traceId: barrier.record.trace.traceId,
          spanId: barrier.record.trace.spanId,
          committedAtMs: barrier.committedAtMs,
          barrierDigest: barrier.barrierDigest,
        });
        expect(entry!.adapter).to.deep.equal(barrier.record.contracts.adapter);
        if (backend.controlsClock) expect(entry!.ageMs).to.equal(42_000);
        else expect(entry!.committedAtMs + entry!.ageMs).to.be.within(before - 5_000, Date.now() + 5_000);
      });

      it('issue 5: filters by project, run and age (olderThanMs against the database clock)', async () => {
        const one = await startedScenario(a);
        if (backend.controlsClock) now += 10_000;
        const two = await startedScenario(a);
        const ids = async (q: Parameters<typeof a.recovery.inDoubt>[0]) => (await a.recovery.inDoubt(q)).map((e) => e.startId);
        expect(await ids({})).to.deep.equal([one.startId, two.startId]); // oldest first
        expect(await ids({ projectId: two.s.projectId })).to.deep.equal([two.startId]);
        expect(await ids({ runId: one.s.runId })).to.deep.equal([one.startId]);
        expect(await ids({ runId: one.s.runId, projectId: two.s.projectId })).to.deep.equal([]);
        expect(await ids({ olderThanMs: 0 })).to.have.members([one.startId, two.startId]);
        expect(await ids({ olderThanMs: 3_600_000 })).to.deep.equal([]);
        if (backend.controlsClock) expect(await ids({ olderThanMs: 5_000 })).to.deep.equal([one.startId]);
      });

      it('issue 5: limit bounds the listing to the oldest N; a limit outside 1..10000 is a validation error naming it', async () => {
        const one = await startedScenario(a);
        if (backend.controlsClock) now += 10_000;
        const two = await startedScenario(a);
        const ids = async (q: Parameters<typeof a.recovery.inDoubt>[0]) => (await a.recovery.inDoubt(q)).map((e) => e.startId);
        expect(await ids({ limit: 1 })).to.deep.equal([one.startId]);
        expect(await ids({ limit: 2 })).to.deep.equal([one.startId, two.startId]);
        expect(await ids({ limit: 10_000, runId: two.s.runId })).to.deep.equal([two.startId]);
        for (const limit of [0, -1, 1.5, 10_001, '3']) {
          const e = await rejects(a.recovery.inDoubt({ limit } as never));
          expect(e, String(limit)).to.be.instanceOf(ValidationError);
          expect((e as ValidationError).issues[0]!.path, String(limit)).to.equal('limit');
        }
      });

      it('issue 5: a ready StepRun without a start is not in doubt; malformed filters are validation errors', async () => {
        await readyScenario(a);
        expect(await a.recovery.inDoubt()).to.deep.equal([]);
        expect(await rejects(a.recovery.inDoubt({ olderThanMs: -1 }))).to.be.instanceOf(ValidationError);
        expect(await rejects(a.recovery.inDoubt({ runId: 'https://x' }))).to.be.instanceOf(ValidationError);
        expect(await rejects(a.recovery.inDoubt({ nope: 1 } as never))).to.be.instanceOf(ValidationError);
      });
    });

    describe('resolutions are new facts', () => {
      it('issue 5: resolve completed appends StepRunCompleted with who and why; the start leaves in-doubt', async () => {
        const { s, startId } = await startedScenario(a);
        const before = await a.runs.readStream(s.runId);
        const result = await a.recovery.resolve(startId, 'completed', { decidedBy: 'oncall-ana', reason: 'checked_tool_log', requestedAtMs: 7 });
        expect(result.status).to.equal('recorded');
        expect(result.outcome).to.include({ startId, outcome: 'completed', decidedBy: 'oncall-ana', reason: 'checked_tool_log', stepRunVersion: 4, requestedAtMs: 7 });
        const after = await a.runs.readStream(s.runId);
        expect(after.slice(0, before.length)).to.deep.equal(before); // nothing edited
        const appended = after.slice(before.length);
        expect(appended.map((e) => e.event.type)).to.deep.equal(['StepRunCompleted']);
        const data = (appended[0]!.event as EventOf<'StepRunCompleted'>).data;
        expect(data).to.deep.include({ startId, resolution: { decidedBy: 'oncall-ana', reason: 'checked_tool_log' }, stepRunVersion: 4 });
        expect(result.outcome.eventId).to.equal(appended[0]!.eventId);
        expect(result.outcome.committedAtMs).to.equal(appended[0]!.committedAtMs);
        expect(await a.recovery.inDoubt()).to.deep.equal([]);
        expect(await a.recovery.outcome(startId)).to.deep.equal(result.outcome);
        expect((await a.runs.getStepRun(s.runId, s.stepRunId))?.status).to.equal('completed');
      });

      it('issue 5: resolving again with the same outcome is existing; another outcome is a semantic conflict, never an edit', async () => {
        const { s, startId } = await startedScenario(a);
        const first = await a.recovery.resolve(startId, 'failed', { decidedBy: 'ops', reason: 'tool_timed_out', outcomeDigest: buildScenario().startCommand().admission.planDigest });
        const again = await a.recovery.resolve(startId, 'failed', { decidedBy: 'someone-else', reason: 'checked_tool_log' });
        expect(again).to.deep.equal({ status: 'existing', outcome: first.outcome });
        const stream = (await a.runs.readStream(s.runId)).length;
        const conflict = await rejects(a.recovery.resolve(startId, 'completed', { decidedBy: 'ops', reason: 'checked_tool_log' }));
        expect(conflict).to.be.instanceOf(SemanticConflictError);
        expect((conflict as SemanticConflictError).identity).to.equal('startId');
        expect((await a.runs.readStream(s.runId)).length).to.equal(stream);
        expect(await a.recovery.outcome(startId)).to.deep.equal(first.outcome);
      });

      it('issue 5 / R4.4: lost then ready allows a new attempt at a new version; history lists both in order, the first untouched', async () => {
        const { s, barrier: first, startId } = await startedScenario(a);
        await a.recovery.resolve(startId, 'lost', { decidedBy: 'ops', reason: 'worker_lost' });
        await a.runs.handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, requestedAtMs: 9 } });
        const ready = (await a.runs.getStepRun(s.runId, s.stepRunId))!;
        expect(ready).to.include({ status: 'ready', version: 5 });
        const second = (await a.barriers.prepare(s.startCommand(ready))).barrier;
        expect(second.record.attempt.startedStepRunVersion).to.equal(6);
        const history = await a.recovery.history(s.runId, s.stepRunId);
        expect(history.map((h) => [h.attempt, h.outcome?.outcome ?? null])).to.deep.equal([
          [3, 'lost'],
          [6, null],
        ]);
        expect(history[0]!.barrier).to.deep.equal(first);
        expect(history[1]!.barrier).to.deep.equal(second);
        expect((await a.recovery.inDoubt()).map((e) => e.startId)).to.deep.equal([second.record.startId]);
        // An attempt closed as lost can never be completed afterwards: outcomes are facts.
        expect(await rejects(a.recovery.resolve(startId, 'completed', { decidedBy: 'ops', reason: 'checked_tool_log' }))).to.be.instanceOf(SemanticConflictError);
      });

      it('issue 5: unknown starts are a precondition failure; malformed requests are validation errors and write nothing', async () => {
        const { s, startId } = await startedScenario(a);
        const unknown = await rejects(a.recovery.resolve('no-such-start', 'lost', { decidedBy: 'ops', reason: 'other_see_note' }));
        expect(unknown).to.be.instanceOf(PreconditionError);
        expect((unknown as PreconditionError).reason).to.equal('start_not_found');
        expect((await rejects(a.recovery.outcome('no-such-start'))) as PreconditionError).to.include({ reason: 'start_not_found' });
        const length = (await a.runs.readStream(s.runId)).length;
        for (const bad of [
          a.recovery.resolve(startId, 'maybe' as never, { decidedBy: 'ops', reason: 'other_see_note' }),
          a.recovery.resolve(startId, 'lost', { decidedBy: 'ops', reason: 'see https://wiki/x' as never }),
          a.recovery.resolve(startId, 'lost', { decidedBy: 'ops', reason: 'other_see_note', extra: 1 } as never),
          a.recovery.resolve(startId, 'lost', { decidedBy: 'o/ps', reason: 'other_see_note' }),
          a.recovery.resolve(startId, 'lost', { decidedBy: 'ops', reason: 'other_see_note', outcomeDigest: s.startCommand().admission.planDigest }),
        ]) {
          expect(await rejects(bad)).to.be.instanceOf(ValidationError);
        }
        expect((await a.runs.readStream(s.runId)).length).to.equal(length);
        expect((await a.recovery.inDoubt()).map((e) => e.startId)).to.deep.equal([startId]);
      });

      it('issue 5: outcome events appended by orchestration directly (runs.handle) are projected the same way', async () => {
        const { s, startId } = await startedScenario(a);
        await a.runs.handle({ type: 'FailStepRun', data: { runId: s.runId, stepRunId: s.stepRunId, startId, decidedBy: 'orchestrator', reason: 'tool_failed', requestedAtMs: 11 } });
        expect(await a.recovery.outcome(startId)).to.include({ outcome: 'failed', decidedBy: 'orchestrator', reason: 'tool_failed', requestedAtMs: 11 });
        expect(await a.recovery.inDoubt()).to.deep.equal([]);
      });

      it('issue 5: racing resolvers: the same outcome gives one recorded and the rest existing; different outcomes give one winner', async () => {
        const one = await startedScenario(a);
        const same = await Promise.all(Array.from({ length: 4 }, (_, i) => a.recovery.resolve(one.startId, 'lost', { decidedBy: `ops-${i}`, reason: 'worker_lost' })));
        expect(same.filter((r) => r.status === 'recorded')).to.have.length(1);
        expect(same.filter((r) => r.status === 'existing')).to.have.length(3);
        const two = await startedScenario(a);
        const settled = await Promise.allSettled(
          (['completed', 'failed', 'lost'] as const).map((o) => a.recovery.resolve(two.startId, o, { decidedBy: 'ops', reason: 'checked_tool_log' })),
        );
        const won = settled.filter((r) => r.status === 'fulfilled');
        expect(won).to.have.length(1);
        for (const r of settled) if (r.status === 'rejected') expect(r.reason).to.be.instanceOf(SemanticConflictError);
        const events = (await a.runs.readStream(two.s.runId)).filter((e) => ['StepRunCompleted', 'StepRunFailed', 'StepRunLost'].includes(e.event.type));
        expect(events).to.have.length(1);
      });
    });

    describe('lookup by any replay identity (R4.1)', () => {
      it('issue 5: every R4.1 identity finds the one verified barrier; an unknown value finds none', async () => {
        const { barrier } = await startedScenario(a);
        await startedScenario(a); // another start, so a lookup cannot be right by accident
        for (const identity of REPLAY_IDENTITIES) {
          expect(await a.recovery.lookup(identity, identityValue(barrier.record, identity)), identity).to.deep.equal(barrier);
        }
        expect(await a.recovery.lookup('traceId', 'no-such-trace')).to.equal(null);
        expect(await a.recovery.lookup('attempt', { runId: barrier.record.runId, stepRunId: barrier.record.stepRunId, startedStepRunVersion: 4 })).to.equal(null);
      });

      it('issue 5: a malformed lookup is a validation error', async () => {
        expect(await rejects(a.recovery.lookup('stepRunId' as never, 'x'))).to.be.instanceOf(ValidationError);
        expect(await rejects(a.recovery.lookup('attempt', 'run-1'))).to.be.instanceOf(ValidationError);
        expect(await rejects(a.recovery.lookup('traceId', { runId: 'a', stepRunId: 'b', startedStepRunVersion: 1 }))).to.be.instanceOf(ValidationError);
        expect(await rejects(a.recovery.lookup('attempt', { runId: 'a', stepRunId: 'b', startedStepRunVersion: 0 }))).to.be.instanceOf(ValidationError);
      });
    });

    describe('rebuild from the event log', () => {
      it('issue 5: in-doubt, history and the stored outcome rows equal what the event log derives', async () => {
        const completed = await startedScenario(a);
        await a.recovery.resolve(completed.startId, 'completed', { decidedBy: 'saga', reason: 'tool_succeeded' });
        const failed = await startedScenario(a);
        await a.runs.handle({ type: 'FailStepRun', data: { runId: failed.s.runId, stepRunId: failed.s.stepRunId, decidedBy: 'saga', reason: 'tool_failed', requestedAtMs: 3 } });
        const retried = await startedScenario(a, { withApproval: true });
        await a.recovery.resolve(retried.startId, 'lost', { decidedBy: 'ops', reason: 'worker_lost' });
        await a.runs.handle({ type: 'MarkStepRunReady', data: { runId: retried.s.runId, stepRunId: retried.s.stepRunId, requestedAtMs: 4 } });
        await a.barriers.prepare(retried.s.startCommand((await a.runs.getStepRun(retried.s.runId, retried.s.stepRunId))!));
        const doubtful = await startedScenario(a);
        const scenarios = [completed, failed, retried, doubtful];

        // Derive from the log alone.
        const barriers: StoredBarrier[] = [];
        const outcomes: StartOutcomeRow[] = [];
        for (const { s } of scenarios) {
          for (const e of await a.runs.readStream(s.runId)) {
            if (e.event.type === 'ToolExecutionStartBarrierCommitted') {
              barriers.push({ record: e.event.data.barrier, barrierDigest: e.event.data.barrierDigest, committedAtMs: e.committedAtMs });
            }
            const row = outcomeRowOf(e);
            if (row) outcomes.push(row);
          }
        }
        const decided = new Set(outcomes.map((o) => o.start_id));
        const expectedInDoubt = barriers.filter((b) => !decided.has(b.record.startId)).map((b) => b.record.startId);
        expect((await a.recovery.inDoubt()).map((e) => e.startId)).to.have.members(expectedInDoubt);
        expect(expectedInDoubt).to.have.length(2);
        for (const { s } of scenarios) {
          const expected = barriers
            .filter((b) => b.record.runId === s.runId && b.record.stepRunId === s.stepRunId)
            .sort((x, y) => x.record.attempt.startedStepRunVersion - y.record.attempt.startedStepRunVersion)
            .map((b) => {
              const o = outcomes.find((r) => r.start_id === b.record.startId);
              return { attempt: b.record.attempt.startedStepRunVersion, barrier: b, outcome: o ? startOutcomeOf(o) : null };
            });
          expect(await a.recovery.history(s.runId, s.stepRunId)).to.deep.equal(expected);
        }

        // And the stored table, row for row, against a rebuild of the whole raw log.
        const raw = await backend.raw(a);
        expect(raw.outcomes.map(normaliseOutcomeRow).sort(byStart)).to.deep.equal(rebuildOutcomeRows(raw.events).sort(byStart));
        expect(raw.outcomes).to.have.length(3);
      });
    });

    describe('verify', () => {
      it('issue 5: a healthy store verifies clean, every record counted, progress reaching its total', async () => {
        const { startId } = await startedScenario(a);
        await a.recovery.resolve(startId, 'lost', { decidedBy: 'ops', reason: 'other_see_note' });
        await startedScenario(a);
        const seen: [number, number][] = [];
        const report = await a.recovery.verify({ onProgress: (done, total) => seen.push([done, total]) });
        expect(report).to.deep.equal({ ok: true, checked: { barriers: 2, outcomes: 1, runs: 2, stepRuns: 2, events: 17 }, notes: { present: 0, purged: 0 }, problems: [], warnings: [] });
        const last = seen[seen.length - 1]!;
        expect(last[0]).to.equal(last[1]);
        expect(seen.map(([d]) => d)).to.deep.equal([...seen.map(([d]) => d)].sort((x, y) => x - y));
      });

      it('R10.2 a note written by a resolve that stopped before its outcome event is an orphan: a warning, not a difference; purge-note clears it', async () => {
        const { startId } = await startedScenario(a);
        const digest = noteDigestOf('called the vendor');
        await backend.orphanNote(a, startId, digest, 'called the vendor');
        const report = await a.recovery.verify();
        expect(report.ok, JSON.stringify(report.problems)).to.equal(true);
        expect(report.problems).to.deep.equal([]);
        expect(report.notes).to.deep.equal({ present: 0, purged: 0 });
        expect(report.warnings).to.have.length(1);
        expect(report.warnings[0]).to.include({ kind: 'orphan_note', record: startId });
        expect(report.warnings[0]!.problem).to.contain(digest);
        // the start is still in doubt: the orphan bound nothing
        expect((await a.recovery.inDoubt()).map((d) => d.startId)).to.include(startId);
        const purged = await a.recovery.purgeNote(startId);
        expect(purged).to.include({ startId, noteDigest: digest, status: 'purged' });
        expect(await a.recovery.verify()).to.deep.include({ ok: true, problems: [], warnings: [] });
        // a resolve afterwards binds its own note; the purged orphan stays silent
        await a.recovery.resolve(startId, 'completed', { decidedBy: 'ops', reason: 'tool_succeeded', note: 'done after all' });
        expect(await a.recovery.verify()).to.deep.include({ ok: true, notes: { present: 1, purged: 0 }, problems: [], warnings: [] });
      });

      it('R9.2 verify reads one state of the store: starts and resolutions committed while it walks are not differences, and the next verify counts them', async () => {
        const { startId } = await startedScenario(a);
        await a.recovery.resolve(startId, 'lost', { decidedBy: 'ops', reason: 'other_see_note', note: 'first' });
        // each time a walk moves on, another start commits and the one before it is resolved
        const writes: Promise<unknown>[] = [];
        let previous: Promise<string> | undefined;
        const write = () => {
          const after = previous;
          previous = (async () => {
            const before = await after;
            if (before !== undefined) await a.recovery.resolve(before, 'completed', { decidedBy: 'ops', reason: 'tool_succeeded', note: 'while verify walked' });
            return (await startedScenario(a)).startId;
          })();
          writes.push(previous);
        };
        const report = await a.recovery.verify({ onProgress: () => write() });
        await Promise.all(writes);
        expect(writes.length).to.be.above(3);
        expect(report.problems, JSON.stringify(report.problems)).to.deep.equal([]);
        expect(report).to.deep.include({ ok: true, warnings: [] });
        const after = await a.recovery.verify();
        expect(after.problems, JSON.stringify(after.problems)).to.deep.equal([]);
        expect(after.ok).to.equal(true);
        expect(after.checked.barriers).to.equal(1 + writes.length);
        expect(after.checked.outcomes).to.equal(writes.length);
      });
    });
  });
};
