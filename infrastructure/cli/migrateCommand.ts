import type { Command } from 'commander';
import { migrateBackend, migrationSqlOf, type BackendOptions } from './backend';

// `migrate`: applies what the store lacks and lists it; `--print-sql` prints that SQL instead,
// for a DBA to review and run (PostgreSQL), and applies nothing.

export const addMigrateCommand = (program: Command): void => {
  program
    .command('migrate')
    .description('create or upgrade the store to this version: the only command besides apply and prepare that changes its schema')
    .option('--print-sql', 'PostgreSQL: print the SQL this database lacks (all of it for an empty one), for a DBA to review and run; apply nothing')
    .action(async (opts: { printSql?: boolean }) => {
      const options = program.opts<BackendOptions>();
      if (opts.printSql === true) process.stdout.write(await migrationSqlOf(options));
      else process.stdout.write(`${JSON.stringify({ applied: await migrateBackend(options) }, null, 2)}\n`);
    });
};
