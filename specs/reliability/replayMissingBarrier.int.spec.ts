import { expect } from 'chai';
import Database from 'better-sqlite3';
import { Client } from 'pg';
import { CorruptRecordError } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import type { StartBarrierAuthority } from '../../application/authority';
import { openPostgresStartBarrier } from '../../infrastructure/postgres';
import { openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { createDatabase } from '../../testkit/postgresHarness';
import { freshDbPath } from '../support/tmp';

// Found by the reliability corruption sweep (issue 7): when the replay index names a start whose
// barrier row is gone (its key damaged), an exact replay threw a raw Error. It now fails closed
// with CorruptRecordError, like every other damaged read (R5.3).

describe('R5.3 an exact replay whose barrier is missing fails closed, typed', function () {
  this.timeout(60_000);

  const check = async (authority: StartBarrierAuthority, damage: (startId: string) => Promise<void>): Promise<void> => {
    const s = buildScenario();
    for (const c of s.lifecycle) await authority.runs.handle(c);
    const command = s.startCommand();
    await authority.barriers.prepare(command);
    await damage(command.startId);
    const replay = await authority.barriers.prepare(command).then((v) => v, (e: unknown) => e);
    expect(replay).to.be.instanceOf(CorruptRecordError);
  };

  it('R5.3 SQLite', async () => {
    const path = freshDbPath('missing-barrier');
    const a = await openSqliteStartBarrier({ path });
    try {
      await check(a, async (startId) => {
        const raw = new Database(path);
        raw.exec('DROP TRIGGER tool_execution_start_barriers_no_update');
        raw.pragma('foreign_keys = OFF');
        raw.prepare('UPDATE tool_execution_start_barriers SET start_id = ? WHERE start_id = ?').run(`${startId}x`, startId);
        raw.close();
      });
    } finally {
      await a.close();
    }
  });

  it('R5.3 PostgreSQL', async () => {
    const db = await createDatabase();
    const a = await openPostgresStartBarrier({ connectionString: db.url });
    try {
      await check(a, async (startId) => {
        const raw = new Client({ connectionString: db.url });
        await raw.connect();
        await raw.query('BEGIN');
        await raw.query('SET LOCAL session_replication_role = replica');
        await raw.query('UPDATE ql3.tool_execution_start_barriers SET start_id = $1 WHERE start_id = $2', [`${startId}x`, startId]);
        await raw.query('COMMIT');
        await raw.end();
      });
    } finally {
      await a.close();
      await db.drop();
    }
  });
});
