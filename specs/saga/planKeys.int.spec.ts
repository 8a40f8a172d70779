import { existsSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { ValidationError, invocationPlanDigest } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { openPostgresStartBarrier } from '../../infrastructure/postgres/postgresAuthority';
import { createToolStepSaga, openExecution } from '../../application/saga';
import { rejects } from '../../testkit/rejects';
import { freshDbPath } from '../support/tmp';
import { SUCCEEDED, contractAdapterFor, planOf } from './sagaConformance';

// R12.2 bad input: a plan keyring is checked before anything is opened. Each fault is
// VALIDATION_FAILED naming the option, never quoting a key byte; no file is created, no
// connection is made. And the key never reaches the store: not a row, not a page of the file.

const KEY = randomBytes(32);
const SHORT = randomBytes(16);
const hexOf = (b: Buffer) => b.toString('hex');

const BAD: [string, unknown, string][] = [
  ['a missing key', { keyring: { current: 'k1', keys: { k1: undefined } } }, 'plans.keyring.keys.k1'],
  ['a short key', { keyring: { current: 'k1', keys: { k1: SHORT } } }, 'plans.keyring.keys.k1'],
  ['a key that is text', { keyring: { current: 'k1', keys: { k1: hexOf(KEY) } } }, 'plans.keyring.keys.k1'],
  ['a key id given twice', { keyring: { current: 'k1', keys: [{ id: 'k1', key: KEY }, { id: 'k1', key: randomBytes(32) }] } }, 'plans.keyring.keys[1].id'],
  ['a current key that is not given', { keyring: { current: 'k2', keys: { k1: KEY } } }, 'plans.keyring.current'],
  ['no keys', { keyring: { current: 'k1', keys: {} } }, 'plans.keyring.keys'],
  ['no keyring', {}, 'plans.keyring'],
  ['an unknown plans option', { keyring: { current: 'k1', keys: { k1: KEY } }, maxPlanByte: 10 }, 'plans.maxPlanByte'],
  ['an unknown keyring option', { keyring: { current: 'k1', keys: { k1: KEY }, rotate: true } }, 'plans.keyring.rotate'],
  ['a plan limit over 1 MiB', { keyring: { current: 'k1', keys: { k1: KEY } }, maxPlanBytes: 2 * 1024 * 1024 }, 'plans.maxPlanBytes'],
  ['a key both given and destroyed', { keyring: { current: 'k1', keys: { k1: KEY }, destroyed: ['k1'] } }, 'plans.keyring.destroyed[0]'],
];

const expectNamed = (e: Error, what: string, path: string): void => {
  expect(e, what).to.be.instanceOf(ValidationError);
  expect((e as ValidationError).issues[0]?.path, what).to.equal(path);
  for (const secret of [hexOf(KEY), hexOf(SHORT), KEY.toString('base64')]) expect(e.message + JSON.stringify(e)).to.not.contain(secret);
};

describe('R12.2 plan keys: checked before anything is opened, and never stored', function () {
  this.timeout(60_000);

  for (const [what, plans, path] of BAD) {
    it(`R12.2 ${what} is VALIDATION_FAILED naming ${path} on every backend: no file created, no connection made`, async () => {
      expectNamed(await rejects(openMemoryStartBarrier({ plans } as never)), what, path);
      const file = freshDbPath('plan-keys');
      expectNamed(await rejects(openSqliteStartBarrier({ path: file, plans } as never)), what, path);
      expect(existsSync(file), 'no file created').to.equal(false);
      // port 1 on loopback: any attempt to connect would fail otherwise than with the named option
      expectNamed(await rejects(openPostgresStartBarrier({ connectionString: 'postgres://nobody@127.0.0.1:1/none', plans } as never)), what, path);
    });
  }

  it('R12.2 the key never reaches the SQLite file (its pages and its WAL), while the sealed plan opens with it', async () => {
    const file = freshDbPath('plan-keys');
    const authority = await openSqliteStartBarrier({ path: file, plans: { keyring: { current: 'k1', keys: { k1: KEY } } } });
    const execution = openExecution(authority, { execution: 'enabled' });
    try {
      const s = buildScenario();
      for (const c of s.lifecycle) await authority.runs.handle(c);
      const invocation = { input: { query: 'q', secret: 'plan-secret-marker-77' } };
      const base = planOf(s.startCommand());
      const plan = { ...base, admission: { ...base.admission, planDigest: invocationPlanDigest(invocation) } };
      const result = await createToolStepSaga({ execution, adapter: contractAdapterFor(plan, {}, async () => SUCCEEDED) }).drive({ kind: 'ready', runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 2, requestedAtMs: 1_790_000_000_000 }, plan, invocation);
      expect(result).to.include({ status: 'completed' });
    } finally {
      await execution.close();
      await authority.close();
    }
    const bytes = Buffer.concat([readFileSync(file), ...(existsSync(`${file}-wal`) ? [readFileSync(`${file}-wal`)] : [])]);
    expect(bytes.indexOf(KEY), 'the key bytes').to.equal(-1);
    expect(bytes.indexOf(Buffer.from(hexOf(KEY))), 'the key as hex').to.equal(-1);
    expect(bytes.indexOf(Buffer.from('plan-secret-marker-77')), 'the tool input').to.equal(-1);
  });
});
