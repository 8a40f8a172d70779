import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'chai';
import { buildScenario } from '../../domain/scenario';
import { START_STEPS } from '../../application/authority';
import type { PostgresStartBarrier } from '../../infrastructure/postgres';
import { createDatabase, openOn, type TestDatabase } from '../../testkit/postgresHarness';

// R3.9 with a real crash: a process is SIGKILLed inside the start transaction after each step,
// in both write modes. The server rolls the transaction back when the connection drops, so the
// StepRun is still `ready`, no row of the start exists in any table, and replaying the same
// command (the caller never got an answer) creates the start exactly once.

describe('PostgreSQL crash inside the start transaction (R3.9)', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let a: PostgresStartBarrier;
  before(async () => {
    db = await createDatabase();
    a = await openOn(db);
  });
  after(async () => {
    await a?.close();
    await db?.drop();
  });

  it('R3.9 SIGKILL after each step, batched and stepwise: the start is absent, then a replay creates it once', async () => {
    const worker = join(__dirname, 'crashWorker.ts');
    const cases = (['stepwise', 'batched'] as const).flatMap((mode) => START_STEPS.map((step) => ({ mode, step, scenario: buildScenario() })));
    for (const c of cases) for (const l of c.scenario.lifecycle) await a.runs.handle(l);
    const runs = await Promise.all(
      cases.map(
        (c) =>
          new Promise<{ signal: NodeJS.Signals | null; code: number | null; out: string }>((resolve) => {
            const p = spawn(process.execPath, ['--require', 'tsx/cjs', worker, db.url, JSON.stringify(c.scenario.startCommand()), c.step, c.mode], { stdio: ['ignore', 'pipe', 'pipe'] });
            let out = '';
            p.stdout.on('data', (d: Buffer) => (out += d.toString()));
            p.stderr.on('data', (d: Buffer) => (out += d.toString()));
            p.on('exit', (code, signal) => resolve({ signal, code, out }));
          }),
      ),
    );
    for (const [i, r] of runs.entries()) expect(r.signal, `${cases[i]!.mode}/${cases[i]!.step}: ${r.out}`).to.equal('SIGKILL');

    for (const c of cases) {
      const s = c.scenario;
      const command = s.startCommand();
      const where = `${c.mode}/${c.step}`;
      expect((await a.runs.getStepRun(s.runId, s.stepRunId))?.status, where).to.equal('ready');
      expect((await a.runs.readStream(s.runId)).length, where).to.equal(3);
      expect(await a.barriers.getByStartId(command.startId), where).to.equal(null);
      const { rows } = await a.pool.query<{ n: string }>(
        `SELECT (SELECT count(*) FROM ql3.security_audit_events WHERE start_id = $1) + (SELECT count(*) FROM ql3.trace_anchors WHERE start_id = $1)
              + (SELECT count(*) FROM ql3.audit_receipts WHERE start_id = $1) + (SELECT count(*) FROM ql3.step_run_mutations WHERE start_id = $1)
              + (SELECT count(*) FROM ql3.start_replay_identities WHERE start_id = $1) AS n`,
        [command.startId],
      );
      expect(rows[0]?.n, where).to.equal('0');
      const replay = await a.barriers.prepare(command);
      expect(replay.outcome, where).to.equal('created');
      expect((await a.barriers.prepare(command)).outcome, where).to.equal('existing');
    }
  });
});
