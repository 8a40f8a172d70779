import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { CorruptRecordError } from '../../domain';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { buildOnce, runCli } from '../cli/cliSuite';
import { keyedEvidenceSuite, type KeyedBackend } from '../conformance/keyedEvidenceConformance';
import { keyedLifecycleSuite } from '../conformance/keyedLifecycleConformance';
import { setUp } from '../conformance/startBarrierConformance';
import { freshDbPath, freshDir } from '../support/tmp';

const backend: KeyedBackend = {
  name: 'SQLite',
  create: async () => {
    const path = freshDbPath('keyed');
    return {
      open: (keys) => openSqliteStartBarrier({ path, ...(keys === undefined ? {} : { evidenceKeys: keys }) }),
      dump: async () => {
        const db = new Database(path, { readonly: true });
        try {
          const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[];
          return JSON.stringify(tables.map(({ name }) => db.prepare(`SELECT * FROM "${name.replace(/"/g, '""')}"`).all()), (_, v: unknown) => (Buffer.isBuffer(v) ? v.toString('hex') : v));
        } finally {
          db.close();
        }
      },
      removeSealOrigins: async () => {
        const db = new Database(path);
        try {
          const rows = db.prepare('SELECT * FROM run_event_seal_origins').all() as Record<string, unknown>[];
          const guard = db.prepare("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'run_event_seal_origins_no_delete'").pluck().get() as string;
          db.exec('DROP TRIGGER run_event_seal_origins_no_delete; DELETE FROM run_event_seal_origins');
          db.exec(guard);
          return {
            undo: async () => {
              const back = new Database(path);
              try {
                for (const r of rows) back.prepare('INSERT INTO run_event_seal_origins (key_id, from_global_position, from_ms, legacy_gaps, mac) VALUES (@key_id, @from_global_position, @from_ms, @legacy_gaps, @mac)').run(r);
              } finally {
                back.close();
              }
            },
          };
        } finally {
          db.close();
        }
      },
      close: async () => undefined,
    };
  },
};
keyedEvidenceSuite(backend);
keyedLifecycleSuite(backend);

