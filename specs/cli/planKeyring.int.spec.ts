import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { buildScenario } from '../../domain/scenario';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { json, runCli, type CliResult } from './cliSuite';
import { b64, planKeyringSuite, type Shown } from './planKeyringSuite';

// R12.2 on SQLite: the plan keyring suite, and the key file read as strictly as the evidence key
// file. A bad key file is VALIDATION_FAILED (exit 2) naming what is wrong, before any database
// is opened or created.

let db = '';
planKeyringSuite(
  'R12.2 the CLI plan keyring: show, inspect and in-doubt print the sealed plan\'s preview, never the plan or the key',
  'plan-keyring',
  {
    open: (dir, plans) => openSqliteStartBarrier({ path: (db = join(dir, 'barrier.db')), plans }),
    target: () => ['--db', db],
  },
  (suite) => {
    const { dir, key, other, keyFile, good, cli } = suite;
    const lifecycle = join(dir, 'create-run.json');
    writeFileSync(lifecycle, JSON.stringify(buildScenario().lifecycle[0]));
    let n = 0;

    it('R12.2 without a plan key the plan is shown as stored (verified: false); a start with no plan shows status absent', async () => {
      const shown = json<Shown>(await cli(['show', '--start-id', suite.startId]));
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
      const allowed = await cli(['show', '--start-id', suite.startId], shared, 'option', { QINGLONG_BARRIER_KEYRING_ALLOW_SHARED: '1' });
      expect(allowed.code, allowed.stderr).to.equal(0);
      expect(allowed.stderr).to.match(/^warning: \S+ has mode 0644/);
      expect((JSON.parse(allowed.stdout) as Shown).plan).to.deep.include({ verified: true });
    });
  },
);
