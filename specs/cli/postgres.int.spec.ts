import { Client } from 'pg';
import { MigratedTemplate } from '../../testkit/postgresHarness';
import { cliSuite } from './cliSuite';

describe('qinglong-barrier CLI on PostgreSQL', function () {
  this.timeout(120_000);
  const template = new MigratedTemplate();
  after(() => template.dropAll());
  cliSuite({
    name: 'PostgreSQL (--postgres, fresh database per test)',
    open: async () => {
      const db = await template.clone();
      return {
        args: ['--postgres', db.url],
        corruptBarrier: (startId) =>
          db.admin(async (c) => {
            await c.query('ALTER TABLE ql3.tool_execution_start_barriers DISABLE TRIGGER tool_execution_start_barriers_immutable');
            await c.query("UPDATE ql3.tool_execution_start_barriers SET adapter_id = 'adapter.tampered' WHERE start_id = $1", [startId]);
            // enabled again: the damage is the row, not a schema an open refuses
            await c.query('ALTER TABLE ql3.tool_execution_start_barriers ENABLE TRIGGER tool_execution_start_barriers_immutable');
          }),
        holdLock: async (runId) => {
          const c = new Client({ connectionString: db.url });
          await c.connect();
          await c.query('BEGIN');
          await c.query('SELECT 1 FROM ql3.runs WHERE run_id = $1 FOR UPDATE', [runId]);
          return {
            release: async () => {
              await c.query('ROLLBACK');
              await c.end();
            },
          };
        },
        close: () => db.drop(),
      };
    },
  });
});
