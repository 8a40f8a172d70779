import { randomBytes } from 'node:crypto';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { attemptIdsOf } from '../../domain';
import { createToolStepSaga, openExecution } from '../../application/saga';
import { readyToolCall } from '../../testkit/adapters/toolCall';
import { createDatabase, openOn, type TestDatabase } from '../../testkit/postgresHarness';
import { contractAdapterFor } from '../saga/sagaConformance';
import { freshDir } from '../support/tmp';
import { buildOnce, json, runCli, type CliResult } from './cliSuite';

// R12.2 on PostgreSQL: the CLI's plan keyring works on `--postgres` as on `--db`: show, inspect,
// in-doubt and verify open the sealed plan with the key and print its redacted preview, never
// its input or a key; a plan that does not open under the key given fails closed (exit 5).

interface Shown {
  plan: { status: string; preview?: { shown: Record<string, unknown> }; verified?: boolean };
}

describe('R12.2 the CLI plan keyring on PostgreSQL: the sealed plan\'s preview, never the plan or the key', function () {
  this.timeout(180_000);
  const dir = freshDir('plan-keyring-pg');
  const key = randomBytes(32);
  const other = randomBytes(32);
  const SECRET_INPUT = 'plan-input-secret-pg-71c2';
  const registry = join(dir, 'adapters.json');
  writeFileSync(registry, '{}');
  let db: TestDatabase;
  let startId: string;
  let n = 0;

  const keyFile = (keys: Record<string, Buffer>): string => {
    const path = join(dir, `plan-keys-${++n}.json`);
    const text = JSON.stringify({ active: Object.keys(keys)[0], keys: Object.fromEntries(Object.entries(keys).map(([id, k]) => [id, k.toString('base64')])) });
    writeFileSync(path, text, { mode: 0o600 });
    chmodSync(path, 0o600);
    return path;
  };
  const cli = async (args: readonly string[], file: string): Promise<CliResult> => {
    const r = await runCli([...args, '--postgres', db.url, '--plan-keyring', file]);
    for (const text of [r.stdout, r.stderr]) {
      for (const k of [key, other]) expect(text).to.not.contain(k.toString('base64'));
      expect(text).to.not.contain(SECRET_INPUT);
    }
    return r;
  };

  before(async () => {
    buildOnce();
    db = await createDatabase();
    // A start committed with its plan sealed; the saga dies before any claim or adapter.
    const authority = await openOn(db, { plans: { keyring: { current: 'k1', keys: { k1: key } } } });
    const execution = openExecution(authority, { execution: 'enabled' });
    try {
      const call = await readyToolCall(authority, 'process', { query: 'orders of today', token: SECRET_INPUT }, 30_000);
      const crash = new Error('killed after the plan was sealed');
      const saga = createToolStepSaga({ execution, adapter: contractAdapterFor(call.plan), redaction: { fields: ['query'] }, hooks: { afterSeal: () => Promise.reject(crash) } });
      expect(await saga.drive(call.trigger, call.plan, call.invocation).catch((e: unknown) => e)).to.equal(crash);
      startId = attemptIdsOf(call.scenario.runId, call.scenario.stepRunId, call.trigger.stepRunVersion + 1).startId;
    } finally {
      await execution.close();
      await authority.close();
    }
  });
  after(async () => db?.drop());

  it('R12.2 with the plan key, show, inspect and in-doubt print the redacted preview (verified), never the input; verify opens every plan', async () => {
    const file = keyFile({ k1: key });
    const shown = json<Shown>(await cli(['show', '--start-id', startId], file));
    expect(shown.plan).to.deep.include({ status: 'sealed', verified: true });
    expect(shown.plan.preview!.shown).to.deep.equal({ query: 'orders of today' });
    expect(json<Shown>(await cli(['inspect', startId, '--adapters', registry], file)).plan).to.deep.equal(shown.plan);
    const listed = json<(Shown & { startId: string })[]>(await cli(['in-doubt'], file));
    expect(listed.map((d) => [d.startId, d.plan])).to.deep.equal([[startId, shown.plan]]);
    expect(json<{ ok: boolean; plans: unknown }>(await cli(['verify', '--progress', 'none'], file))).to.deep.include({ ok: true, plans: { sealed: 1, shredded: 0 } });
  });

  it('R12.2 a plan that does not open under the key given fails closed: CORRUPT_RECORD, exit 5, never a key', async () => {
    const wrong = await cli(['show', '--start-id', startId], keyFile({ k1: other }));
    expect(wrong.code, wrong.stderr).to.equal(5);
    expect(wrong.stderr).to.match(/CORRUPT_RECORD: .*invocation plan/);
  });
});
