import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { createToolStepSaga, openExecution, recover, runTool, type ExecutionAuthority, type RecoverOptions, type RunToolCall, type Tool } from '../../application/saga';
import { isStartBarrierError, outputDigestOf, type ToolAdapter } from '../../domain';
import { readyToolCall } from '../../testkit/adapters/toolCall';
import { PLAN_KEY_K1 } from '../../testkit/planKeys';
import { buildOnce, json, runCli } from '../cli/cliSuite';
import { contractAdapterFor } from '../saga/sagaConformance';
import { freshDir } from '../support/tmp';

// R12.2 on a real store: runTool's `redaction: { fields }` is the allowlist of input fields the
// sealed plan's preview shows, exactly as createToolStepSaga's option is. The command's redaction
// contract follows it (id and digest), so another allowlist under the same call id is another
// command. A secret field of the input is shown nowhere: not in the preview, not by the CLI's
// show or inspect, not on the process's output streams or warnings, not in an error.

const SECRET = 'tok-live-8d41c9e0-never-shown';
const INPUT = { day: '2026-12-07', customer: { region: 'eu-west', tier: 'gold' }, apiToken: SECRET };
const REF = { id: 'adapter.export.redacted.v1', digest: `sha256:${'e'.repeat(64)}` };

export interface RedactionBackend {
  readonly name: string;
  open(): Promise<{ authority: RecoverableStartBarrierAuthority; cli: readonly string[]; close(): Promise<void> }>;
}

/** A tool that counts its side effects, never echoes its input, and can lose its first answer before it acts. */
const exportTool = (options: { failFirst?: boolean } = {}) => {
  const acted = new Map<string, number>();
  let fail = options.failFirst === true;
  const adapter: ToolAdapter = {
    declaration: { kind: 'worker', ref: REF, guarantees: { idempotentStart: false, enforcesTimeout: true } },
    async start(ticket, plan) {
      if (fail) {
        fail = false;
        throw new Error('connection reset before the tool acted');
      }
      acted.set(ticket.startId, (acted.get(ticket.startId) ?? 0) + 1);
      expect((plan.input as typeof INPUT).apiToken, 'the tool itself gets the whole input').to.equal(SECRET);
      return { outcome: 'completed', code: 'tool_succeeded', ...outputDigestOf('exported') };
    },
    async inspect(ticket) {
      return acted.has(ticket.startId) ? { state: 'succeeded' } : { state: 'not_started' };
    },
  };
  const tool: Tool = { name: 'orders.export', adapter, timeoutMs: 1000 };
  return { tool, effects: () => [...acted.values()].reduce((a, b) => a + b, 0) };
};

/** Everything the process writes to stdout or stderr, and every warning it emits, while `body` runs. */
const logged = async <T>(body: () => Promise<T>): Promise<{ value: T; text: string }> => {
  const lines: string[] = [];
  const writes = { out: process.stdout.write, err: process.stderr.write };
  const tap = (chunk: unknown): boolean => (lines.push(String(chunk)), true);
  const onWarning = (w: Error) => void lines.push(`${w.name}: ${w.message}`);
  process.stdout.write = tap as typeof process.stdout.write;
  process.stderr.write = tap as typeof process.stderr.write;
  process.on('warning', onWarning);
  try {
    const value = await body();
    await new Promise((r) => setImmediate(r)); // a warning is emitted on the next tick
    return { value, text: lines.join('') };
  } finally {
    process.stdout.write = writes.out;
    process.stderr.write = writes.err;
    process.off('warning', onWarning);
  }
};

const refusal = async (p: Promise<unknown>): Promise<{ code: string; record?: string; issues?: { path: string; reason: string; message: string }[]; fields?: string[]; message: string }> => {
  const e = await p.then(
    () => expect.fail('not refused'),
    (error: unknown) => error,
  );
  if (!isStartBarrierError(e)) throw e;
  expect(`${e.message} ${JSON.stringify(e)} ${e.stack}`, 'an error never shows the secret').to.not.contain(SECRET);
  return e as never;
};

