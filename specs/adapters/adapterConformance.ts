import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { outputDigestOf, type ToolAdapter } from '../../domain';
import { ROOT, buildOnce, json, runCli } from '../cli/cliSuite';
import { httpAdapter } from '../../infrastructure/adapters';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { createToolStepSaga, openExecution, type ExecutionAuthority } from '../../application/saga';
import { inspectionTicket } from '../../application/execution';
import { ExecutionRefusedError, attemptIdsOf } from '../../domain';
import { journalPathsOf } from '../../infrastructure/adapters';
import { existsSync } from 'node:fs';
import { adapterFor, executionClassOf, type AdapterConfig, type AdapterName } from '../../testkit/adapters/fixtures';
import { ADAPTER_REFS, readyToolCall, type ToolCall } from '../../testkit/adapters/toolCall';
import { EffectsFile, startHttpTool, startMcpHttpTool, type HttpTool, type McpHttpTool, type ToolMode } from '../../testkit/adapters/tools';

// The three real adapters (R11.4) over their real transports, each driving one tool call
// through barrier, adapter and outcome on a real store: a shell command with a journal, an HTTP
// server on 127.0.0.1, MCP servers over streamable HTTP and over stdio. The faults (lost
// responses, kills, hangs, resets, races) are counted by the reliability phase; this suite
// pins what each adapter does when it works, fails, times out and is inspected.

export interface AdapterBackend {
  readonly name: string;
  open(): Promise<{ authority: RecoverableStartBarrierAuthority; cliArgs: readonly string[]; close(): Promise<void> }>;
}

/** Tool input with a marker: it must never reach a durable record (R1.5, R10.2). */
const INPUT = { marker: 'tool-input-marker-6c1f', rows: [1, 2, 3] };

