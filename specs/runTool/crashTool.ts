import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { openExecution, recover, runTool, type RunToolCall } from '../../application/saga';
import { httpAdapter } from '../../infrastructure/adapters';
import { planKeyEnv } from '../../testkit/planKeys';
import { nodeArgsOf } from '../../testkit/workerProcess';
import { outputDigestOf } from '../../domain';

// A runtime killed after its tool's side effect, on a real store: the tool (an HTTP server in
// this process) counts its side effects, kills the runtime the moment it has acted, and keeps a
// status endpoint by start id. Then runTool again, or recover(), must settle the attempt from
// what is stored and from the tool's status, never by a second side effect.

const REF = { id: 'adapter.http.orders.v1', digest: `sha256:${'b'.repeat(64)}` };

/** The call both the killed runtime and the spec make: a non-idempotent HTTP tool with a status endpoint. */
export const callOf = (url: string, runId: string, callId: string): RunToolCall => ({
  runId,
  callId,
  // honoursIdempotencyKey false: only inspect stands between a re-drive and a second side effect
  tool: { name: 'orders.create', adapter: httpAdapter({ ref: REF, url: `${url}/tool`, statusUrl: `${url}/status`, honoursIdempotencyKey: false }), timeoutMs: 1000 },
  input: { item: 'book', quantity: 2 },
});

interface ToolSide {
  readonly url: string;
  effects(startId?: string): number;
  killOnEffect(pid: number): void;
  close(): Promise<void>;
}

const toolSide = async (): Promise<ToolSide> => {
  const effects = new Map<string, number>();
  const outputs = new Map<string, string>();
  let victim: number | undefined;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/tool') {
        const key = String(req.headers['idempotency-key']);
        effects.set(key, (effects.get(key) ?? 0) + 1);
        const body = JSON.stringify({ order: `order-${effects.size}`, input: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
        outputs.set(key, body);
        // The side effect is done: the runtime dies before it hears of it.
        if (victim !== undefined) process.kill(victim, 'SIGKILL');
        victim = undefined;
        res.writeHead(200, { 'content-type': 'application/json' }).end(body);
        return;
      }
      const id = decodeURIComponent((req.url ?? '').replace(/^\/status\//, ''));
      const output = outputs.get(id);
      if (output === undefined) res.writeHead(404).end();
      else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ state: 'succeeded', output }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    effects: (startId) => (startId === undefined ? [...effects.values()].reduce((a, b) => a + b, 0) : effects.get(startId) ?? 0),
    killOnEffect: (pid) => void (victim = pid),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
};

export interface CrashBackend {
  readonly name: string;
  open(): Promise<{ authority: RecoverableStartBarrierAuthority; kind: 'sqlite' | 'postgres'; location: string; close(): Promise<void> }>;
}

/** Run the killed runtime to its death; it must die by SIGKILL after the side effect. */
const killedRuntime = async (tool: ToolSide, kind: string, location: string, runId: string, callId: string): Promise<void> => {
  const child = spawn(process.execPath, [...nodeArgsOf(join(__dirname, 'runToolChild.ts')), kind, location, tool.url, runId, callId], {
    cwd: join(__dirname, '..', '..'),
    env: { ...process.env, ...planKeyEnv() },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  tool.killOnEffect(child.pid!);
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString('utf8')));
  const signal = await new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_code, s) => r(s)));
  expect(signal, stderr).to.equal('SIGKILL');
};

export const runToolCrashConformance = (backend: CrashBackend): void => {
  describe(`R11.2 R11.4 runTool after its runtime was killed past the side effect: ${backend.name}`, function () {
    this.timeout(120_000);
    let env: Awaited<ReturnType<CrashBackend['open']>>;
    let tool: ToolSide;
    beforeEach(async () => {
      env = await backend.open();
      tool = await toolSide();
    });
    afterEach(async () => {
      await tool.close();
      await env.close();
    });

    it('R11.4 given an HTTP tool and no crash, when runTool runs it, then the response body comes back as the output and the outcome keeps its digest', async () => {
      const execution = openExecution(env.authority, { execution: 'enabled' });
      try {
        const result = await runTool(execution, callOf(tool.url, 'run-live', 'call-1'));
        expect(result).to.include({ status: 'completed', invoked: true });
        expect(JSON.parse(result.output!.text)).to.deep.include({ input: { item: 'book', quantity: 2 } });
        expect(result.outcome?.outcomeDigest).to.equal(outputDigestOf(result.output!.text).outputDigest);
        expect(tool.effects()).to.equal(1);
      } finally {
        await execution.close();
      }
    });

    it('R11.2 given a runtime SIGKILLed after the tool acted, when runTool is called again with the same arguments, then it settles the attempt with the output and the tool acted once', async () => {
      await killedRuntime(tool, env.kind, env.location, 'run-crash-1', 'call-1');
      expect(tool.effects()).to.equal(1);
      const [doubt] = await env.authority.recovery.inDoubt({ runId: 'run-crash-1' });
      expect(doubt?.stepRunId).to.equal('call-1');
      const execution = openExecution(env.authority, { execution: 'enabled' });
      try {
        const again = await runTool(execution, callOf(tool.url, 'run-crash-1', 'call-1'), { leaseGraceMs: 0 });
        expect(again).to.include({ status: 'completed', invoked: false, startId: doubt!.startId });
        expect(JSON.parse(again.output!.text)).to.deep.include({ input: { item: 'book', quantity: 2 } });
        expect(tool.effects(doubt!.startId)).to.equal(1);
        expect(await env.authority.recovery.inDoubt({ runId: 'run-crash-1' })).to.have.length(0);
        // and once more: the outcome stands, nothing is invoked
        expect(await runTool(execution, callOf(tool.url, 'run-crash-1', 'call-1'))).to.include({ status: 'completed', invoked: false });
        expect(tool.effects()).to.equal(1);
      } finally {
        await execution.close();
      }
    });

    it('R11.2 given a runtime SIGKILLed after the tool acted, when recover() runs, then it waits out the dead claim, inspects and records the outcome, and the tool acted once', async () => {
      await killedRuntime(tool, env.kind, env.location, 'run-crash-2', 'call-7');
      const execution = openExecution(env.authority, { execution: 'enabled' });
      try {
        const report = await recover(execution, { tools: [callOf(tool.url, '', '').tool], runId: 'run-crash-2', leaseGraceMs: 0 });
        expect(report).to.include({ settled: 1, inDoubt: 0 });
        expect(report.starts[0]).to.include({ status: 'completed', callId: 'call-7', invoked: false });
        expect(tool.effects()).to.equal(1);
        expect((await env.authority.runs.getStepRun('run-crash-2', 'call-7'))?.status).to.equal('completed');
      } finally {
        await execution.close();
      }
    });
  });
};