export const runToolRedactionConformance = (backend: RedactionBackend): void => {
  describe(`R12.2 runTool's redaction allowlist: the preview shows the fields named, the rest stays sealed (${backend.name})`, function () {
    this.timeout(180_000);
    const dir = freshDir('run-tool-redaction');
    const registry = join(dir, 'adapters.json');
    const keyring = join(dir, 'plan-keys.json');
    writeFileSync(registry, '{}');
    writeFileSync(keyring, JSON.stringify({ active: 'k1', keys: { k1: PLAN_KEY_K1.toString('base64') } }), { mode: 0o600 });
    chmodSync(keyring, 0o600);
    let env: Awaited<ReturnType<RedactionBackend['open']>>;
    let execution: ExecutionAuthority;
    before(() => buildOnce());
    beforeEach(async () => {
      env = await backend.open();
      execution = openExecution(env.authority, { execution: 'enabled' });
    });
    afterEach(async () => {
      await execution.close();
      await env.close();
    });

    const call = (tool: Tool, runId: string): RunToolCall => ({ runId, callId: 'call-1', tool, input: INPUT });
    const previewOf = async (startId: string) => {
      const status = await env.authority.plans.status(startId);
      expect(status.status).to.equal('sealed');
      return status.status === 'absent' ? expect.fail('no plan') : status.preview;
    };
    /** The CLI as an operator runs it, with the plan key: show and inspect print the same preview, never the secret. */
    const cliPlan = async (startId: string): Promise<unknown> => {
      const show = await runCli(['show', '--start-id', startId, ...env.cli, '--plan-keyring', keyring]);
      const inspect = await runCli(['inspect', startId, '--adapters', registry, ...env.cli, '--plan-keyring', keyring]);
      for (const r of [show, inspect]) expect(r.stdout + r.stderr, 'the CLI never shows the secret').to.not.contain(SECRET);
      const shown = json<{ plan: unknown }>(show).plan;
      expect(json<{ plan: unknown }>(inspect).plan).to.deep.equal(shown);
      return shown;
    };

    it('R12.2 given redaction { fields: [day, customer.region] } and an input holding a token, when runTool runs the call, then the preview shows exactly those fields under redaction.allowlist.v1, and the token appears in no preview, CLI show or inspect, log line or warning', async () => {
      const { tool, effects } = exportTool();
      const { value: result, text } = await logged(() => runTool(execution, call(tool, 'run-shown'), { redaction: { fields: ['day', 'customer.region'] } }));
      expect(result).to.include({ status: 'completed', invoked: true });
      expect(effects()).to.equal(1);
      const barrier = (await env.authority.barriers.getByStartId(result.startId))!;
      const preview = await previewOf(result.startId);
      expect(preview.shown).to.deep.equal({ day: '2026-12-07', 'customer.region': 'eu-west' });
      expect(preview.redaction).to.deep.equal(barrier.record.contracts.redaction);
      expect(preview.redaction.id).to.equal('redaction.allowlist.v1');
      expect(JSON.stringify(preview)).to.not.contain(SECRET).and.not.contain('gold');
      expect(await cliPlan(result.startId)).to.deep.equal({ status: 'sealed', preview, verified: true });
      expect(text, 'nothing the process wrote or warned shows the secret').to.not.contain(SECRET);
      expect(JSON.stringify(result)).to.not.contain(SECRET);
      // without the option the contract is redaction.none.v1 and the preview shows no field
      const plain = await runTool(execution, call(tool, 'run-none'));
      expect(await previewOf(plain.startId)).to.deep.include({ shown: {}, redaction: (await env.authority.barriers.getByStartId(plain.startId))!.record.contracts.redaction });
      expect((await previewOf(plain.startId)).redaction.id).to.equal('redaction.none.v1');
    });

    it('R12.2 given a call sealed with an allowlist whose tool never acted, when recover() re-drives it (even handed a redaction option), then the tool acts once and the preview is the one sealed with the start', async () => {
      const { tool, effects } = exportTool({ failFirst: true });
      const first = await runTool(execution, call(tool, 'run-recover'), { redaction: { fields: ['day'] } });
      expect(first).to.include({ status: 'in_doubt', why: 'start_unknown' });
      const sealed = await previewOf(first.startId);
      expect(sealed.shown).to.deep.equal({ day: '2026-12-07' });
      // a runtime that shares one options object between runTool and recover: recover seals nothing
      const shared = { runId: 'run-recover', tools: [tool], redaction: { fields: ['apiToken'] } } as RecoverOptions;
      const { value: report, text } = await logged(() => recover(execution, shared));
      expect(report).to.include({ settled: 1, inDoubt: 0 });
      expect(report.starts[0]).to.include({ status: 'completed', invoked: true, startId: first.startId });
      expect(effects()).to.equal(1);
      expect(await previewOf(first.startId)).to.deep.equal(sealed);
      expect(await cliPlan(first.startId)).to.deep.equal({ status: 'sealed', preview: sealed, verified: true });
      expect(text + JSON.stringify(report)).to.not.contain(SECRET);
    });

    it('R12.2 given a bad allowlist (a field the input lacks, not an array, a name twice, not a path, an unknown key), when runTool is called, then a typed VALIDATION_FAILED names the path, the error shows no secret, and nothing is written', async () => {
      const { tool, effects } = exportTool();
      const refused = async (redaction: unknown) => refusal(runTool(execution, call(tool, 'run-bad'), { redaction: redaction as never }));
      // a field the input does not hold: the saga's own error, word for word
      const unknown = await refused({ fields: ['day', 'customer.email'] });
      const ready = await readyToolCall(env.authority, 'process', INPUT, 30_000);
      const saga = createToolStepSaga({ execution, adapter: contractAdapterFor(ready.plan), redaction: { fields: ['day', 'customer.email'] } });
      const bySaga = await refusal(saga.drive(ready.trigger, ready.plan, ready.invocation));
      expect(unknown).to.deep.include({ code: 'VALIDATION_FAILED', record: bySaga.record, issues: bySaga.issues, message: bySaga.message });
      expect(unknown.issues).to.deep.equal([{ path: 'redaction.fields[1]', reason: 'invalid_value', message: 'names "customer.email", which is not a field of the tool input' }]);
      // a path through the secret's value is no field either, and the error does not show it
      expect((await refused({ fields: ['apiToken.length'] })).issues?.[0]?.path).to.equal('redaction.fields[0]');
      const cases: [unknown, string, string][] = [
        [{ fields: 'day' }, 'redaction.fields', 'invalid_value'],
        [{ fields: null }, 'redaction.fields', 'invalid_value'],
        [{}, 'redaction.fields', 'invalid_value'],
        [['day'], 'redaction', 'invalid_value'],
        [null, 'redaction', 'invalid_value'],
        ['day', 'redaction', 'invalid_value'],
        [{ fields: ['day', 'customer.region', 'day'] }, 'redaction.fields[2]', 'invalid_value'],
        [{ fields: ['day', 7] }, 'redaction.fields[1]', 'invalid_value'],
        [{ fields: [''] }, 'redaction.fields[0]', 'invalid_value'],
        [{ fields: ['day'], except: ['apiToken'] }, 'redaction.except', 'unknown_field'],
      ];
      for (const [redaction, path, reason] of cases) {
        const e = await refused(redaction);
        expect(e.code, JSON.stringify(redaction)).to.equal('VALIDATION_FAILED');
        expect(e.issues?.[0], JSON.stringify(redaction)).to.include({ path, reason });
      }
      expect((await refused({ fields: ['day', 'day'] })).issues?.[0]?.message).to.match(/names "day" again \(redaction\.fields\[0\]\)/);
      expect(await env.authority.runs.readStream('run-bad'), 'nothing written').to.deep.equal([]);
      expect(await env.authority.runs.getStepRun('run-bad', 'call-1')).to.equal(null);
      expect(await env.authority.recovery.inDoubt({ runId: 'run-bad' })).to.deep.equal([]);
      expect(effects()).to.equal(0);
    });

    it('R12.2 R4.3 given a call committed with one allowlist, when it is replayed with another (or none), then SEMANTIC_CONFLICT names redaction and nothing is written; the same fields in another order are the same call', async () => {
      const { tool, effects } = exportTool();
      const first = await runTool(execution, call(tool, 'run-replay'), { redaction: { fields: ['day', 'customer.region'] } });
      expect(first.status).to.equal('completed');
      const events = (await env.authority.runs.readStream('run-replay')).length;
      for (const redaction of [{ fields: ['day'] }, { fields: ['day', 'customer.region', 'apiToken'] }, { fields: [] }, undefined]) {
        const e = await refusal(runTool(execution, call(tool, 'run-replay'), redaction === undefined ? {} : { redaction }));
        expect(e.code, JSON.stringify(redaction)).to.equal('SEMANTIC_CONFLICT');
        expect(e.fields).to.deep.equal(['redaction']);
      }
      expect((await env.authority.runs.readStream('run-replay')).length, 'nothing written').to.equal(events);
      expect(await previewOf(first.startId)).to.deep.include({ shown: { day: '2026-12-07', 'customer.region': 'eu-west' } });
      const again = await runTool(execution, call(tool, 'run-replay'), { redaction: { fields: ['customer.region', 'day'] } });
      expect(again).to.include({ status: 'completed', invoked: false, startId: first.startId });
      expect((await env.authority.runs.readStream('run-replay')).length).to.equal(events);
      expect(effects()).to.equal(1);
    });
  });
};