export const adapterConformance = (backend: AdapterBackend): void => {
  describe(`real adapters: ${backend.name}`, function () {
    this.timeout(120_000);
    let dir: string;
    let env: Awaited<ReturnType<AdapterBackend['open']>>;
    let execution: ExecutionAuthority;
    let http: HttpTool;
    let mcpHttp: McpHttpTool;
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'qlb-adapter-spec-'));
      env = await backend.open();
      execution = openExecution(env.authority, { execution: 'enabled' });
      http = await startHttpTool(dir);
      mcpHttp = await startMcpHttpTool(dir);
    });
    after(async () => {
      await http.close();
      await mcpHttp.close();
      await execution.close();
      await env.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const effectsOf = (name: AdapterName): EffectsFile => (name === 'http' ? http.effects : name === 'mcp-http' ? mcpHttp.effects : new EffectsFile(join(dir, `${name}.effects`)));
    const configOf = (name: AdapterName, mode: ToolMode): AdapterConfig => {
      http.mode = mode;
      mcpHttp.mode = mode;
      return { name, dir, effectsPath: effectsOf(name).path, mode, ...(name === 'http' ? { url: http.url, statusUrl: http.statusUrl } : name === 'mcp-http' ? { url: mcpHttp.url } : {}) };
    };
    /** A start committed and its plan sealed, then the saga stops before any claim or adapter. */
    const sealedNotRun = async (name: AdapterName, given?: ToolCall) => {
      const call = given ?? (await readyToolCall(env.authority, executionClassOf(name), INPUT, 15_000));
      const crash = new Error('stopped after the plan was sealed');
      const stopped = await createToolStepSaga({ execution, adapter: adapterFor(configOf(name, 'ok')), hooks: { afterSeal: () => Promise.reject(crash) } })
        .drive(call.trigger, call.plan, call.invocation)
        .catch((e: unknown) => e);
      expect(stopped).to.equal(crash);
      const startId = attemptIdsOf(call.scenario.runId, call.scenario.stepRunId, call.trigger.stepRunVersion + 1).startId;
      return { call, startId, barrier: (await env.authority.barriers.getByStartId(startId))! };
    };
    /** The next attempt of the same StepRun: the first resolved lost, the StepRun ready again, sealed, not run. */
    const retryOf = async (name: AdapterName, first: Awaited<ReturnType<typeof sealedNotRun>>) => {
      const { runId, stepRunId } = first.call.scenario;
      await env.authority.recovery.resolve(first.startId, 'lost', { decidedBy: 'adapter-spec', reason: 'no_trace_of_tool' });
      const { events } = await env.authority.runs.handle({ type: 'MarkStepRunReady', data: { runId, stepRunId, requestedAtMs: 5 } });
      const version = (events[0]!.event.data as { stepRunVersion: number }).stepRunVersion;
      return sealedNotRun(name, { ...first.call, trigger: { ...first.call.trigger, stepRunVersion: version } });
    };
    const driveOnce = async (name: AdapterName, mode: ToolMode, timeoutMs = 15_000, adapter?: ToolAdapter) => {
      const call = await readyToolCall(env.authority, executionClassOf(name), INPUT, timeoutMs);
      const result = await createToolStepSaga({ execution, adapter: adapter ?? adapterFor(configOf(name, mode)), sagaId: 'adapter-spec' }).drive(call.trigger, call.plan, call.invocation);
      return { call, result, startId: result.barrier.record.startId };
    };

    for (const name of ['process', 'http', 'mcp-http', 'mcp-stdio'] as const) {
      describe(name, () => {
        it(`R11.1/R11.4: one tool call through barrier, ${name} adapter and outcome: the tool acts once, keyed by the start id; the outcome fact holds a code and a digest, never the input or output; the output goes back to the caller`, async () => {
          const { call, result, startId } = await driveOnce(name, 'ok');
          expect(result).to.include({ status: 'completed', prepared: 'created', invoked: true, via: 'start' });
          if (result.status !== 'completed') throw new Error('unreachable');
          // The tool's own count, keyed by what it received as the start id (env, header, _meta).
          expect(effectsOf(name).count(startId)).to.equal(1);
          if (name === 'http') expect(http.received.filter((k) => k === startId)).to.have.length(1);
          const report = result.report as { outputDigest: string; outputBytes: number };
          expect(report.outputBytes).to.be.greaterThan(0);
          expect(result.outcome).to.include({ outcome: 'completed', reason: 'tool_succeeded', outcomeDigest: report.outputDigest, decidedBy: 'adapter-spec' });
          // R11.2 the output itself goes back to the caller (bounded), the digest it was recorded by is its own
          expect(result.output, 'the adapter returns the tool output').to.not.equal(undefined);
          expect(result.output!.truncated).to.equal(false);
          expect(result.output!.bytes).to.equal(report.outputBytes);
          expect(outputDigestOf(result.output!.text).outputDigest).to.equal(report.outputDigest);
          const durable = JSON.stringify([await env.authority.runs.readStream(call.scenario.runId), await execution.claims.history(startId), await env.authority.recovery.history(call.scenario.runId, call.scenario.stepRunId)]);
          expect(durable).to.not.contain(INPUT.marker);
          expect((await execution.claims.history(startId)).map((c) => [c.generation, c.released])).to.deep.equal([[1, true]]);
        });

        it(`R11.1: a failing tool is a failed outcome (tool_failed); inspect answers not_started for a start it never saw and the recorded state for one it ran`, async () => {
          const { result, startId } = await driveOnce(name, 'fail');
          expect(result).to.include({ status: 'failed', invoked: true });
          expect(await env.authority.recovery.outcome(startId)).to.include({ outcome: 'failed', reason: 'tool_failed' });
          const adapter = adapterFor(configOf(name, 'ok'));
          expect(adapter.inspect, 'this adapter offers inspect').to.be.a('function');
          expect(await adapter.inspect!(await inspectionTicket(env.authority, startId))).to.include({ state: 'failed' });
          const unseen = await sealedNotRun(name);
          expect(await adapter.inspect!(await inspectionTicket(env.authority, unseen.startId), { claims: [] })).to.include({ state: 'not_started' });
          expect(effectsOf(name).count(startId)).to.equal(1);
        });

        it(`R11.4: a tool that hangs is bounded by the barrier's timeout: the ${name} adapter gives up, nothing is invoked twice`, async () => {
          const { result, startId } = await driveOnce(name, 'hang', name === 'mcp-stdio' ? 5000 : 800);
          // The process adapter knows it killed its tool (failed); the network adapters cannot know (in doubt).
          if (name === 'process') expect(result).to.include({ status: 'failed' }) && expect(await env.authority.recovery.outcome(startId)).to.include({ reason: 'tool_timed_out' });
          else expect(result).to.include({ status: 'in_doubt', why: 'start_unknown', invoked: true });
          expect(effectsOf(name).count(startId)).to.equal(0);
        });

        it(`R12.1: the ${name} adapter acts only on a minted ticket with its opened plan: a barrier-shaped object, a hand-made execution object, a ticket for another start, another attempt or another adapter, a ticket after close(), or a plan the library did not open are EXECUTION_REFUSED before any I/O (zero side effects on the tool's side)`, async () => {
          const adapter = adapterFor(configOf(name, 'ok'));
          const mine = await sealedNotRun(name);
          const other = await sealedNotRun(name);
          const foreign = await sealedNotRun(name === 'process' ? 'http' : 'process');
          const ticketOf = (x: typeof mine, e = execution) => e.ticket({ startId: x.startId, attempt: 3, adapter: x.barrier.record.contracts.adapter });
          const plan = await execution.openPlan(mine.barrier);
          const ticket = await ticketOf(mine);
          // a ticket minted for attempt 3 of `other`, which is then lost and retried at a later attempt
          const earlier = await ticketOf(other);
          const retry = await retryOf(name, other);
          const retryPlan = await execution.openPlan(retry.barrier);
          const closing = openExecution(env.authority, { execution: 'enabled' });
          const stale = { ticket: await ticketOf(mine, closing), plan: await closing.openPlan(mine.barrier) };
          await closing.close();
          const requestsBefore = http.requests;
          const claims = env.authority.driverClaims();
          const forged: [string, () => Promise<unknown>, string][] = [
            ['a barrier-shaped object', () => adapter.start({ barrier: mine.barrier.record, barrierDigest: mine.barrier.barrierDigest, committedAtMs: mine.barrier.committedAtMs, timeoutMs: 5000 } as never, plan), 'ticket_refused'],
            ['a hand-made execution object', () => adapter.start({ authority: env.authority, executionEnabled: true, claims } as never, plan), 'ticket_refused'],
            ['a copy of the ticket', () => adapter.start({ ...ticket }, plan), 'ticket_refused'],
            ['a ticket for another start', async () => adapter.start(earlier, plan), 'ticket_mismatch'],
            ['a ticket for another attempt of the StepRun', () => adapter.start(earlier, retryPlan), 'ticket_mismatch'],
            ['a ticket for another adapter', async () => adapter.start(await ticketOf(foreign), await execution.openPlan(foreign.barrier)), 'ticket_mismatch'],
            ['a ticket after close()', () => adapter.start(stale.ticket, stale.plan), 'ticket_expired'],
            ['a plan the library did not open', () => adapter.start(ticket, mine.call.invocation), 'plan_unavailable'],
            ['inspect with a copy', () => adapter.inspect!({ ...ticket }), 'ticket_refused'],
            ['inspect with a ticket for another adapter', async () => adapter.inspect!(await ticketOf(foreign)), 'ticket_mismatch'],
            ['inspect after close()', () => adapter.inspect!(stale.ticket), 'ticket_expired'],
          ];
          try {
            for (const [what, attempt, reason] of forged) {
              const e = await attempt().then(() => 'ACTED', (x: unknown) => x);
              expect(e, what).to.be.instanceOf(ExecutionRefusedError);
              expect((e as ExecutionRefusedError).reason, what).to.equal(reason);
            }
          } finally {
            await claims.close();
          }
          for (const x of [mine, other, retry, foreign]) expect(effectsOf(name).count(x.startId), name).to.equal(0);
          expect(http.requests, 'requests the HTTP tool received').to.equal(requestsBefore);
          if (name === 'process') expect(existsSync(journalPathsOf(join(dir, 'journal'), mine.startId).started), 'journal written').to.equal(false);
          // the minted ticket with its opened plan acts, once
          expect(await adapter.start(ticket, plan)).to.include({ outcome: 'completed' });
          expect(effectsOf(name).count(mine.startId)).to.equal(1);
        });
      });
    }

    it('R11.2: an HTTP tool without a status endpoint has no inspect; one that does not honour Idempotency-Key is not idempotent: after a lost response the attempt stays in doubt (at-most-once)', async () => {
      const plain = httpAdapter({ ref: ADAPTER_REFS.http, url: http.url, honoursIdempotencyKey: false });
      expect(plain.inspect).to.equal(undefined);
      expect(plain.declaration.guarantees).to.deep.equal({ idempotentStart: false, enforcesTimeout: true });
      http.mode = 'lose_response';
      const { call, result, startId } = await driveOnce('http', 'lose_response', 5000, plain);
      expect(result).to.include({ status: 'in_doubt', why: 'start_unknown' });
      http.mode = 'ok';
      const again = await createToolStepSaga({ execution, adapter: plain }).drive(call.trigger, call.plan, call.invocation);
      expect(again).to.include({ status: 'in_doubt', why: 'no_inspect', invoked: false });
      expect(http.effects.count(startId)).to.equal(1);
      expect((await env.authority.recovery.inDoubt({ runId: call.scenario.runId })).map((d) => d.startId)).to.deep.equal([startId]);
    });

    it('R11.1: the process journal dedupes starts: a second start of the same start id never spawns the command again', async () => {
      const processReal = adapterFor(configOf('process', 'ok'));
      const lossy: ToolAdapter = { ...processReal, start: async (ticket, plan) => (await processReal.start(ticket, plan), Promise.reject(new Error('report lost'))) };
      const { startId } = await driveOnce('process', 'ok', 5000, lossy);
      const adapter = adapterFor(configOf('process', 'ok'));
      const barrier = (await env.authority.barriers.getByStartId(startId))!;
      const report = await adapter.start(await execution.ticket({ startId, attempt: 3, adapter: ADAPTER_REFS.process }), await execution.openPlan(barrier));
      expect(report).to.include({ outcome: 'completed', code: 'tool_succeeded', ...outputDigestOf('') });
      expect(effectsOf('process').count(startId)).to.equal(1);
    });

    it('R11.1 operator recovery: CLI in-doubt shows what each adapter\'s inspect says; CLI inspect START_ID asks the adapter and records nothing', async () => {
      buildOnce();
      // A process start whose report was lost after the tool exited, an HTTP start whose response was lost.
      const processReal = adapterFor(configOf('process', 'ok'));
      const lossy: ToolAdapter = { ...processReal, start: async (ctx, plan) => (await processReal.start(ctx, plan), Promise.reject(new Error('report lost'))) };
      const p = await driveOnce('process', 'ok', 5000, lossy);
      http.mode = 'lose_response';
      const h = await driveOnce('http', 'lose_response', 5000, adapterFor(configOf('http', 'lose_response')));
      expect([p.result.status, h.result.status]).to.deep.equal(['in_doubt', 'in_doubt']);
      const registry = join(dir, 'adapters.json');
      const declared = { [ADAPTER_REFS.process.id]: { kind: 'process', journalDir: join(dir, 'journal') }, [ADAPTER_REFS.http.id]: { kind: 'http', statusUrl: http.statusUrl } };
      writeFileSync(registry, JSON.stringify(declared));
      // One registry: the runtime's module (defineAdapters from the package's adapters subpath) is what the CLI reads too
      const runtimeModule = join(dir, 'adapters.mjs');
      const subpath = join(ROOT, 'dist', 'infrastructure', 'adapters', 'index.js');
      writeFileSync(runtimeModule, `import adapters from ${JSON.stringify(subpath)};\nexport default adapters.defineAdapters(${JSON.stringify(declared)});\n`);

      for (const file of [registry, runtimeModule]) {
        const listed = json<{ startId: string; inspect: { state: string } }[]>(await runCli([...env.cliArgs, 'in-doubt', '--adapters', file]));
        const states = Object.fromEntries(listed.map((d) => [d.startId, d.inspect.state]));
        expect(states[p.startId], file).to.equal('succeeded');
        expect(states[h.startId], file).to.equal('succeeded');
      }
      const asked = await runCli([...env.cliArgs, 'inspect', h.startId, '--adapters', registry]);
      const one = json<{ inDoubt: boolean; inspect: { state: string }; adapter: { id: string } }>(asked);
      expect(one).to.deep.include({ inDoubt: true, inspect: { state: 'succeeded' }, adapter: ADAPTER_REFS.http });
      // R12.2: operators see the sealed plan's redacted preview (the default contract names no field), never the input; with no plan key given it is shown as stored
      const shown = await runCli([...env.cliArgs, 'show', '--start-id', h.startId]);
      for (const out of [asked, shown]) {
        expect(json<{ plan: unknown }>(out).plan).to.deep.equal({ status: 'sealed', preview: { redaction: h.call.plan.contracts.redaction, planDigest: h.call.plan.admission.planDigest, shown: {} }, verified: false });
        expect(JSON.stringify(out)).to.not.contain(INPUT.marker);
      }
      // Nothing recorded by inspecting: the operator (or a replayed saga) decides.
      expect(await env.authority.recovery.outcome(h.startId)).to.equal(null);
      writeFileSync(registry, JSON.stringify({}));
      expect(json<{ inspect: unknown }>(await runCli([...env.cliArgs, 'inspect', p.startId, '--adapters', registry])).inspect).to.deep.equal({ state: 'unavailable', why: 'adapter_not_configured' });
      writeFileSync(registry, JSON.stringify({ x: { kind: 'ftp', host: 'h' } }));
      expect((await runCli([...env.cliArgs, 'inspect', p.startId, '--adapters', registry])).code).to.equal(2);
      writeFileSync(registry, JSON.stringify({}));
      expect((await runCli([...env.cliArgs, 'inspect', 'start-unknown', '--adapters', registry])).code).to.equal(3);
      // Resolve both from what inspect said: a replayed saga records it for them.
      http.mode = 'ok';
      for (const c of [p, h]) {
        const adapter = adapterFor(configOf(c === p ? 'process' : 'http', 'ok'));
        expect(await createToolStepSaga({ execution, adapter }).drive(c.call.trigger, c.call.plan, c.call.invocation)).to.include({ status: 'completed', via: 'inspect' });
      }
    });

    it('R11.2/R6.4: driver claims are facts: the database refuses UPDATE and DELETE of a claim row', async () => {
      const { startId } = await driveOnce('process', 'ok');
      const a = env.authority as unknown as { backend: string; db?: { prepare(sql: string): { run(...p: unknown[]): unknown } }; pool?: { query(sql: string, p: unknown[]): Promise<unknown> } };
      const attempts =
        a.backend === 'sqlite'
          ? ['UPDATE adapter_driver_claims SET lease_until_ms = 0 WHERE start_id = ?', 'DELETE FROM adapter_driver_claims WHERE start_id = ?'].map((sql) => Promise.resolve().then(() => a.db!.prepare(sql).run(startId)))
          : ['UPDATE ql3.adapter_driver_claims SET lease_until_ms = 0 WHERE start_id = $1', 'DELETE FROM ql3.adapter_driver_claims WHERE start_id = $1'].map((sql) => a.pool!.query(sql, [startId]));
      for (const attempt of attempts) expect(String(await attempt.then(() => 'changed', (e: unknown) => e))).to.contain('driver claims are facts');
      expect((await execution.claims.history(startId)).map((c) => [c.generation, c.released])).to.deep.equal([[1, true]]);
    });
  });
};
