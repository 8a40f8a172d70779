import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isStartBarrierError } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { openSqliteStartBarrier } from '../sqlite';

// `npm start`: the main job on the embedded default. One SQLite file, one Run with a ready
// Tool StepRun, then every outcome a caller meets: created, existing (lost response
// replayed), a typed conflict (drift under the same startId), a lost attempt retried at a
// new StepRun version with a new barrier while the first stays untouched.

const line = (label: string, value: unknown) => console.log(`${label.padEnd(34)} ${typeof value === 'string' ? value : JSON.stringify(value)}`);

const main = async (): Promise<void> => {
  const path = process.argv[2] ?? join(mkdtempSync(join(tmpdir(), 'start-barrier-')), 'barrier.db');
  const authority = await openSqliteStartBarrier({ path });
  try {
    line('database', path);
    const scenario = buildScenario();
    for (const command of scenario.lifecycle) await authority.runs.handle(command);
    const ready = await authority.runs.getStepRun(scenario.runId, scenario.stepRunId);
    line('StepRun', `${ready?.stepRunId} ${ready?.status} v${ready?.version}`);

    const command = scenario.startCommand();
    const first = await authority.barriers.prepare(command);
    line('prepare', `${first.outcome} ${first.barrier.record.startId} attempt v${first.barrier.record.attempt.startedStepRunVersion}`);
    line('  barrier digest', first.barrier.barrierDigest);
    line('  committed_at_ms (database clock)', `${first.barrier.committedAtMs} (caller time ${command.requestedAtMs})`);

    const replay = await authority.barriers.prepare(command);
    line('prepare again (lost response)', `${replay.outcome} ${replay.barrier.record.startId} same digest: ${replay.barrier.barrierDigest === first.barrier.barrierDigest}`);

    try {
      await authority.barriers.prepare({ ...command, admission: { ...command.admission, timeoutMs: command.admission.timeoutMs + 1 } });
      line('prepare with drifted content', 'UNEXPECTEDLY ACCEPTED');
      process.exitCode = 1;
    } catch (e) {
      if (!isStartBarrierError(e)) throw e;
      line('prepare with drifted content', `${e.code}: ${e.message}`);
    }

    await authority.runs.handle({
      type: 'MarkStepRunLost',
      data: { runId: scenario.runId, stepRunId: scenario.stepRunId, decidedBy: 'demo-operator', reason: 'no_trace_of_tool', requestedAtMs: Date.now() },
    });
    await authority.runs.handle({ type: 'MarkStepRunReady', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, requestedAtMs: Date.now() } });
    const again = await authority.runs.getStepRun(scenario.runId, scenario.stepRunId);
    const retry = await authority.barriers.prepare(scenario.startCommand(again ?? undefined));
    line('retry after lost -> ready', `${retry.outcome} ${retry.barrier.record.startId} attempt v${retry.barrier.record.attempt.startedStepRunVersion}`);
    const old = await authority.barriers.getByStepRunAttempt(scenario.runId, scenario.stepRunId, first.barrier.record.attempt.startedStepRunVersion);
    line('first attempt untouched', old?.barrierDigest === first.barrier.barrierDigest);
    const events = await authority.runs.readStream(scenario.runId);
    line('Run stream', `${events.length} events: ${events.map((e) => e.event.type).join(', ')}`);
  } finally {
    await authority.close();
  }
};

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
