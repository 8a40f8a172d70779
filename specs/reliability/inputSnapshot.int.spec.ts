import { expect } from 'chai';
import { ValidationError, decodeStartCommand, type ToolExecutionStartCommand } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import type { StartBarrierAuthority } from '../../application/authority';
import { openPostgresStartBarrier } from '../../infrastructure/postgres';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { createDatabase, type TestDatabase } from '../../testkit/postgresHarness';
import { freshDbPath } from '../support/tmp';
import { throwsError } from '../../testkit/rejects';

// Found by the reliability fuzz (issue 7): the decoders validated the caller's own object and
// kept using it. A getter could answer one value to validation and another to the digest, a
// throwing getter escaped as an untyped error, and a caller that changed its command while
// `prepare` waited for its transaction got a barrier with forbidden content acknowledged
// `created`, which then failed every read. Decoding now validates and keeps a private copy.

const command = (): ToolExecutionStartCommand => buildScenario({ prefix: 'snapshot' }).startCommand();

const rejected = (input: unknown): ValidationError => {
  const e = throwsError(() => decodeStartCommand(input));
  expect(e).to.be.instanceOf(ValidationError);
  return e as ValidationError;
};

describe('R1.5 decoding reads plain data once and keeps its own copy', () => {
  it('R1.5 a getter is refused before it runs: no forbidden value slips in after validation, no untyped throw', () => {
    let reads = 0;
    const sneaky = command() as unknown as { project: Record<string, unknown> };
    Object.defineProperty(sneaky.project, 'snapshotId', { enumerable: true, get: () => (++reads <= 3 ? 'snapshot-ok' : 'https://evil.example/x') });
    const e1 = rejected(sneaky);
    expect(e1.issues[0]).to.include({ path: 'project.snapshotId', reason: 'forbidden_value' });
    expect(reads).to.equal(0);

    const throwing = command() as unknown as { admission: Record<string, unknown> };
    Object.defineProperty(throwing.admission, 'profile', { enumerable: true, get: () => { throw new Error('boom'); } });
    expect(rejected(throwing).issues[0]).to.include({ path: 'admission.profile', reason: 'forbidden_value' });
  });

  it('R1.5 a proxy is refused (its traps could answer differently on each read)', () => {
    expect(rejected(new Proxy(command(), {})).issues[0]).to.include({ path: '(root)', reason: 'forbidden_value' });
    const inner = command() as unknown as Record<string, unknown>;
    inner.contracts = new Proxy(inner.contracts as object, {});
    expect(rejected(inner).issues[0]).to.include({ path: 'contracts', reason: 'forbidden_value' });
  });

  it('R1.5 the decoded command is a copy: changing the input afterwards changes nothing decoded', () => {
    const input = command();
    const decoded = decodeStartCommand(input);
    (input as { admission: { profile: string } }).admission.profile = 'www.evil.example';
    expect(decoded.command.admission.profile).to.equal('standard');
    expect(decoded.command).to.not.equal(input);
  });

  const backends: [string, () => Promise<{ authority: StartBarrierAuthority; cleanup: () => Promise<void> }>][] = [
    ['SQLite', async () => {
      const authority = await openSqliteStartBarrier({ path: freshDbPath('snapshot') });
      return { authority, cleanup: () => authority.close() };
    }],
    ['PostgreSQL', async () => {
      const db: TestDatabase = await createDatabase();
      const authority = await openPostgresStartBarrier({ connectionString: db.url });
      return { authority, cleanup: async () => { await authority.close(); await db.drop(); } };
    }],
  ];
  for (const [name, open] of backends) {
    it(`R1.5/R5.3 ${name}: a command changed while prepare waits commits what was validated, and reads back verified`, async function () {
      this.timeout(30_000);
      const { authority, cleanup } = await open();
      try {
        const s = buildScenario();
        for (const c of s.lifecycle) await authority.runs.handle(c);
        const input = s.startCommand() as unknown as { admission: { profile: string }; contracts: { adapter: { id: string } } };
        const pending = authority.barriers.prepare(input as never);
        input.admission.profile = 'www.evil.example';
        input.contracts.adapter.id = 'handler.js';
        const { outcome, barrier } = await pending;
        expect(outcome).to.equal('created');
        expect(barrier.record.admission.profile).to.equal('standard');
        expect(barrier.record.contracts.adapter.id).to.equal('adapter.process.v3');
        const back = await authority.barriers.getByStartId(barrier.record.startId);
        expect(back?.barrierDigest).to.equal(barrier.barrierDigest);
      } finally {
        await cleanup();
      }
    });
  }
});
