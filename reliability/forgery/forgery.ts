import { tryForgeries, type ForgeryTally } from '../../testkit/forgery';
import { postgresForgeryTarget, sqliteForgeryTarget } from '../../testkit/forgeryTargets';
import type { BackendName } from '../../testkit/rawSql';
import { freshStore } from '../lib/stores';

// The forgery phase (R9.1, R9.2): every forgery of testkit/forgery.ts, with the runtime's own
// credentials (PostgreSQL: ql3_runtime; SQLite: a plain process opening the file), against a
// fresh store. Each is refused by the database or reported by `verify`; accepted must be 0.

export interface ForgeryReport extends ForgeryTally {
  readonly backend: BackendName;
  readonly ok: boolean;
  readonly failures: readonly string[];
}

export const runForgery = async (options: { readonly backend: BackendName; readonly log?: (line: string) => void }): Promise<ForgeryReport> => {
  const target = await freshStore(options.backend, 'forgery');
  const source = await freshStore(options.backend, 'forgery-source');
  try {
    const opened = options.backend === 'sqlite' ? await sqliteForgeryTarget(target.target, source.target) : await postgresForgeryTarget(target.target, source.target);
    try {
      const tally = await tryForgeries(opened.target);
      for (const o of tally.outcomes) options.log?.(`  ${options.backend}: ${o.outcome.padEnd(8)} ${o.name}`);
      const failures = tally.outcomes.filter((o) => o.outcome === 'accepted').map((o) => `${options.backend} forgery accepted: ${o.name}`);
      return { backend: options.backend, ...tally, ok: failures.length === 0, failures };
    } finally {
      await opened.close();
    }
  } finally {
    await target.destroy();
    await source.destroy();
  }
};
