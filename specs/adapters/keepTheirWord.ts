import { cpSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { ExecutionRefusedError, PreconditionError, ValidationError, type ToolAdapter } from '../../domain';
import { CLAIM_LEASE_GRACE_MS, MAX_CLAIM_GENERATIONS, claimRowOf } from '../../application/driverClaimRules';
import { httpAdapter, inspectionTicket, mcpAdapter, processAdapter } from '../../infrastructure/adapters';
import { unshareOnThisHost } from '../../infrastructure/adapters/processTree';
import { createToolStepSaga, openExecution, type ExecutionAuthority } from '../../application/saga';
import { ADAPTER_REFS, readyToolCall } from '../../testkit/adapters/toolCall';
import { EffectsFile, MCP_ACT_TOOL, MCP_STATUS_TOOL, mcpStdioCommand, processToolCommand } from '../../testkit/adapters/tools';
import {
  DAEMON_TOOL_SCRIPT,
  RUNTIME_SECRETS,
  SETSID_TOOL_SCRIPT,
  envProbeCommand,
  leaksOf,
  markerLines,
  probedEnv,
  startRedirectingTool,
  withRuntimeSecrets,
} from '../../testkit/adapters/hostileTools';
import { rejects } from '../../testkit/rejects';
import { buildOnce, json, runCli } from '../cli/cliSuite';
import { freshDir } from '../support/tmp';
import type { AdapterBackend } from './adapterConformance';

// R12.3: the shipped adapters keep what they declare, against tools that try otherwise: a tool
// gets nothing of the runtime's environment, a timeout ends the whole process tree (setsid and
// daemons included), no redirect is followed, and inspect answers `not_started` only when the
// journal it reads is the one the attempt's claims name. Every tool counts on its own side.

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Longer than the descendants' 1 s delay: anything left alive would have acted by then. */
const AFTER_DESCENDANTS_MS = 2500;

export const adaptersKeepTheirWord = (backend: AdapterBackend): void => {
  describe(`R12.3 adapters keep what they declare: ${backend.name}`, function () {
    this.timeout(180_000);
    let dir: string;
    let env: Awaited<ReturnType<AdapterBackend['open']>>;
    let execution: ExecutionAuthority;
    before(async () => {
      dir = freshDir('adapters-keep-word');
      env = await backend.open();
      execution = openExecution(env.authority, { execution: 'enabled' });
    });
    after(async () => {
      await execution.close();
      await env.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const drive = async (adapter: ToolAdapter, kind: keyof typeof ADAPTER_REFS, timeoutMs: number, input: unknown = { probe: true }) => {
      const call = await readyToolCall(env.authority, kind, input, timeoutMs);
      const result = await createToolStepSaga({ execution, adapter, sagaId: 'keep-word-spec' }).drive(call.trigger, call.plan, call.invocation);
      return { call, result, startId: result.barrier.record.startId };
    };
    const processTool = (name: string, script: string, extra: { env?: Record<string, string> } = {}) =>
      processAdapter({ ref: ADAPTER_REFS.process, command: '/bin/sh', args: ['-c', script], journalDir: join(dir, `${name}-journal`), env: { MARK: join(dir, `${name}.marker`), ...extra.env } });

    describe('environment', () => {
      it("R12.3: a process tool sees only the variables its configuration names and QL_START_ID: none of the runtime's (0 leaks); PATH only when asked", async () => {
        for (const inheritPath of [false, true]) {
          const out = join(dir, `probe-process-${String(inheritPath)}.json`);
          const given = { PROBE_OUT: out, TOOL_SETTING: 'configured' };
          const adapter = processAdapter({ ref: ADAPTER_REFS.process, ...envProbeCommand, journalDir: join(dir, 'probe-journal'), env: given, inheritPath });
          const { result, startId } = await withRuntimeSecrets(() => drive(adapter, 'process', 15_000));
          expect(result).to.include({ status: 'completed' });
          const seen = probedEnv(out);
          const expected: Record<string, string> = { ...given, QL_START_ID: startId, ...(inheritPath ? { PATH: process.env.PATH! } : {}) };
          expect(seen).to.deep.equal(expected);
          expect(leaksOf(seen, expected)).to.deep.equal([]);
          for (const secret of Object.values(RUNTIME_SECRETS)) expect(JSON.stringify(seen)).to.not.contain(secret);
        }
      });

      it("R12.3: an MCP stdio server sees only its configured environment: none of the runtime's (0 leaks), not even the SDK's default HOME, PATH, USER", async () => {
        const out = join(dir, 'probe-mcp.json');
        const effects = new EffectsFile(join(dir, 'probe-mcp.effects'));
        const transport = mcpStdioCommand(effects.path, 'ok', out);
        const adapter = mcpAdapter({ ref: ADAPTER_REFS.mcp, transport, tool: MCP_ACT_TOOL, statusTool: MCP_STATUS_TOOL, dedupesOnStartId: true });
        const { result } = await withRuntimeSecrets(() => drive(adapter, 'mcp', 20_000));
        expect(result).to.include({ status: 'completed' });
        const seen = probedEnv(out);
        expect(seen).to.deep.equal(transport.env);
        expect(leaksOf(seen, transport.env)).to.deep.equal([]);
      });

      it("R12.3: the runtime's whole environment is refused as a tool's configuration (VALIDATION_FAILED naming env); nothing is created", () => {
        const journalDir = join(dir, 'never-made');
        expect(() => processAdapter({ ref: ADAPTER_REFS.process, command: '/bin/true', journalDir, env: process.env as Record<string, string> })).to.throw(/env: the runtime's whole environment/);
        expect(() => mcpAdapter({ ref: ADAPTER_REFS.mcp, transport: { kind: 'stdio', command: '/bin/true', env: process.env as Record<string, string> }, tool: 'act' })).to.throw(/transport\.env/);
        expect(existsSync(journalDir)).to.equal(false);
      });
    });

    describe('the timeout ends the whole process tree', () => {
      before(function () {
        // The guarantee exists only where a PID namespace can be made; elsewhere see the last spec below.
        if (unshareOnThisHost() === null) this.skip();
      });

      it('R12.3: a tool whose descendants call setsid, run in a subshell or hold stdout is ended with them at its timeout: tool_timed_out, and 0 actions after the timeout', async () => {
        const adapter = processTool('setsid', SETSID_TOOL_SCRIPT);
        expect(adapter.declaration.guarantees.enforcesTimeout).to.equal(true);
        const { result, startId } = await drive(adapter, 'process', 400);
        expect(result).to.include({ status: 'failed', invoked: true });
        expect(await env.authority.recovery.outcome(startId)).to.include({ reason: 'tool_timed_out' });
        await sleep(AFTER_DESCENDANTS_MS);
        expect(markerLines(join(dir, 'setsid.marker'))).to.equal(0);
      });

      it('R12.3: a tool that daemonizes (double fork, new session, stdout kept) and exits: start returns with its exit, and the daemon never acts', async () => {
        const adapter = processTool('daemon', DAEMON_TOOL_SCRIPT);
        const { result } = await drive(adapter, 'process', 30_000);
        expect(result).to.include({ status: 'completed', invoked: true });
        await sleep(AFTER_DESCENDANTS_MS);
        expect(markerLines(join(dir, 'daemon.marker'))).to.equal(0);
      });
    });

    it("R12.3/R11.3: where the tree cannot be contained (containment 'none') the process adapter does not declare enforcesTimeout, and the saga refuses it before any start", async () => {
      const effects = new EffectsFile(join(dir, 'uncontained.effects'));
      const adapter = processAdapter({ ref: ADAPTER_REFS.process, ...processToolCommand, journalDir: join(dir, 'uncontained-journal'), env: { TOOL_EFFECTS: effects.path, TOOL_MODE: 'ok' }, containment: 'none' });
      expect(adapter.declaration.guarantees).to.deep.equal({ idempotentStart: false, enforcesTimeout: false });
      const call = await readyToolCall(env.authority, 'process', { x: 1 }, 5000);
      const e = await rejects(createToolStepSaga({ execution, adapter }).drive(call.trigger, call.plan, call.invocation));
      expect(e).to.be.instanceOf(ExecutionRefusedError);
      expect(e.message).to.contain('adapter_contract_unmet');
      expect(effects.total()).to.equal(0);
    });

    describe('HTTP redirects', () => {
      for (const status of [301, 302, 303, 307, 308]) {
        it(`R12.3: a tool answering ${status} to another origin: 0 requests reach it, the outcome is not tool_succeeded (in doubt), and inspect through a redirecting status endpoint says unknown`, async () => {
          const tool = await startRedirectingTool();
          tool.status = status;
          try {
            const adapter = httpAdapter({ ref: ADAPTER_REFS.http, url: tool.url, statusUrl: tool.statusUrl, headers: { 'x-api-key': 'configured-header' } });
            const { call, result, startId } = await drive(adapter, 'http', 5000);
            expect(result).to.include({ status: 'in_doubt', why: 'start_unknown', invoked: true });
            expect(await env.authority.recovery.outcome(startId)).to.equal(null);
            expect(await adapter.inspect!(await inspectionTicket(env.authority, startId), { claims: [] })).to.deep.equal({ state: 'unknown' });
            // A replayed trigger inspects (unknown) and starts again (idempotent): still redirected, still in doubt.
            const again = await createToolStepSaga({ execution, adapter }).drive(call.trigger, call.plan, call.invocation);
            expect(again).to.include({ status: 'in_doubt', why: 'start_unknown' });
            expect(await env.authority.recovery.outcome(startId)).to.equal(null);
            expect(tool.requests()).to.be.greaterThan(0);
            expect(tool.crossOriginRequests()).to.equal(0);
          } finally {
            await tool.close();
          }
        });
      }
    });

    describe('inspect proves not_started only against the journal the claims name', () => {
      const lossyAfterSpawn = (real: ToolAdapter): ToolAdapter => ({ ...real, start: async (ctx, plan) => (await real.start(ctx, plan), Promise.reject(new Error('report lost after the tool exited'))) });
      const refusedBeforeSpawn = (real: ToolAdapter): ToolAdapter => ({ ...real, start: () => Promise.reject(new Error('driver died before the spawn')) });
      const setup = (name: string) => {
        const effects = new EffectsFile(join(dir, `${name}.effects`));
        const journalDir = join(dir, `${name}-journal`);
        const make = () => processAdapter({ ref: ADAPTER_REFS.process, ...processToolCommand, journalDir, env: { TOOL_EFFECTS: effects.path, TOOL_MODE: 'ok' } });
        return { effects, journalDir, make };
      };
      const replay = (adapter: ToolAdapter, call: Awaited<ReturnType<typeof drive>>['call']) => createToolStepSaga({ execution, adapter, sagaId: 'keep-word-replay' }).drive(call.trigger, call.plan, call.invocation);

      it('R12.3: the journal the earlier driver named, with no record of the start, proves not_started: the replay starts the tool once', async () => {
        const { effects, make } = setup('bound');
        const first = await drive(refusedBeforeSpawn(make()), 'process', 10_000);
        expect(first.result).to.include({ status: 'in_doubt', why: 'start_unknown' });
        const again = await replay(make(), first.call);
        expect(again).to.include({ status: 'completed', via: 'start' });
        expect(effects.count(first.startId)).to.equal(1);
      });

      for (const damage of ['emptied', 'replaced', 'foreign'] as const) {
        it(`R12.3: a journal ${damage} after the tool ran answers unknown, never not_started: the attempt stays in doubt and the tool is not run a second time`, async () => {
          const { effects, journalDir, make } = setup(`journal-${damage}`);
          const first = await drive(lossyAfterSpawn(make()), 'process', 10_000);
          expect(first.result).to.include({ status: 'in_doubt', why: 'start_unknown' });
          expect(effects.count(first.startId)).to.equal(1);
          if (damage === 'emptied') {
            // A new host, a lost volume: the directory is there again, empty.
            rmSync(journalDir, { recursive: true, force: true });
            mkdirSync(journalDir);
          } else if (damage === 'replaced') {
            // Another journal's files put in its place (its own identity, none of this start).
            rmSync(journalDir, { recursive: true, force: true });
            processAdapter({ ref: ADAPTER_REFS.process, command: '/bin/true', journalDir });
          } else {
            // Another journal's identity over this journal's records.
            const other = join(dir, 'other-journal');
            processAdapter({ ref: ADAPTER_REFS.process, command: '/bin/true', journalDir: other });
            cpSync(join(other, 'journal.json'), join(journalDir, 'journal.json'));
          }
          const fresh = make();
          expect(await fresh.inspect!(await inspectionTicket(env.authority, first.startId), { claims: await execution.claims.history(first.startId) })).to.deep.equal({ state: 'unknown' });
          const again = await replay(fresh, first.call);
          expect(again).to.include({ status: 'in_doubt', invoked: false, why: 'inspect_unknown' });
          expect(effects.count(first.startId)).to.equal(1);
        });
      }

      it('R12.3: without the attempt\'s claims (an operator asking blind) the journal cannot prove not_started: unknown', async () => {
        const { make } = setup('blind');
        const adapter = make();
        // A committed start this journal never saw: its driver died before the spawn.
        const unseen = await drive(refusedBeforeSpawn(adapter), 'process', 10_000);
        const ticket = await inspectionTicket(env.authority, unseen.startId);
        expect(await adapter.inspect!(ticket)).to.deep.equal({ state: 'unknown' });
        expect(await adapter.inspect!(ticket, { claims: [{ driverId: 'some-other-driver.x', generation: 1 }] })).to.deep.equal({ state: 'unknown' });
        expect(await adapter.inspect!(ticket, { claims: [] })).to.deep.equal({ state: 'not_started' });
      });
    });

    it('R12.3 registries are maps: an adapter id `constructor` works in CLI in-doubt --adapters and inspect, and a registry key `__proto__` is just a name', async function () {
      this.timeout(600_000);
      buildOnce();
      const tool = await startRedirectingTool();
      try {
        for (const id of ['constructor']) {
          const ref = { id, digest: ADAPTER_REFS.http.digest };
          const adapter = httpAdapter({ ref, url: tool.url });
          const call = await readyToolCall(env.authority, 'http', { id }, 5000);
          const plan = { ...call.plan, contracts: { ...call.plan.contracts, adapter: ref } };
          const result = await createToolStepSaga({ execution, adapter }).drive(call.trigger, plan, call.invocation);
          expect(result).to.include({ status: 'in_doubt' });
          const startId = result.barrier.record.startId;
          const registry = join(dir, `registry-${id}.json`);
          for (const file of ['{}', `{"__proto__": {"kind": "process", "journalDir": "${join(dir, 'nowhere')}"}}`]) {
            writeFileSync(registry, file);
            const listed = await runCli([...env.cliArgs, 'in-doubt', '--run', call.scenario.runId, '--adapters', registry]);
            expect(listed.code, listed.stderr).to.equal(0);
            expect(json<{ inspect: unknown }[]>(listed).map((d) => d.inspect)).to.deep.equal([{ state: 'unavailable', why: 'adapter_not_configured' }]);
            const one = await runCli([...env.cliArgs, 'inspect', startId, '--adapters', registry]);
            expect(one.code, one.stderr).to.equal(0);
            expect(json<{ inspect: unknown }>(one).inspect).to.deep.equal({ state: 'unavailable', why: 'adapter_not_configured' });
          }
          writeFileSync(registry, JSON.stringify({ [ref.id]: { kind: 'http', statusUrl: tool.statusUrl } }));
          const configured = await runCli([...env.cliArgs, 'inspect', startId, '--adapters', registry]);
          expect(configured.code, configured.stderr).to.equal(0);
          // The status endpoint redirects: unknown, and nothing reached the other origin.
          expect(json<{ inspect: unknown }>(configured).inspect).to.deep.equal({ state: 'unknown' });
        }
        expect(tool.crossOriginRequests()).to.equal(0);
      } finally {
        await tool.close();
      }
    });
  });
};

/** R12.3: a driver claim's lease is bounded by its start's timeout plus a stated grace, and its generations by a number. */
export const claimLeasesBounded = (backend: AdapterBackend): void => {
  describe(`R12.3 driver claim leases are bounded: ${backend.name}`, function () {
    this.timeout(120_000);
    let env: Awaited<ReturnType<AdapterBackend['open']>>;
    before(async () => {
      env = await backend.open();
    });
    after(() => env.close());

    const started = async (timeoutMs: number) => {
      const call = await readyToolCall(env.authority, 'process', { lease: timeoutMs }, timeoutMs);
      const execution = openExecution(env.authority, { execution: 'enabled' });
      try {
        const adapter: ToolAdapter = { declaration: { kind: 'process', ref: ADAPTER_REFS.process, guarantees: { idempotentStart: false, enforcesTimeout: true } }, start: () => Promise.reject(new Error('not started')) };
        return (await createToolStepSaga({ execution, adapter }).drive(call.trigger, call.plan, call.invocation)).barrier.record.startId;
      } finally {
        await execution.close();
      }
    };

    it(`R12.3: a lease longer than the barrier's timeout plus ${CLAIM_LEASE_GRACE_MS} ms is VALIDATION_FAILED naming leaseMs, nothing written; the bound itself is accepted`, async () => {
      const startId = await started(30_000);
      const claims = env.authority.driverClaims();
      try {
        const before = await claims.history(startId);
        for (const leaseMs of [30_000 + CLAIM_LEASE_GRACE_MS + 1, 25 * 3_600_000]) {
          const e = await rejects(claims.claim(startId, 'driver-long', leaseMs));
          expect(e).to.be.instanceOf(ValidationError);
          const v = e as ValidationError;
          expect([v.record, v.issues[0]!.path]).to.include('leaseMs');
        }
        expect(await claims.history(startId)).to.deep.equal(before);
        expect((await claims.claim(startId, 'driver-bound', 30_000 + CLAIM_LEASE_GRACE_MS)).status).to.equal('claimed');
      } finally {
        await claims.close();
      }
    });

    it(`R12.3: a start is claimed at most ${MAX_CLAIM_GENERATIONS} times: the next claim is PRECONDITION_FAILED claims_exhausted, nothing written`, async () => {
      const startId = await started(30_000);
      const claims = env.authority.driverClaims();
      try {
        const taken = (await claims.history(startId)).length;
        for (let g = taken + 1; g <= MAX_CLAIM_GENERATIONS; g++) {
          const c = await claims.claim(startId, `driver-${g}`, 1000);
          if (c.status !== 'claimed') throw new Error(`claim ${g} was ${c.status}`);
          await claims.release(c.claim);
        }
        const e = await rejects(claims.claim(startId, 'driver-too-many', 1000));
        expect(e).to.be.instanceOf(PreconditionError);
        expect((e as PreconditionError).reason).to.equal('claims_exhausted');
        expect(await claims.history(startId)).to.have.length(MAX_CLAIM_GENERATIONS);
      } finally {
        await claims.close();
      }
    });

    it("R12.3: verify reports a claim whose lease is past its barrier's timeout plus the grace (written past the database's guard)", async function () {
      const a = env.authority as unknown as { backend: string; db?: { exec(sql: string): void; prepare(sql: string): { run(...p: unknown[]): unknown } }; pool?: { query(sql: string): Promise<unknown> } };
      // Only a database can be written past its guard.
      if (a.backend !== 'sqlite' && a.backend !== 'postgres') this.skip();
      const startId = await started(30_000);
      const history = await (async () => {
        const claims = env.authority.driverClaims();
        try {
          return await claims.history(startId);
        } finally {
          await claims.close();
        }
      })();
      const at = Date.now() + 1000;
      const row = claimRowOf(startId, history.length + 1, 'claim', 'driver-forged', at, at + 30_000 + CLAIM_LEASE_GRACE_MS + 1);
      const values = [row.start_id, row.generation, row.kind, row.driver_id, row.at_ms, row.lease_until_ms, row.claim_digest];
      if (a.backend === 'sqlite') {
        a.db!.exec('DROP TRIGGER adapter_driver_claims_lease_bound');
        a.db!.prepare('INSERT INTO adapter_driver_claims (start_id, generation, kind, driver_id, at_ms, lease_until_ms, claim_digest) VALUES (?, ?, ?, ?, ?, ?, ?)').run(...values);
      } else {
        const literal = (v: unknown) => (typeof v === 'number' ? String(v) : `'${String(v)}'`);
        await a.pool!.query(`BEGIN; SET LOCAL session_replication_role = replica;
          INSERT INTO ql3.adapter_driver_claims (start_id, generation, kind, driver_id, at_ms, lease_until_ms, claim_digest) VALUES (${values.map(literal).join(', ')}); COMMIT`);
      }
      const report = await env.authority.recovery.verify();
      const mine = report.problems.filter((p) => p.kind === 'driver_claim' && p.record === startId);
      expect(mine.map((p) => p.problem).join(' | ')).to.contain("past its barrier's timeout 30000 ms");
    });
  });
};
