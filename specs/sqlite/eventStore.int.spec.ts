import { expect } from 'chai';
import type Database from 'better-sqlite3';
import { withTriggersDropped } from '../../testkit/damage';
import { DeciderCommandHandler, ExpectedVersionConflictError, STREAM_DOES_NOT_EXIST, STREAM_EXISTS } from '@event-driven-io/emmett';
import { CorruptRecordError, PreconditionError, ValidationError, decideLifecycle, initialRunState, evolve, runDecider, streamNameOf, type LifecycleCommand, type RunState } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { openFreshSqlite, sqliteCounts } from './support';
import type { SqliteStartBarrier } from '../../infrastructure/sqlite';

const rejects = async (p: Promise<unknown>): Promise<unknown> => p.then(() => undefined, (e: unknown) => e);
const label = (range: object): string => JSON.stringify(range, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));

describe('SQLite event store: the shape emmett drives (R5.1)', () => {
  const handle = DeciderCommandHandler<RunState, LifecycleCommand, Parameters<typeof evolve>[1]>({
    decide: decideLifecycle,
    evolve,
    initialState: initialRunState,
  });

  it("emmett's DeciderCommandHandler runs read-decide-append in one session; projections follow; a start then commits", async () => {
    const a = await openFreshSqlite();
    const s = buildScenario();
    for (const command of s.lifecycle) await handle(a.eventStore, streamNameOf(s.runId), command);
    const stepRun = await a.runs.getStepRun(s.runId, s.stepRunId);
    expect(stepRun?.status).to.equal('ready');
    expect(stepRun?.version).to.equal(2);
    expect((await a.barriers.prepare(s.startCommand())).outcome).to.equal('created');
    const read = await a.eventStore.readStream(streamNameOf(s.runId));
    expect(read.currentStreamVersion).to.equal(8n);
    expect(read.events.map((e) => e.metadata.streamPosition)).to.deep.equal([1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n]);
    const aggregated = await a.eventStore.aggregateStream(streamNameOf(s.runId), { evolve, initialState: initialRunState });
    expect(aggregated.state.stepRuns[s.stepRunId]?.status).to.equal('running');
    await a.close();
  });

  it('every expected-version mode is enforced strictly, and a refused append writes nothing', async () => {
    const a = await openFreshSqlite();
    const s = buildScenario();
    const stream = streamNameOf(s.runId);
    const [created] = runDecider.decide(s.lifecycle[0]!, initialRunState());
    expect(await rejects(a.eventStore.appendToStream(stream, [created!], { expectedStreamVersion: STREAM_EXISTS }))).to.be.instanceOf(ExpectedVersionConflictError);
    expect(await rejects(a.eventStore.appendToStream(stream, [created!], { expectedStreamVersion: 1n }))).to.be.instanceOf(ExpectedVersionConflictError);
    const first = await a.eventStore.appendToStream(stream, [created!], { expectedStreamVersion: STREAM_DOES_NOT_EXIST });
    expect(first).to.include({ nextExpectedStreamVersion: 1n, createdNewStream: true });
    const before = sqliteCounts(a);
    expect(await rejects(a.eventStore.appendToStream(stream, [created!], { expectedStreamVersion: STREAM_DOES_NOT_EXIST }))).to.be.instanceOf(ExpectedVersionConflictError);
    const state = evolve(initialRunState(), created!);
    const [stepCreated] = runDecider.decide(s.lifecycle[1]!, state);
    expect(await rejects(a.eventStore.appendToStream(stream, [stepCreated!], { expectedStreamVersion: 0n }))).to.be.instanceOf(ExpectedVersionConflictError);
    // a batch whose second event is an illegal transition appends nothing at all
    const illegal = { type: 'StepRunLost', data: { runId: s.runId, stepRunId: s.stepRunId, startId: 'none', stepRunVersion: 2, resolution: { decidedBy: 'x', reason: 'worker_lost' }, occurredAtMs: 1 } };
    expect(await rejects(a.eventStore.appendToStream(stream, [stepCreated!, illegal], { expectedStreamVersion: 1n }))).to.be.instanceOf(PreconditionError);
    expect(sqliteCounts(a)).to.deep.equal(before);
    await a.close();
  });

  it('R7.1 start facts can never be appended through the generic store', async () => {
    const a = await openFreshSqlite();
    const s = buildScenario();
    for (const c of s.lifecycle) await a.runs.handle(c);
    const fake = { type: 'SecurityAuditEventRecorded', data: {} };
    expect(await rejects(a.eventStore.appendToStream(streamNameOf(s.runId), [fake]))).to.be.instanceOf(ValidationError);
    expect(sqliteCounts(a).security_audit_events).to.equal(0);
    await a.close();
  });
  it('R9.2, R9.3 a range read returns whole, chained events, and fails closed on a changed or a missing event in its range, or on global positions out of stream order', async () => {
    const a = (await openFreshSqlite()) as SqliteStartBarrier;
    const s = buildScenario();
    const stream = streamNameOf(s.runId);
    for (const command of s.lifecycle) await handle(a.eventStore, stream, command);
    await a.barriers.prepare(s.startCommand());
    expect((await a.eventStore.readStream(stream, { from: 2n, maxCount: 3n })).events.map((e) => e.metadata.streamPosition)).to.deep.equal([3n, 4n, 5n]);
    // the owner, with the events' triggers dropped for each change and made again, changes a time by one millisecond: still valid JSON, still a valid event
    const owner = (body: () => void) => withTriggersDropped(a.db as Database.Database, (t) => t.tbl_name === 'events', body);
    owner(() => a.db.prepare('UPDATE events SET committed_at_ms = committed_at_ms + 1 WHERE stream_id = ? AND stream_position = 4').run(stream));
    for (const range of [{}, { from: 3n }, { from: 2n, maxCount: 2n }, { to: 4n }]) {
      expect(await rejects(a.eventStore.readStream(stream, range)), label(range)).to.be.instanceOf(CorruptRecordError);
    }
    // a range after it reads: its first event binds the changed event's stored chain digest, which is intact
    expect((await a.eventStore.readStream(stream, { from: 4n })).events).to.have.length(4);
    owner(() => {
      a.db.prepare('UPDATE events SET committed_at_ms = committed_at_ms - 1 WHERE stream_id = ? AND stream_position = 4').run(stream);
      a.db.prepare('DELETE FROM events WHERE stream_id = ? AND stream_position = 6').run(stream);
    });
    for (const range of [{ from: 4n }, { from: 5n, maxCount: 1n }, { from: 6n }]) {
      expect(await rejects(a.eventStore.readStream(stream, range)), label(range)).to.be.instanceOf(CorruptRecordError);
    }
    expect((await a.eventStore.readStream(stream, { from: 1n, maxCount: 3n })).events).to.have.length(3);
    // R9.2: two events' global positions swapped (the chain does not bind them): every range over both fails
    const [g2, g3] = [2, 3].map((p) => (a.db.prepare('SELECT global_position FROM events WHERE stream_id = ? AND stream_position = ?').get(stream, p) as { global_position: number }).global_position);
    const move = a.db.prepare('UPDATE events SET global_position = ? WHERE stream_id = ? AND stream_position = ?');
    owner(() => {
      for (const [g, p] of [[-1, 2], [g2!, 3], [g3!, 2]]) move.run(g, stream, p);
    });
    for (const range of [{ from: 1n, maxCount: 2n }, { from: 2n, maxCount: 1n }]) {
      expect(await rejects(a.eventStore.readStream(stream, range)), `global positions swapped: ${label(range)}`).to.be.instanceOf(CorruptRecordError);
    }
    await a.close();
  });

  it("R9.3 the stream's version is where its heads and its log agree: a stream row gone, both heads moved back by one, or the last event gone (with the heads set back to match or not) fail readStream, aggregateStream and streamExists closed, never an empty or a shorter stream", async () => {
    const a = (await openFreshSqlite()) as SqliteStartBarrier;
    const s = buildScenario();
    const stream = streamNameOf(s.runId);
    for (const command of s.lifecycle) await handle(a.eventStore, stream, command);
    await a.barriers.prepare(s.startCommand());
    // the owner's changes, each with every trigger dropped and made again
    const owner = (body: () => void) => withTriggersDropped(a.db as Database.Database, () => true, body);
    a.db.pragma('foreign_keys = OFF');
    const reads = async (what: string) => {
      expect(await rejects(a.eventStore.readStream(stream)), `${what}: readStream`).to.be.instanceOf(CorruptRecordError);
      expect(await rejects(a.eventStore.readStream(stream, { from: 2n, maxCount: 2n })), `${what}: a range`).to.be.instanceOf(CorruptRecordError);
      expect(await rejects(a.eventStore.aggregateStream(stream, { evolve, initialState: initialRunState })), `${what}: aggregateStream`).to.be.instanceOf(CorruptRecordError);
      expect(await rejects(a.eventStore.streamExists(stream)), `${what}: streamExists`).to.be.instanceOf(CorruptRecordError);
    };
    const row = a.db.prepare('SELECT * FROM streams WHERE stream_id = ?').get(stream) as Record<string, unknown>;
    owner(() => a.db.prepare('DELETE FROM streams WHERE stream_id = ?').run(stream));
    await reads('stream row deleted');
    owner(() => {
      a.db.prepare('INSERT INTO streams (stream_id, stream_type, version) VALUES (@stream_id, @stream_type, @version)').run(row);
      a.db.prepare('UPDATE streams SET version = version - 1 WHERE stream_id = ?').run(stream);
      a.db.prepare('UPDATE runs SET version = version - 1 WHERE run_id = ?').run(s.runId);
    });
    await reads('both heads - 1');
    owner(() => {
      a.db.prepare('UPDATE streams SET version = version + 1 WHERE stream_id = ?').run(stream);
      a.db.prepare('UPDATE runs SET version = version + 1 WHERE run_id = ?').run(s.runId);
    });
    expect((await a.eventStore.readStream(stream)).events).to.have.length(8);
    expect(await a.eventStore.streamExists(stream)).to.equal(true);
    owner(() => a.db.prepare('DELETE FROM events WHERE stream_id = ? AND stream_position = 8').run(stream));
    await reads('last event deleted');
    // the heads set back to match it: the StepRun head and the barrier still account for 8 events
    owner(() => {
      a.db.prepare('UPDATE streams SET version = version - 1 WHERE stream_id = ?').run(stream);
      a.db.prepare('UPDATE runs SET version = version - 1 WHERE run_id = ?').run(s.runId);
    });
    await reads('last event deleted, both heads - 1');
    expect(await a.eventStore.streamExists(streamNameOf('never-created'))).to.equal(false);
    await a.close();
  });

  it('R10.1 a read range that is not whole positions and a count (a negative from, a fraction, text, an end before its start) is VALIDATION_FAILED naming it, never read as damage', async () => {
    const a = (await openFreshSqlite()) as SqliteStartBarrier;
    const s = buildScenario();
    const stream = streamNameOf(s.runId);
    for (const command of s.lifecycle) await handle(a.eventStore, stream, command);
    for (const [range, path] of [[{ from: -5n }, 'from'], [{ to: -1n }, 'to'], [{ maxCount: -2n }, 'maxCount'], [{ from: 1.5 }, 'from'], [{ from: '2' }, 'from'], [{ from: 3n, to: 2n }, 'to']] as const) {
      const e = await rejects(a.eventStore.readStream(stream, range as never));
      expect(e, label(range)).to.be.instanceOf(ValidationError);
      expect((e as ValidationError).issues.map((i) => i.path)).to.deep.equal([path]);
    }
    expect((await a.eventStore.readStream(stream, { from: 0n, maxCount: 0n })).events).to.deep.equal([]);
    expect((await a.eventStore.readStream(stream, { from: 1, to: 2 } as never)).events).to.have.length(1);
    await a.close();
  });
});
