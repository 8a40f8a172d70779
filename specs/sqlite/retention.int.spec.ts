import { expect } from 'chai';
import { openSqliteStartBarrier, openSqliteRetention } from '../../infrastructure/sqlite';
import { retentionSuite } from '../conformance/retentionConformance';
import { setUp } from '../conformance/startBarrierConformance';
import { migratedDbPath } from './support';

retentionSuite({
  name: 'sqlite',
  open: async () => {
    const retention = await openSqliteRetention({ path: await migratedDbPath() });
    return { authority: retention.authority, compact: (o) => retention.compact(o as { before: number }), close: () => retention.close() };
  },
});

describe('R14.2 retention on SQLite: the runtime cannot take the path, the file shrinks, tampering is detected', function () {
  this.timeout(120_000);

  const finishedStore = async (runs: number) => {
    const path = await migratedDbPath();
    const a = await openSqliteStartBarrier({ path });
    const startIds: string[] = [];
    for (let i = 0; i < runs; i += 1) {
      const s = await setUp(a);
      const c = s.startCommand();
      await a.barriers.prepare(c);
      await a.recovery.resolve(c.startId, 'completed', { decidedBy: 'retention-spec', reason: 'tool_succeeded' });
      startIds.push(c.startId);
    }
    return { path, a, startIds };
  };

  it('R14.2 given the runtime connection, when it deletes evidence or writes a compaction record, then each is refused and nothing changes', async () => {
    const { a } = await finishedStore(1);
    const tries = [
      'DELETE FROM events',
      'DELETE FROM tool_execution_start_barriers',
      'DELETE FROM start_replay_identities',
      'DELETE FROM runs',
      `INSERT INTO run_compactions (run_id, record_json, compaction_digest) VALUES ('x', '{}', 'sha256:${'0'.repeat(64)}')`,
    ];
    let accepted = 0;
    for (const sql of tries) {
      try {
        a.db.exec(sql);
        accepted += 1;
      } catch {
        // refused: the runtime's connection has no retention gate
      }
    }
    expect(accepted).to.equal(0);
    expect((await a.recovery.verify()).ok).to.equal(true);
    await a.close();
  });

  it('R14.2 given many finished Runs, when they are compacted, then the file shrinks and verify is green', async () => {
    const { path, a } = await finishedStore(60);
    await a.close();
    const r = await openSqliteRetention({ path });
    const report = await r.compact({ before: Date.now() + 3_600_000 });
    expect(report.compacted).to.have.length(60);
    expect(report.fileBytes.after, JSON.stringify(report.fileBytes)).to.be.lessThan(report.fileBytes.before);
    expect((r.authority.db.pragma('auto_vacuum', { simple: true }) as number)).to.equal(2);
    const v = await r.authority.recovery.verify();
    expect(v.problems, JSON.stringify(v.problems)).to.deep.equal([]);
    await r.close();
  });

  it('R14.2 given a compacted Run, when its record or a kept identity is changed past the guards, then verify reports it', async () => {
    const { path, a } = await finishedStore(2);
    await a.close();
    const r = await openSqliteRetention({ path });
    await r.compact({ before: Date.now() + 3_600_000 });
    const db = r.authority.db;
    db.exec('DROP TRIGGER run_compactions_no_update; DROP TRIGGER compacted_identities_no_update');
    const run = (db.prepare('SELECT run_id FROM run_compactions ORDER BY run_id LIMIT 1').get() as { run_id: string }).run_id;
    db.prepare("UPDATE run_compactions SET record_json = json_set(record_json, '$.beforeMs', 1) WHERE run_id = ?").run(run);
    db.prepare("UPDATE compacted_identities SET command_digest = 'sha256:' || hex(zeroblob(32)) WHERE (identity, value) IN (SELECT identity, value FROM compacted_identities LIMIT 1)").run();
    const v = await r.authority.recovery.verify();
    expect(v.ok).to.equal(false);
    expect(v.problems.map((p) => p.kind)).to.include('compaction');
    await r.close();
  });
});
