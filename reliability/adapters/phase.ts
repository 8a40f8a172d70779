import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ToolAdapter } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { createToolStepSaga, openExecution, type ExecutionAuthority, type SagaResult } from '../../application/saga';
import { waitOutLease } from '../../application/runTool';
import { planKeyEnv, plansFromEnv } from '../../testkit/planKeys';
import { nodeArgsOf } from '../../testkit/workerProcess';
import type { BackendName } from '../../testkit/rawSql';
import { freshStore } from '../lib/stores';
import { ADAPTER_NAMES, adapterFor, executionClassOf, type AdapterConfig, type AdapterName } from '../../testkit/adapters/fixtures';
import { readyToolCall } from '../../testkit/adapters/toolCall';
import { EffectsFile, startHttpTool, startMcpHttpTool, type ToolMode } from '../../testkit/adapters/tools';
import { runAdapterPromises, type AdapterPromiseCounts } from './promises';
import { runForgedTickets, type ForgedTicketCounts } from './forgedTickets';

// The adapters phase of `npm run reliability` (R11.4): for each real adapter, against real
// local tools, five faults: the response lost after the tool acted, the saga killed between
// the adapter's answer and the recorded outcome, a tool hanging past its timeout, the
// connection reset before the tool acted, and two drivers racing one attempt. After each
// fault the trigger is replayed, as orchestration would, until the attempt is decided or
// left to manual recovery. And a saga process killed right after the tool input was sealed,
// before any claim or adapter (R12.2): a restarted saga re-drives it with `resume(startId)`,
// from the stored plan alone. Side effects are counted by the tool, never by the saga. Then
// forged tickets (forgedTickets.ts, R12.1) and the adapters' promises against tools that try
// to break them (promises.ts, R12.3).

export const ADAPTER_SCENARIOS = ['lost_response', 'saga_killed', 'hang_past_timeout', 'connection_reset', 'racing_drivers', 'killed_after_seal'] as const;
export type AdapterScenario = (typeof ADAPTER_SCENARIOS)[number];

export interface AdapterScenarioCounts {
  readonly backend: BackendName;
  readonly adapter: AdapterName;
  readonly scenario: AdapterScenario;
  readonly trials: number;
  /** Side effects the tool made (its own count). */
  readonly sideEffects: number;
  /** Side effects beyond one per attempt. */
  readonly duplicates: number;
  /** Attempts with an outcome fact at the end. */
  readonly outcomesRecorded: number;
  /** Attempts with no outcome right after the fault. */
  readonly inDoubtAfterFault: number;
  /** ... of which `in-doubt` listed (every one must be). */
  readonly listedInDoubt: number;
  readonly resolvedByInspect: number;
  /** Resolved by starting again after inspect said not_started (or on an idempotent start). */
  readonly resolvedByRestart: number;
  /** Still in doubt at the end (manual recovery; listed by in-doubt). */
  readonly leftInDoubt: number;
  /** Drivers that found the attempt claimed by another and did nothing. */
  readonly claimHeld: number;
  /** A side effect with neither an outcome fact nor an in-doubt listing: must be 0. */
  readonly unrecorded: number;
}

export interface AdapterPhaseReport {
  readonly backend: BackendName;
  readonly counts: readonly AdapterScenarioCounts[];
  /** What the adapters promise against tools that try otherwise (R12.3, promises.ts). */
  readonly promises: readonly AdapterPromiseCounts[];
  /** Forged tickets handed to each adapter (R12.1, forgedTickets.ts). */
  readonly forgeries: readonly ForgedTicketCounts[];
  readonly failures: readonly string[];
  readonly ok: boolean;
}

export interface AdapterPhaseOptions {
  readonly backend: BackendName;
  readonly trials: number;
  readonly adapters?: readonly AdapterName[];
  readonly scenarios?: readonly AdapterScenario[];
  readonly log?: (line: string) => void;
}

/** The barrier timeout of a trial: short for the hang, room for a stdio server to start otherwise. */
const timeoutOf = (adapter: AdapterName, scenario: AdapterScenario): number => {
  if (adapter === 'mcp-stdio') return scenario === 'hang_past_timeout' ? 5000 : 10_000;
  return scenario === 'hang_past_timeout' ? 1500 : 5000;
};

const faultModeOf = (scenario: AdapterScenario): ToolMode =>
  scenario === 'lost_response' ? 'lose_response' : scenario === 'hang_past_timeout' ? 'hang_after_act' : scenario === 'connection_reset' ? 'reset_before_act' : 'ok';

