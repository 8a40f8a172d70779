import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { openSqliteRetention } from '../sqlite';
import { NoDatabaseError, lockTimeoutOf, targetOf, usage, type BackendOptions } from './backend';
import { keyringFromEnvironment } from './keyring';

// `compact --before DATE` (R14.2): the operator's retention path. On SQLite it opens the file
// with the retention gate (the runtime never does), compacts every finished Run whose last event
// is before DATE, one transaction per Run, then shrinks the file. docs/retention.md.

export const addCompactCommand = (program: Command): void => {
  program
    .command('compact')
    .description('retention (R14.2): compact every finished Run (StepRuns completed or failed, nothing in doubt, no live driver claim) last written before DATE into its record')
    .requiredOption('--before <date>', 'ISO 8601 date or time (2026-01-31, 2026-01-31T00:00:00Z): only Runs whose last event is older')
    .action(async (opts: { before: string }) => {
      const options = program.opts<BackendOptions>();
      const { db, postgres } = targetOf(options);
      if (postgres !== undefined) throw usage('compact runs on a SQLite file (--db PATH); PostgreSQL retention is not built yet');
      if (db === undefined) throw usage('which database? give --db PATH (SQLite)');
      if (!existsSync(db)) throw new NoDatabaseError(db);
      const lockMs = lockTimeoutOf(options.lockTimeout);
      const keys = keyringFromEnvironment();
      const retention = await openSqliteRetention({ path: db, ...(lockMs === undefined ? {} : { busyTimeoutMs: lockMs }), ...(keys === undefined ? {} : { evidenceKeys: keys }) });
      try {
        process.stdout.write(`${JSON.stringify(await retention.compact({ before: opts.before }), null, 2)}\n`);
      } finally {
        await retention.close();
      }
    });
};
