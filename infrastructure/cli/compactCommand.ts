import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { NoDatabaseError, backendModules, lockTimeoutOf, targetOf, usage, type BackendOptions } from './backend';
import { keyringFromEnvironment } from './keyring';

// `compact --before DATE` (R14.2): the operator's retention path. On SQLite it opens the file
// with the retention gate (the runtime never does), compacts every finished Run whose last event
// is before DATE, one transaction per Run, then shrinks the file. On PostgreSQL the login must be
// a member of ql3_retention (the one role that may run ql3.compact_run); each Run is compacted in
// its own transaction, then the emptied tables are vacuumed. docs/retention.md.

export const addCompactCommand = (program: Command): void => {
  program
    .command('compact')
    .description('retention (R14.2): compact every finished Run (StepRuns completed or failed, nothing in doubt, no live driver claim) last written before DATE into its record')
    .requiredOption('--before <date>', 'ISO 8601 date or time (2026-01-31, 2026-01-31T00:00:00Z): only Runs whose last event is older')
    .action(async (opts: { before: string }) => {
      const options = program.opts<BackendOptions>();
      const { db, postgres } = targetOf(options);
      if (postgres === undefined && db === undefined) throw usage('which database? give --db PATH (SQLite) or --postgres URL');
      if (db !== undefined && !existsSync(db)) throw new NoDatabaseError(db);
      const lockMs = lockTimeoutOf(options.lockTimeout);
      const keys = keyringFromEnvironment();
      const keyed = keys === undefined ? {} : { evidenceKeys: keys };
      const retention =
        postgres !== undefined
          ? await backendModules.pgRetention().openPostgresRetention({ connectionString: postgres, migrate: options.migrate ?? true, ...(lockMs === undefined ? {} : { timeouts: { lockMs } }), ...keyed })
          : await backendModules.sqlite().openSqliteRetention({ path: db!, ...(lockMs === undefined ? {} : { busyTimeoutMs: lockMs }), ...keyed });
      try {
        process.stdout.write(`${JSON.stringify(await retention.compact({ before: opts.before }), null, 2)}\n`);
      } finally {
        await retention.close();
      }
    });
};