const runChild = (args: readonly string[]): Promise<{ signal: NodeJS.Signals | null; status: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: join(__dirname, '..', '..'), stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...planKeyEnv() } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString('utf8')));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString('utf8')));
    // Bounded: a child that neither dies nor answers is killed (by its own pid).
    const timer = setTimeout(() => child.kill('SIGTERM'), 120_000);
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ signal, status, stdout, stderr });
    });
  });

export const runAdapterPhase = async (options: AdapterPhaseOptions): Promise<AdapterPhaseReport> => {
  const log = options.log ?? (() => undefined);
  const dir = mkdtempSync(join(tmpdir(), 'qlb-adapters-'));
  const store = await freshStore(options.backend, 'adapters');
  // R12.4: execution opens only where a plan store has a key; the saga child shares this one.
  const authority: RecoverableStartBarrierAuthority = await store.open({ plans: plansFromEnv() });
  const execution: ExecutionAuthority = openExecution(authority, { execution: 'enabled' });
  const http = await startHttpTool(dir);
  const mcpHttp = await startMcpHttpTool(dir);
  const counts: AdapterScenarioCounts[] = [];
  const failures: string[] = [];
  let promises: AdapterPromiseCounts[] = [];
  let forgeries: ForgedTicketCounts[] = [];
  const effectsOf = (adapter: AdapterName): EffectsFile =>
    adapter === 'http' || adapter === 'http-plain' ? http.effects : adapter === 'mcp-http' ? mcpHttp.effects : new EffectsFile(join(dir, `${adapter}.effects`));
  const configOf = (adapter: AdapterName, mode: ToolMode): AdapterConfig => ({
    name: adapter,
    dir,
    effectsPath: effectsOf(adapter).path,
    mode,
    ...(adapter === 'http' || adapter === 'http-plain' ? { url: http.url, statusUrl: http.statusUrl } : adapter === 'mcp-http' ? { url: mcpHttp.url } : {}),
  });
  try {
    for (const adapter of options.adapters ?? ADAPTER_NAMES) {
      const effects = effectsOf(adapter);
      const config = (mode: ToolMode): AdapterConfig => configOf(adapter, mode);
      const serverMode = (mode: ToolMode) => {
        http.mode = mode;
        mcpHttp.mode = mode;
      };
      for (const scenario of options.scenarios ?? ADAPTER_SCENARIOS) {
        const c = { sideEffects: 0, duplicates: 0, outcomesRecorded: 0, inDoubtAfterFault: 0, listedInDoubt: 0, resolvedByInspect: 0, resolvedByRestart: 0, leftInDoubt: 0, claimHeld: 0, unrecorded: 0 };
        for (let trial = 0; trial < options.trials; trial++) {
          const call = await readyToolCall(authority, executionClassOf(adapter), { adapter, scenario, trial }, timeoutOf(adapter, scenario));
          const drive = (a: ToolAdapter, sagaId = 'reliability-saga'): Promise<SagaResult> => createToolStepSaga({ execution, adapter: a, sagaId, leaseGraceMs: 0 }).drive(call.trigger, call.plan, call.invocation);
          const mode = faultModeOf(scenario);
          serverMode(mode);
          let startId: string;
          if (scenario === 'saga_killed' || scenario === 'killed_after_seal') {
            // Asynchronously: the HTTP and MCP tools the child calls live in this process.
            const at = scenario === 'saga_killed' ? 'answered' : 'sealed';
            const child = await runChild([...nodeArgsOf(join(__dirname, 'sagaChild.ts')), options.backend, store.target, JSON.stringify(call), JSON.stringify(config('ok')), at]);
            const answered = new RegExp(`${at} (\\S+)`).exec(child.stdout)?.[1];
            if (child.signal !== 'SIGKILL' || answered === undefined) {
              failures.push(`${options.backend} ${adapter} ${scenario}: the saga child was not killed when ${at} (${child.signal ?? child.status}: ${child.stderr.slice(0, 300)})`);
              continue;
            }
            startId = answered;
          } else if (scenario === 'racing_drivers') {
            const [a, b] = await Promise.all([drive(adapterFor(config(mode)), 'replica-a'), drive(adapterFor(config(mode)), 'replica-b')]);
            startId = a.barrier.record.startId;
            c.claimHeld += [a, b].filter((r) => r.status === 'claimed_elsewhere').length;
            if (a.invoked && b.invoked) failures.push(`${options.backend} ${adapter}: both racing drivers invoked ${startId}`);
          } else if (scenario === 'lost_response' && adapter === 'process') {
            // A process has no transport to lose: its report is dropped after it exited.
            const real = adapterFor(config(mode));
            const lossy: ToolAdapter = { ...real, start: async (ctx, plan) => (await real.start(ctx, plan), Promise.reject(new Error('report lost after the tool exited'))) };
            startId = (await drive(lossy)).barrier.record.startId;
          } else {
            startId = (await drive(adapterFor(config(mode)))).barrier.record.startId;
          }

          if ((await authority.recovery.outcome(startId)) === null) {
            c.inDoubtAfterFault++;
            if ((await authority.recovery.inDoubt({ runId: call.scenario.runId })).some((d) => d.startId === startId)) c.listedInDoubt++;
            else failures.push(`${options.backend} ${adapter} ${scenario}: ${startId} has no outcome and is not listed by in-doubt`);
          }
          // Orchestration replays the trigger; the claim of a killed driver runs out first.
          serverMode('ok');
          let replay: SagaResult | undefined;
          for (let i = 0; i < 20 && (await authority.recovery.outcome(startId)) === null; i++) {
            // killed after the seal: the restarted saga has the start id and the stored plan, nothing else
            replay = scenario === 'killed_after_seal' ? await createToolStepSaga({ execution, adapter: adapterFor(config('ok')), sagaId: 'restarted-saga', leaseGraceMs: 0 }).resume(startId) : await drive(adapterFor(config('ok')));
            if (replay.status !== 'claimed_elsewhere') break;
            c.claimHeld++;
            // wait the lease out, as runTool does, rather than ask again and again
            await waitOutLease(replay.holder);
          }
          if (replay !== undefined && (replay.status === 'completed' || replay.status === 'failed')) {
            if (replay.via === 'inspect') c.resolvedByInspect++;
            else c.resolvedByRestart++;
          }
          const outcome = await authority.recovery.outcome(startId);
          const made = effects.count(startId);
          c.sideEffects += made;
          c.duplicates += Math.max(0, made - 1);
          if (outcome !== null) c.outcomesRecorded++;
          else {
            c.leftInDoubt++;
            const listed = (await authority.recovery.inDoubt({ runId: call.scenario.runId })).some((d) => d.startId === startId);
            if (made > 0 && !listed) c.unrecorded++;
          }
          if (made > 1) failures.push(`${options.backend} ${adapter} ${scenario}: ${made} side effects for ${startId}`);
          if (scenario === 'killed_after_seal' && (made !== 1 || outcome === null)) failures.push(`${options.backend} ${adapter} ${scenario}: re-driven from the stored plan, ${made} side effects and ${outcome === null ? 'no' : 'an'} outcome for ${startId}`);
        }
        counts.push({ backend: options.backend, adapter, scenario, trials: options.trials, ...c });
        log(`  ${options.backend} ${adapter} ${scenario}: ${options.trials} trials, ${c.sideEffects} side effects (${c.duplicates} duplicate), ${c.outcomesRecorded} outcomes, ${c.inDoubtAfterFault} in doubt after the fault, ${c.resolvedByInspect} resolved by inspect, ${c.resolvedByRestart} by a restart, ${c.leftInDoubt} left in doubt`);
      }
    }
    const forged = await runForgedTickets(options.backend, authority, execution, { dir, effectsOf, configOf: (a) => configOf(a, 'ok'), requests: () => http.requests }, options.adapters ?? ADAPTER_NAMES);
    forgeries = forged.counts;
    failures.push(...forged.failures);
    for (const f of forgeries) log(`  ${options.backend} ${f.adapter} forged tickets: ${f.tried} tried, ${f.refused} refused, ${f.sideEffects} side effects`);
    const kept = await runAdapterPromises(options.backend, options.trials, authority, execution, dir);
    promises = kept.counts;
    failures.push(...kept.failures);
    for (const p of promises) log(`  ${options.backend} ${p.promise}: ${p.trials} trials, ${p.actedAfterTimeout} actions after the timeout, ${p.crossOriginRequests} cross-origin requests, ${p.environmentLeaks} environment leaks, ${p.recordedSucceeded} recorded as success`);
  } finally {
    await http.close();
    await mcpHttp.close();
    await execution.close();
    await authority.close();
    await store.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
  const bad = counts.filter((c) => c.duplicates > 0 || c.unrecorded > 0 || c.listedInDoubt !== c.inDoubtAfterFault);
  for (const b of bad) failures.push(`${b.backend} ${b.adapter} ${b.scenario}: ${b.duplicates} duplicates, ${b.unrecorded} unrecorded, ${b.listedInDoubt}/${b.inDoubtAfterFault} listed`);
  return { backend: options.backend, counts, promises, forgeries, failures, ok: failures.length === 0 };
};
