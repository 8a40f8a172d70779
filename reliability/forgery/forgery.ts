import { tallyOf, tryForgeries, type ForgeryTally } from '../../testkit/forgery';
import { postgresForgeryTarget, sqliteForgeryTarget } from '../../testkit/forgeryTargets';
import { openKeyedForgeryTarget, tryKeyedForgeries } from '../../testkit/keyedForgery';
import { tryKeyingWindowForgeries } from '../../testkit/keyingWindow';
import type { BackendName } from '../../testkit/rawSql';
import { freshStore } from '../lib/stores';

// The forgery phase (R9.1, R9.2): every forgery of testkit/forgery.ts, with the runtime's own
// credentials (PostgreSQL: ql3_runtime; SQLite: a plain process opening the file), against a
// fresh store. Each is refused by the database or reported by `verify`; accepted must be 0.
// Then the keyed ones (R9.4, testkit/keyedForgery.ts) against a store with a deployment
// keyring: legal lifecycle and outcome events appended without the key, which every keyed
// read must refuse and `verify` report; they count in the same tally. Then the keying-window
// ones (R14.1, testkit/keyingWindow.ts), each on a store of its own that is keyed during the
// attack: an event made to read as written before the key, refused or detected.

export interface ForgeryReport extends ForgeryTally {
  readonly backend: BackendName;
  readonly ok: boolean;
  readonly failures: readonly string[];
}

export const runForgery = async (options: { readonly backend: BackendName; readonly log?: (line: string) => void }): Promise<ForgeryReport> => {
  const target = await freshStore(options.backend, 'forgery');
  const source = await freshStore(options.backend, 'forgery-source');
  const keyedStore = await freshStore(options.backend, 'forgery-keyed');
  try {
    const opened = options.backend === 'sqlite' ? await sqliteForgeryTarget(target.target, source.target) : await postgresForgeryTarget(target.target, source.target);
    const keyed = await openKeyedForgeryTarget(options.backend, keyedStore.target);
    try {
      const plain = await tryForgeries(opened.target);
      const withKey = await tryKeyedForgeries(keyed.target);
      const window = await tryKeyingWindowForgeries(options.backend, () => freshStore(options.backend, 'forgery-keying'));
      const tally = tallyOf([...plain.outcomes, ...withKey.outcomes, ...window.outcomes]);
      for (const o of tally.outcomes) options.log?.(`  ${options.backend}: ${o.outcome.padEnd(8)} ${o.name}`);
      const failures = tally.outcomes.filter((o) => o.outcome === 'accepted').map((o) => `${options.backend} forgery accepted: ${o.name}`);
      return { backend: options.backend, ...tally, ok: failures.length === 0, failures };
    } finally {
      await opened.close();
      await keyed.close();
    }
  } finally {
    await target.destroy();
    await source.destroy();
    await keyedStore.destroy();
  }
};
