import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { attemptIdsOf } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { createToolStepSaga, openExecution } from '../../application/saga';
import { readyToolCall } from '../../testkit/adapters/toolCall';
import { contractAdapterFor } from '../saga/sagaConformance';
import { freshDir } from '../support/tmp';
import { buildOnce, json, runCli, type CliResult } from './cliSuite';

// R12.2: the CLI reads a plan keyring (`--plan-keyring FILE`, QINGLONG_BARRIER_PLAN_KEYRING_FILE)
// as strictly as the evidence key file. `show`, `inspect` and `in-doubt` print a sealed plan's
// status and redacted preview, never its input; with the key they open it to prove it is the
// one the barrier binds. A bad key file is VALIDATION_FAILED (exit 2) naming what is wrong,
// before any database is opened or created; no output or error ever shows a key.

interface Shown {
  plan: { status: string; preview?: { shown: Record<string, unknown> }; verified?: boolean };
}

describe('R12.2 the CLI plan keyring: show, inspect and in-doubt print the sealed plan\'s preview, never the plan or the key', function () {
  this.timeout(120_000);
  const dir = freshDir('plan-keyring');
  const key = randomBytes(32);
  const other = randomBytes(32);
  const SECRET_INPUT = 'plan-input-secret-3f9a';
  const db = join(dir, 'barrier.db');
  const registry = join(dir, 'adapters.json');
  writeFileSync(registry, '{}');
  const lifecycle = join(dir, 'create-run.json');
  writeFileSync(lifecycle, JSON.stringify(buildScenario().lifecycle[0]));
  let startId: string;
  let n = 0;

  const keyFile = (text: string | Buffer, mode = 0o600): string => {
    const path = join(dir, `plan-keys-${++n}.json`);
    writeFileSync(path, text, { mode });
    chmodSync(path, mode);
    return path;
  };
  const b64 = (b: Buffer) => b.toString('base64');
  const good = (keys: Record<string, string> = { k1: b64(key) }, extra: Record<string, unknown> = {}) => JSON.stringify({ active: Object.keys(keys)[0], keys, ...extra });

  /** The CLI with the file given by option (or by the environment), checked to show no key and no plan input. */
  const cli = async (args: readonly string[], file?: string, by: 'option' | 'env' = 'option', env: NodeJS.ProcessEnv = {}): Promise<CliResult> => {
    const given = file === undefined ? [] : by === 'option' ? ['--plan-keyring', file] : [];
    const r = await runCli([...args, '--db', db, ...given], undefined, { ...(file !== undefined && by === 'env' ? { QINGLONG_BARRIER_PLAN_KEYRING_FILE: file } : {}), ...env });
    for (const text of [r.stdout, r.stderr]) {
      for (const k of [key, other]) {
        expect(text).to.not.contain(b64(k));
        expect(text).to.not.contain(k.toString('hex'));
      }
      expect(text).to.not.contain(SECRET_INPUT);
    }
    return r;
  };

  before(async () => {
    buildOnce();
    // A start committed with its plan sealed; the saga dies before any claim or adapter.
    const authority = await openSqliteStartBarrier({ path: db, plans: { keyring: { current: 'k1', keys: { k1: key } } } });
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

  it('R12.2 with the plan key (option or environment), show, inspect and in-doubt open the sealed plan and print its redacted preview (verified), never its input; verify opens every plan', async () => {
    const file = keyFile(good());
    for (const by of ['option', 'env'] as const) {
      const shown = json<Shown>(await cli(['show', '--start-id', startId], file, by));
      expect(shown.plan).to.deep.include({ status: 'sealed', verified: true });
      expect(shown.plan.preview!.shown).to.deep.equal({ query: 'orders of today' });
      const inspected = json<Shown>(await cli(['inspect', startId, '--adapters', registry], file, by));
      expect(inspected.plan).to.deep.equal(shown.plan);
      const listed = json<(Shown & { startId: string })[]>(await cli(['in-doubt'], file, by));
      expect(listed.map((d) => [d.startId, d.plan])).to.deep.equal([[startId, shown.plan]]);
    }
    const report = json<{ ok: boolean; plans: unknown }>(await cli(['verify', '--progress', 'none'], file));
    expect(report).to.deep.include({ ok: true, plans: { sealed: 1, shredded: 0 } });
  });

  it('R12.2 without a plan key the plan is shown as stored (verified: false); a start with no plan shows status absent', async () => {
    const shown = json<Shown>(await cli(['show', '--start-id', startId]));
    expect(shown.plan).to.deep.include({ status: 'sealed', verified: false });
    expect(shown.plan.preview!.shown).to.deep.equal({ query: 'orders of today' });
    const s = buildScenario();
    const cmd = join(dir, 'lifecycle.json');
    const start = join(dir, 'start.json');
    writeFileSync(cmd, JSON.stringify(s.lifecycle));
    writeFileSync(start, JSON.stringify(s.startCommand()));
    json(await cli(['apply', '--command', cmd]));
    json(await cli(['prepare', '--command', start]));
    expect(json<Shown>(await cli(['show', '--start-id', s.startCommand().startId], keyFile(good()))).plan).to.deep.equal({ status: 'absent' });
  });

  it('R12.2 a destroyed key makes its plans read as shredded while verify stays green; a plan that does not open under the key given fails closed (CORRUPT_RECORD, exit 5), naming the key id, never a key', async () => {
    const destroyed = keyFile(good({ k2: b64(other) }, { destroyed: ['k1'] }));
    expect(json<Shown>(await cli(['show', '--start-id', startId], destroyed)).plan).to.deep.include({ status: 'shredded' });
    expect(json<{ ok: boolean; plans: unknown }>(await cli(['verify', '--progress', 'none'], destroyed))).to.deep.include({ ok: true, plans: { sealed: 0, shredded: 1 } });
    const wrong = await cli(['show', '--start-id', startId], keyFile(good({ k1: b64(other) })));
    expect(wrong.code, wrong.stderr).to.equal(5);
    expect(wrong.stderr).to.match(/CORRUPT_RECORD: .*invocation plan/);
    const absentKey = await cli(['show', '--start-id', startId], keyFile(good({ k2: b64(other) })));
    expect(absentKey.code, absentKey.stderr).to.equal(5);
    expect(absentKey.stderr).to.contain('sealed under key id k1, which the keyring does not hold');
  });

  /** A bad file on `apply` to a database that does not exist yet: exit 2 naming it, the database never made. */
  const refused = async (file: string, pattern: RegExp, env: NodeJS.ProcessEnv = {}, by: 'option' | 'env' = 'option'): Promise<CliResult> => {
    const fresh = join(dir, `fresh-${++n}.db`);
    const given = by === 'option' ? ['--plan-keyring', file] : [];
    const r = await runCli(['apply', '--command', lifecycle, '--db', fresh, ...given], undefined, { ...(by === 'env' ? { QINGLONG_BARRIER_PLAN_KEYRING_FILE: file } : {}), ...env });
    for (const k of [key, other]) expect(r.stdout + r.stderr).to.not.contain(b64(k));
    expect(r.code, r.stderr).to.equal(2);
    expect(r.stderr).to.contain('VALIDATION_FAILED: invalid plan keyring file');
    expect(r.stderr).to.match(pattern);
    expect(r.stdout).to.equal('');
    expect(existsSync(fresh), 'the database was created').to.equal(false);
    return r;
  };

  it('R12.2 bad input: a short, long, missing or non-base64 key, an active key not given, a key both given and destroyed, an unknown field: exit 2 naming it, nothing written', async () => {
    await refused(keyFile(good({ k1: b64(randomBytes(16)) })), /keys\.k1: key "k1" is 16 byte\(s\); a plan key is exactly 32 bytes \(AES-256\)/);
    await refused(keyFile(good({ k1: b64(Buffer.concat([key, Buffer.from([1])])) })), /key "k1" is 33 byte\(s\)/);
    await refused(keyFile(JSON.stringify({ active: 'k1', keys: { k1: '' } })), /keys\.k1: key "k1" is not canonical base64/);
    await refused(keyFile(JSON.stringify({ active: 'k1', keys: {} })), /the active key "k1" is not among "keys"/);
    await refused(keyFile(JSON.stringify({ active: 'k1', keys: { k1: b64(key) }, destroyed: ['k1'] })), /destroyed\[0\]: .*key "k1" is both destroyed and in "keys"/);
    await refused(keyFile(JSON.stringify({ active: 'k1', keys: { k1: b64(key) }, current: 'k1' })), /unknown field\(s\) "current"/);
    // 64 hex digits read as base64 are 48 bytes: a key pasted as hex is refused by its length
    await refused(keyFile(good({ k1: key.toString('hex') })), /key "k1" is 48 byte\(s\); a plan key is exactly 32 bytes/);
  });

  it('R12.2 bad input: not strict JSON, a key id given twice, a file over 1 MiB, a missing file: exit 2 naming it, the text never quoted', async () => {
    await refused(keyFile(`{"active":"k1","keys":{"k1":"${b64(key)}"`), /is not JSON \(the parser's message is not shown/);
    await refused(keyFile(`{"active":"k1","keys":{"k1":"${b64(key)}","k1":"${b64(other)}"}}`), /keys\.k1: .*duplicate key "k1"/);
    await refused(keyFile(`{"active":"k1","keys":{"k1":"${'A'.repeat(1024 * 1024)}"}}`), /--plan-keyring: .* is larger than 1048576 bytes/);
    await refused(join(dir, 'no-such-plan-keys.json'), /QINGLONG_BARRIER_PLAN_KEYRING_FILE: cannot read .*no-such-plan-keys\.json: ENOENT/, {}, 'env');
  });

  it('R12.2 a plan key file group or others may read is refused naming its mode; QINGLONG_BARRIER_KEYRING_ALLOW_SHARED=1 uses it with a warning', async () => {
    const shared = keyFile(good(), 0o644);
    await refused(shared, /has mode 0644: group or others may read the key; make it readable by its owner alone \(chmod 600\)/);
    const allowed = await cli(['show', '--start-id', startId], shared, 'option', { QINGLONG_BARRIER_KEYRING_ALLOW_SHARED: '1' });
    expect(allowed.code, allowed.stderr).to.equal(0);
    expect(allowed.stderr).to.match(/^warning: \S+ has mode 0644/);
    expect((JSON.parse(allowed.stdout) as Shown).plan).to.deep.include({ verified: true });
  });
});
