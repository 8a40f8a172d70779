// A crash-soak worker: a child process that runs starts in a loop against one store until it
// is SIGKILLed. It prints one line per fact the harness needs, written synchronously (stdout is
// a pipe) before it moves on:
//   READY                                      the authority is open
//   BEGIN <startId> <base64 command JSON>      about to call prepare (the outcome is unknown
//                                              to the harness until the matching ACK)
//   ACK <created|existing> <startId> <digest>  prepare returned: the start is acknowledged
//   RESOLVED <startId> <outcome>               an inherited in-flight command, replayed
//   FAIL <message>                             anything the protocol does not allow; exit 1
// Usage: worker.ts <sqlite|postgres> <path|url>; env SOAK_SEED, SOAK_INFLIGHT (file of
// commands in flight when a previous worker died), SOAK_HOOK_DELAY (probability of a short
// pause at each step inside the start transaction, so random kills land inside it).
import { readFileSync } from 'node:fs';
import { isStartBarrierError, type ToolExecutionStartCommand } from '../../domain';
import { buildScenario, type Scenario } from '../../domain/scenario';
import type { StepRunView } from '../../domain/records';
import type { BackendName } from '../../testkit/rawSql';
import { seededRng, pick, weighted, sleep } from '../lib/random';
import { openAuthority, type AnyAuthority } from '../lib/stores';

const backend = process.argv[2] as BackendName;
const target = process.argv[3]!;
const seed = Number(process.env.SOAK_SEED ?? Date.now());
const rng = seededRng(seed);
const hookDelay = Number(process.env.SOAK_HOOK_DELAY ?? '0.3');
const say = (line: string): void => void process.stdout.write(`${line}\n`);
const fail = (message: string): never => {
  say(`FAIL ${message.replace(/\s+/g, ' ')}`);
  process.exit(1);
};

interface OwnStep {
  readonly scenario: Scenario;
  readonly runId: string;
  readonly stepRunId: string;
  /** Prefix of the attempt label: keeps start ids unique across sibling StepRuns of one Run. */
  readonly label: string;
  /** The start currently running on it, if any. */
  running?: { readonly startId: string; readonly version: number } | undefined;
}

const steps: OwnStep[] = [];
const acknowledged: ToolExecutionStartCommand[] = [];
let siblings = 0;

/** Safe-to-retry typed failures (busy, lock, serialization): run the same operation again. */
const retrying = async <T>(op: () => Promise<T>): Promise<T> => {
  for (let attempt = 1; ; attempt++) {
    try {
      return await op();
    } catch (e) {
      const code = isStartBarrierError(e) ? e.code : undefined;
      if ((code === 'TRANSACTION_TIMEOUT' || code === 'CONCURRENCY_EXHAUSTED') && attempt < 20) continue;
      throw e;
    }
  }
};

