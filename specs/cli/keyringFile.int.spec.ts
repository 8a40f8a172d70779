import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { buildScenario } from '../../domain/scenario';
import { freshDir } from '../support/tmp';
import { buildOnce, runCli, type CliResult } from './cliSuite';

// R14.1: the keyring file is read as strictly as any CLI input. Each bad file is a typed error
// (VALIDATION_FAILED, exit 2) naming what is wrong, before any database is opened or created,
// and never quoting a key. The command used is `apply` on a database that does not exist yet:
// a refusal leaves it uncreated.

describe('R14.1 the keyring file (QINGLONG_BARRIER_KEYRING_FILE) is read as strictly as any CLI input', function () {
  this.timeout(120_000);
  const dir = freshDir('keyring-file');
  const secret = Buffer.alloc(32, 0x5a);
  const lifecycle = join(dir, 'create-run.json');
  writeFileSync(lifecycle, JSON.stringify(buildScenario().lifecycle[0]));
  let n = 0;

  const keyFile = (text: string | Buffer, mode = 0o600): string => {
    const path = join(dir, `keys-${++n}.json`);
    writeFileSync(path, text, { mode });
    chmodSync(path, mode); // the umask does not decide what the spec means
    return path;
  };
  const good = (keys: Record<string, string> = { k1: secret.toString('base64') }) => JSON.stringify({ active: 'k1', keys });

  /** `apply` on a fresh database path with the key file: the result, and whether the database was made. */
  const apply = async (file: string, env: NodeJS.ProcessEnv = {}): Promise<CliResult & { created: boolean }> => {
    const db = join(dir, `barrier-${++n}.db`);
    const r = await runCli(['apply', '--command', lifecycle, '--db', db], undefined, { QINGLONG_BARRIER_KEYRING_FILE: file, ...env });
    for (const text of [r.stdout, r.stderr]) {
      expect(text).to.not.contain(secret.toString('base64'));
      expect(text).to.not.contain(secret.toString('hex'));
    }
    return { ...r, created: existsSync(db) };
  };
  const refused = async (file: string, pattern: RegExp, env: NodeJS.ProcessEnv = {}) => {
    const r = await apply(file, env);
    expect(r.code, r.stderr).to.equal(2);
    expect(r.stderr).to.match(/invalid keyring file/);
    expect(r.stderr).to.match(pattern);
    expect(r.stdout).to.equal('');
    expect(r.created, 'the database was created').to.equal(false);
    return r;
  };

  before(() => buildOnce());

  it('R14.1 a well-formed file readable by its owner alone is used: apply exits 0 and the database is made', async () => {
    const r = await apply(keyFile(good()));
    expect(r.code, r.stderr).to.equal(0);
    expect(r.created).to.equal(true);
    expect(r.stderr).to.equal('');
  });

  it('R14.1 a key shorter than 32 bytes is refused with exit 2 (not 1), naming the key id and its length', async () => {
    await refused(keyFile(good({ k1: Buffer.alloc(1, 7).toString('base64') })), /keys\.k1: key "k1" is 1 byte\(s\); a key must be at least 32 bytes/);
    await refused(keyFile(good({ k1: secret.toString('base64'), old: Buffer.alloc(31, 7).toString('base64') })), /key "old" is 31 byte\(s\)/);
  });

  it('R14.1 a key id given twice is refused (strict JSON: never last-wins), naming it', async () => {
    const b64 = secret.toString('base64');
    const other = Buffer.alloc(32, 0x11).toString('base64');
    await refused(keyFile(`{"active":"k1","keys":{"k1":"${b64}","k1":"${other}"}}`), /keys\.k1: .*duplicate key "k1"/);
    await refused(keyFile(`{"active":"k1","active":"k2","keys":{"k1":"${b64}","k2":"${other}"}}`), /duplicate key "active"/);
  });

  it('R14.1 not strict JSON, not UTF-8, a BOM, non-canonical base64 or an unknown field: refused, the text never quoted', async () => {
    await refused(keyFile(`{"active":"k1","keys":{"k1":"${secret.toString('base64')}"`), /is not JSON \(the parser's message is not shown/);
    await refused(keyFile(Buffer.concat([Buffer.from('{"active":"k1","keys":{"k1":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}}')])), /not valid UTF-8/);
    await refused(keyFile(`\ufeff${good()}`), /byte order mark/);
    await refused(keyFile(good({ k1: ` ${secret.toString('base64')}` })), /key "k1" is not canonical base64/);
    await refused(keyFile(good({ k1: secret.toString('base64').replace(/=+$/, '') })), /key "k1" is not canonical base64/);
    await refused(keyFile(JSON.stringify({ active: 'k1', keys: { k1: secret.toString('base64') }, comment: 'x' })), /unknown field\(s\) "comment"/);
    await refused(keyFile(good({ 'k 1': secret.toString('base64') })), /key id "k 1" must be 1\.\.64 letters/);
  });

  it('R14.1 the read is bounded: a file over 1 MiB, and /dev/zero (which never ends), are refused after the first mebibyte', async () => {
    await refused(keyFile(`{"active":"k1","keys":{"k1":"${'A'.repeat(1024 * 1024)}"}}`), /larger than 1048576 bytes/);
    // /dev/zero is world-readable: let that through, so the bound is what refuses it
    const zero = await refused('/dev/zero', /\/dev\/zero is larger than 1048576 bytes/, { QINGLONG_BARRIER_KEYRING_ALLOW_SHARED: '1' });
    expect(zero.stderr).to.match(/warning: \/dev\/zero has mode 0666/);
    await refused('/dev/zero', /\/dev\/zero has mode 0666: group or others may read the key/);
  });

  it('R14.1 a file group or others may read or write is refused, naming its mode; QINGLONG_BARRIER_KEYRING_ALLOW_SHARED=1 uses it with a warning', async () => {
    const shared = keyFile(good(), 0o644);
    const r = await refused(shared, /has mode 0644: group or others may read the key; make it readable by its owner alone \(chmod 600\), or set QINGLONG_BARRIER_KEYRING_ALLOW_SHARED=1/);
    expect(r.stderr).to.contain(shared);
    await refused(keyFile(good(), 0o640), /has mode 0640/);
    await refused(keyFile(good(), 0o620), /has mode 0620: group or others may write the key/);
    const allowed = await apply(shared, { QINGLONG_BARRIER_KEYRING_ALLOW_SHARED: '1' });
    expect(allowed.code, allowed.stderr).to.equal(0);
    expect(allowed.created).to.equal(true);
    expect(allowed.stderr).to.match(/^warning: \S+ has mode 0644: group or others may read the key \(QINGLONG_BARRIER_KEYRING_ALLOW_SHARED=1 lets it be used\)\n$/);
    await refused(shared, /QINGLONG_BARRIER_KEYRING_ALLOW_SHARED: must be 1 or 0, not "yes"/, { QINGLONG_BARRIER_KEYRING_ALLOW_SHARED: 'yes' });
  });

  it('R14.1 a missing file is refused with exit 2 naming the variable and the file', async () => {
    await refused(join(dir, 'no-such-keys.json'), /QINGLONG_BARRIER_KEYRING_FILE: cannot read .*no-such-keys\.json: ENOENT/);
  });
});
