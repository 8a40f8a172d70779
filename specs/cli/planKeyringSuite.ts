import { randomBytes } from 'node:crypto';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { attemptIdsOf } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import type { PlanStoreOptions } from '../../application/invocationPlans';
import { createToolStepSaga, openExecution } from '../../application/saga';
import { readyToolCall } from '../../testkit/adapters/toolCall';
import { contractAdapterFor } from '../saga/sagaConformance';
import { freshDir } from '../support/tmp';
import { buildOnce, json, runCli, type CliResult } from './cliSuite';

// R12.2: the CLI reads a plan keyring (`--plan-keyring FILE`, QINGLONG_BARRIER_PLAN_KEYRING_FILE)
// on every backend alike. `show`, `inspect` and `in-doubt` print a sealed plan's status and
// redacted preview, never its input; with the key they open it to prove it is the one the
// barrier binds; a plan that does not open under the key given fails closed (exit 5). No output
// or error ever shows a key.

export interface Shown {
  plan: { status: string; preview?: { shown: Record<string, unknown> }; verified?: boolean };
}

/** A backend the CLI runs on: the store a spec seals its plan in, and the CLI's arguments naming it. */
export interface PlanKeyringBackend {
  /** Opens (making it if need be) the store in `dir`, with the plan keyring given. */
  open(dir: string, plans: PlanStoreOptions): Promise<RecoverableStartBarrierAuthority & { close(): Promise<void> }>;
  /** The CLI's arguments naming that store. */
  target(): readonly string[];
  /** Drops the store after the suite, if it must. */
  drop?(): Promise<void>;
}

/** What a backend's own specs use of the suite. */
export interface PlanKeyringSuite {
  readonly dir: string;
  readonly key: Buffer;
  readonly other: Buffer;
  /** The start committed with its plan sealed (by the suite's before hook). */
  readonly startId: string;
  keyFile(text: string | Buffer, mode?: number): string;
  /** A keyring file's text: the first key active. */
  good(keys?: Record<string, string>, extra?: Record<string, unknown>): string;
  /** The CLI on the backend with the file given by option (or by the environment), checked to show no key and no plan input. */
  cli(args: readonly string[], file?: string, by?: 'option' | 'env', env?: NodeJS.ProcessEnv): Promise<CliResult>;
}

export const b64 = (b: Buffer): string => b.toString('base64');
const SECRET_INPUT = 'plan-input-secret-3f9a';

/** The suite every backend runs; `more` adds a backend's own specs inside the same block. */
export const planKeyringSuite = (title: string, dirName: string, backend: PlanKeyringBackend, more: (suite: PlanKeyringSuite) => void = () => undefined): void => {
  describe(title, function () {
    this.timeout(180_000);
    const dir = freshDir(dirName);
    const key = randomBytes(32);
    const other = randomBytes(32);
    const registry = join(dir, 'adapters.json');
    writeFileSync(registry, '{}');
    let startId: string | undefined;
    let n = 0;

    const suite: PlanKeyringSuite = {
      dir,
      key,
      other,
      get startId() {
        if (startId === undefined) throw new Error('the sealed start is made in the before hook');
        return startId;
      },
      keyFile: (text, mode = 0o600) => {
        const path = join(dir, `plan-keys-${++n}.json`);
        writeFileSync(path, text, { mode });
        chmodSync(path, mode);
        return path;
      },
      good: (keys = { k1: b64(key) }, extra = {}) => JSON.stringify({ active: Object.keys(keys)[0], keys, ...extra }),
      cli: async (args, file, by = 'option', env = {}) => {
        const given = file === undefined ? [] : by === 'option' ? ['--plan-keyring', file] : [];
        const r = await runCli([...args, ...backend.target(), ...given], undefined, { ...(file !== undefined && by === 'env' ? { QINGLONG_BARRIER_PLAN_KEYRING_FILE: file } : {}), ...env });
        for (const text of [r.stdout, r.stderr]) {
          for (const k of [key, other]) {
            expect(text).to.not.contain(b64(k));
            expect(text).to.not.contain(k.toString('hex'));
          }
          expect(text).to.not.contain(SECRET_INPUT);
        }
        return r;
      },
    };
    const { cli, keyFile, good } = suite;

    before(async () => {
      buildOnce();
      // A start committed with its plan sealed; the saga dies before any claim or adapter.
      const authority = await backend.open(dir, { keyring: { current: 'k1', keys: { k1: key } } });
      const execution = openExecution(authority, { execution: 'enabled' });
      try {
        const call = await readyToolCall(authority, 'process', { query: 'orders of today', token: SECRET_INPUT }, 30_000);
        const crash = new Error('killed after the plan was sealed');
        const saga = createToolStepSaga({ execution, adapter: contractAdapterFor(call.plan), redaction: { fields: ['query'] }, hooks: { afterSeal: () => Promise.reject(crash) } });
        expect(await saga.drive(call.trigger, call.plan, call.invocation).catch((e: unknown) => e)).to.equal(crash);
        startId = attemptIdsOf(call.scenario.runId, call.scenario.stepRunId, call.trigger.stepRunVersion + 1).startId;
      } finally {
        await execution.close();
        await authority.close();
      }
    });
    after(async () => backend.drop?.());

    it('R12.2 with the plan key (option or environment), show, inspect and in-doubt open the sealed plan and print its redacted preview (verified), never its input; verify opens every plan', async () => {
      const file = keyFile(good());
      for (const by of ['option', 'env'] as const) {
        const shown = json<Shown>(await cli(['show', '--start-id', suite.startId], file, by));
        expect(shown.plan).to.deep.include({ status: 'sealed', verified: true });
        expect(shown.plan.preview!.shown).to.deep.equal({ query: 'orders of today' });
        const inspected = json<Shown>(await cli(['inspect', suite.startId, '--adapters', registry], file, by));
        expect(inspected.plan).to.deep.equal(shown.plan);
        const listed = json<(Shown & { startId: string })[]>(await cli(['in-doubt'], file, by));
        expect(listed.map((d) => [d.startId, d.plan])).to.deep.equal([[suite.startId, shown.plan]]);
      }
      const report = json<{ ok: boolean; plans: unknown }>(await cli(['verify', '--progress', 'none'], file));
      expect(report).to.deep.include({ ok: true, plans: { sealed: 1, shredded: 0 } });
    });

    it('R12.2 a destroyed key makes its plans read as shredded while verify stays green; a plan that does not open under the key given fails closed (CORRUPT_RECORD, exit 5), naming the key id, never a key', async () => {
      const destroyed = keyFile(good({ k2: b64(other) }, { destroyed: ['k1'] }));
      expect(json<Shown>(await cli(['show', '--start-id', suite.startId], destroyed)).plan).to.deep.include({ status: 'shredded' });
      expect(json<{ ok: boolean; plans: unknown }>(await cli(['verify', '--progress', 'none'], destroyed))).to.deep.include({ ok: true, plans: { sealed: 0, shredded: 1 } });
      const wrong = await cli(['show', '--start-id', suite.startId], keyFile(good({ k1: b64(other) })));
      expect(wrong.code, wrong.stderr).to.equal(5);
      expect(wrong.stderr).to.match(/CORRUPT_RECORD: .*invocation plan/);
      const absentKey = await cli(['show', '--start-id', suite.startId], keyFile(good({ k2: b64(other) })));
      expect(absentKey.code, absentKey.stderr).to.equal(5);
      expect(absentKey.stderr).to.contain('sealed under key id k1, which the keyring does not hold');
    });

    more(suite);
  });
};