const main = async (): Promise<void> => {
  const authority: AnyAuthority = await openAuthority(backend, target, {
    hook: async () => {
      if (rng() < hookDelay) await sleep(Math.floor(rng() * 3));
    },
  });
  say('READY');
  // Every worker of a round starts together (the harness sends GO once all are READY), so a
  // worker opening the file is not starved by one that is already writing.
  await new Promise<void>((resolve) => {
    let buffered = '';
    process.stdin.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      if (buffered.includes('GO\n')) resolve();
    });
    // The harness went away before the round started: nothing to do, do not linger.
    process.stdin.on('end', () => process.exit(0));
  });

  const handle = (command: unknown) => retrying(() => authority.runs.handle(command as never));
  const view = async (s: OwnStep): Promise<StepRunView> => (await authority.runs.getStepRun(s.runId, s.stepRunId)) ?? fail(`StepRun ${s.stepRunId} vanished`);

  const start = async (s: OwnStep, command: ToolExecutionStartCommand, expect: 'created' | 'existing' | 'either'): Promise<void> => {
    say(`BEGIN ${command.startId} ${Buffer.from(JSON.stringify(command)).toString('base64')}`);
    const r = await retrying(() => authority.barriers.prepare(command));
    say(`ACK ${r.outcome} ${command.startId} ${r.barrier.barrierDigest}`);
    if (expect !== 'either' && r.outcome !== expect) fail(`${command.startId}: expected ${expect}, got ${r.outcome}`);
    if (r.outcome === 'created') {
      acknowledged.push(command);
      s.running = { startId: command.startId, version: r.barrier.record.attempt.startedStepRunVersion };
    }
  };

  // Commands that were in flight when an earlier worker died: the client does not know whether
  // they committed, so it replays the exact command (R4.2): existing, or created if it never did.
  const inflightFile = process.env.SOAK_INFLIGHT;
  if (inflightFile) {
    for (const command of JSON.parse(readFileSync(inflightFile, 'utf8')) as ToolExecutionStartCommand[]) {
      say(`BEGIN ${command.startId} ${Buffer.from(JSON.stringify(command)).toString('base64')}`);
      const r = await retrying(() => authority.barriers.prepare(command));
      // One write (a pipe write under PIPE_BUF is atomic): a kill between an ACK and its
      // RESOLVED would leave the start acknowledged but never counted as resolved.
      say(`ACK ${r.outcome} ${command.startId} ${r.barrier.barrierDigest}\nRESOLVED ${command.startId} ${r.outcome}`);
    }
  }

  const newRun = async (withApproval: boolean): Promise<void> => {
    const scenario = buildScenario({ withApproval, requestedAtMs: 1_780_000_000_000 + Math.floor(rng() * 1e6) });
    for (const c of scenario.lifecycle) await handle(c);
    const s: OwnStep = { scenario, runId: scenario.runId, stepRunId: scenario.stepRunId, label: 'a' };
    steps.push(s);
    await start(s, scenario.startCommand(scenario.stepRun, `${s.label}v3`), 'created');
  };

  for (;;) {
    const running = steps.filter((s) => s.running !== undefined);
    const action = weighted(rng, {
      ready: 4,
      approval: 2,
      replay: acknowledged.length > 0 ? 2 : 0,
      retry: running.length > 0 ? 3 : 0,
      complete: running.length > 0 ? 1 : 0,
      sibling: steps.length > 0 ? 1 : 0,
    });
    switch (action) {
      case 'ready':
      case 'approval':
        await newRun(action === 'approval');
        break;
      case 'replay': {
        // An exact replay of a start this worker saw acknowledged: always `existing` (R4.2),
        // whatever happened to its StepRun since.
        const command = pick(rng, acknowledged);
        await start(steps[0]!, command, 'existing');
        break;
      }
      case 'retry': {
        // R4.4: lost -> ready (or waiting for a fresh approval) -> a new attempt at a new version.
        const s = pick(rng, running);
        const { startId, version } = s.running!;
        await handle({ type: 'MarkStepRunLost', data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'soak', reason: 'no_trace_of_tool', requestedAtMs: 1, expectedStepRunVersion: version, startId } });
        s.running = undefined;
        if (rng() < 0.3) {
          const approval = { approvalRequestId: `approval-${startId}-r`, dispatchId: `dispatch-${startId}-r`, approvalDigest: s.scenario.startCommand().admission.planDigest };
          await handle({ type: 'AwaitStepRunApproval', data: { runId: s.runId, stepRunId: s.stepRunId, approval, requestedAtMs: 2 } });
        } else {
          await handle({ type: 'MarkStepRunReady', data: { runId: s.runId, stepRunId: s.stepRunId, requestedAtMs: 2 } });
        }
        const current = await view(s);
        await start(s, s.scenario.startCommand(current, `${s.label}v${current.version + 1}`), 'created');
        break;
      }
      case 'complete': {
        const s = pick(rng, running);
        const { startId, version } = s.running!;
        const type = rng() < 0.5 ? 'CompleteStepRun' : 'FailStepRun';
        await handle({ type, data: { runId: s.runId, stepRunId: s.stepRunId, decidedBy: 'soak', reason: 'tool_succeeded', requestedAtMs: 3, expectedStepRunVersion: version, startId } });
        s.running = undefined;
        break;
      }
      case 'sibling': {
        // Another Tool StepRun in an existing Run: several StepRuns share one Run stream.
        const owner = pick(rng, steps);
        const label = `s${++siblings}`;
        const scenario = buildScenario({ prefix: owner.runId.slice(4), runId: owner.runId, projectId: owner.scenario.projectId, stepRunId: `${owner.stepRunId}-${label}` });
        for (const c of scenario.lifecycle.slice(1)) await handle(c);
        const s: OwnStep = { scenario, runId: scenario.runId, stepRunId: scenario.stepRunId, label };
        steps.push(s);
        await start(s, scenario.startCommand(scenario.stepRun, `${label}v3`), 'created');
        break;
      }
    }
  }
};

main().catch((e: unknown) => fail(isStartBarrierError(e) ? `${e.code} ${e.message}` : e instanceof Error ? `${e.name}: ${e.message} ${e.stack ?? ''}` : String(e)));