describe('keyed evidence in the emmett EventStore on SQLite (R9.4)', () => {
  it('R9.4 appendToStream seals what it appends; readStream and aggregateStream refuse an event appended without the key', async () => {
    const path = freshDbPath('keyed-event-store');
    const keys = { active: { id: 'k1', secret: Buffer.alloc(32, 0x4b) } };
    const keyed = await openSqliteStartBarrier({ path, evidenceKeys: keys });
    const forger = await openSqliteStartBarrier({ path });
    try {
      const s = await setUp(keyed);
      const stream = `run-${s.runId}`;
      const r = await keyed.barriers.prepare(s.startCommand());
      const startId = r.barrier.record.startId;
      const lost = { type: 'StepRunLost', data: { runId: s.runId, stepRunId: s.stepRunId, startId, stepRunVersion: 4, resolution: { decidedBy: 'orchestrator', reason: 'lease_expired' }, occurredAtMs: 12 } };
      const version = BigInt((await keyed.runs.readStream(s.runId)).length);
      await keyed.eventStore.appendToStream(stream, [lost], { expectedStreamVersion: version });
      expect((await keyed.eventStore.readStream(stream)).events).to.have.length(Number(version) + 1);
      expect((await keyed.recovery.verify()).problems).to.deep.equal([]);
      const ready = { type: 'StepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, stepRunVersion: 5, occurredAtMs: 13 } };
      await forger.eventStore.appendToStream(stream, [ready], { expectedStreamVersion: version + 1n });
      const refused = await keyed.eventStore.readStream(stream).then(() => undefined, (e: unknown) => e);
      expect(refused).to.be.instanceOf(CorruptRecordError);
      const folded = await keyed.eventStore.aggregateStream(stream, { evolve: (n: number) => n + 1, initialState: () => 0 }).then(() => undefined, (e: unknown) => e);
      expect(folded).to.be.instanceOf(CorruptRecordError);
      expect((await forger.eventStore.readStream(stream)).events).to.have.length(Number(version) + 2); // no keyring: today's behaviour
    } finally {
      await keyed.close();
      await forger.close();
    }
  });
});

describe('R9.4 the seal tables on SQLite are append-only', () => {
  it('R9.4 UPDATE and DELETE of run_event_macs and run_event_seal_origins are refused by their triggers', async () => {
    const path = freshDbPath('keyed-append-only');
    const keyed = await openSqliteStartBarrier({ path, evidenceKeys: { active: { id: 'k1', secret: Buffer.alloc(32, 0x21) } } });
    const s = await setUp(keyed);
    await keyed.barriers.prepare(s.startCommand());
    await keyed.close();
    const db = new Database(path);
    try {
      for (const table of ['run_event_macs', 'run_event_seal_origins']) {
        expect((db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n, table).to.be.greaterThan(0);
        expect(() => db.exec(`UPDATE ${table} SET key_id = 'k2'`), table).to.throw('event seals are immutable');
        expect(() => db.exec(`DELETE FROM ${table}`), table).to.throw('event seals are immutable');
      }
    } finally {
      db.close();
    }
  });
});

describe('keyed evidence in the CLI (R9.4): the keyring comes from a key file named by QINGLONG_BARRIER_KEYRING_FILE', function () {
  this.timeout(120_000);
  const secret = Buffer.alloc(32, 0x4b);
  const dir = freshDir('cli-keys');
  const keyFile = join(dir, 'keys.json');
  writeFileSync(keyFile, JSON.stringify({ active: 'k1', keys: { k1: secret.toString('base64') } }), { mode: 0o600 });
  const env = { QINGLONG_BARRIER_KEYRING_FILE: keyFile };

  it('R9.4 a start minted without the key: show and verify exit 5 with the key file, 0 without it; no key bytes on stdout or stderr', async () => {
    buildOnce();
    const path = join(dir, 'barrier.db');
    const unkeyed = await openSqliteStartBarrier({ path });
    const s = await setUp(unkeyed);
    const minted = s.startCommand();
    await unkeyed.barriers.prepare(minted);
    await unkeyed.close();
    const keyed = await openSqliteStartBarrier({ path, evidenceKeys: { active: { id: 'k1', secret } } });
    const t = await setUp(keyed);
    const sealed = t.startCommand();
    await keyed.barriers.prepare(sealed);
    await keyed.close();

    const outputs: string[] = [];
    const cli = async (args: string[], withKeys: boolean) => {
      const r = await runCli([...args, '--db', path], undefined, withKeys ? env : {});
      outputs.push(r.stdout, r.stderr);
      return r.code;
    };
    expect(await cli(['show', '--start-id', minted.startId], true)).to.equal(5);
    expect(await cli(['verify'], true)).to.equal(5);
    expect(await cli(['show', '--start-id', sealed.startId], true)).to.equal(0);
    expect(await cli(['show', '--start-id', minted.startId], false)).to.equal(0);
    for (const encoded of [secret.toString('base64'), secret.toString('hex'), secret.toString('latin1')]) {
      expect(outputs.some((o) => o.includes(encoded))).to.equal(false);
    }
  });

  it('R9.4 a StepRunCompleted appended without the key: show, history and verify exit 5 with the key file (verify names the stream position), 0 without it', async () => {
    buildOnce();
    const path = join(dir, 'lifecycle.db');
    const keyed = await openSqliteStartBarrier({ path, evidenceKeys: { active: { id: 'k1', secret } } });
    const t = await setUp(keyed);
    const command = t.startCommand();
    await keyed.barriers.prepare(command);
    await keyed.close();
    const forger = await openSqliteStartBarrier({ path });
    await forger.runs.handle({ type: 'CompleteStepRun', data: { runId: t.runId, stepRunId: t.stepRunId, decidedBy: 'orchestrator', reason: 'tool_succeeded', requestedAtMs: 2 } });
    await forger.close();
    const cli = (args: string[], withKeys: boolean) => runCli([...args, '--db', path], undefined, withKeys ? env : {});
    expect((await cli(['show', '--start-id', command.startId], true)).code).to.equal(5);
    expect((await cli(['history', t.runId, t.stepRunId], true)).code).to.equal(5);
    const verify = await cli(['verify'], true);
    expect(verify.code).to.equal(5);
    expect(verify.stdout + verify.stderr).to.contain(`run-${t.runId}@${t.lifecycle.length + 6}`);
    expect((await cli(['show', '--start-id', command.startId], false)).code).to.equal(0);
    expect((await cli(['verify'], false)).code).to.equal(0);
  });

  it('R9.4 a malformed key file is refused without quoting it', async () => {
    buildOnce();
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, `{"active":"k1","keys":{"k1":"${secret.toString('hex')}!"}}`, { mode: 0o600 });
    const r = await runCli(['verify', '--db', join(dir, 'barrier.db')], undefined, { QINGLONG_BARRIER_KEYRING_FILE: broken });
    expect(r.code).to.equal(2);
    expect(r.stderr).to.contain('key "k1" is not canonical base64');
    expect(r.stderr).to.not.contain(secret.toString('hex'));
  });
});
