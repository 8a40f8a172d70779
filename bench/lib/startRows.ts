import { randomUUID } from 'node:crypto';
import {
  RECORD_TAGS,
  buildStartFacts,
  canonicalJson,
  decideLifecycle,
  digestCanonical,
  evolve,
  initialRunState,
  streamNameOf,
  type DecodedStartCommand,
  type RunState,
  type RunStreamEvent,
  type StartFacts,
  type ToolExecutionStartCommand,
} from '../../domain';
import type { Scenario } from '../../domain/scenario';
import { eventChainDigest } from '../../domain/eventChain';
import { naturalEventIdOf, runRowOf, startEventJsonOf, startRowsOf, stepRunRowOf, type RunRow, type StartRows, type StepRunRow } from '../../projections/rows';

// The exact rows a Run and its start put in the database, derived with the domain itself (the
// same decider, digests and projections the stores use). The bare-transaction baselines insert
// these rows with no checks; the scale seeders write them in bulk, so every seeded barrier is
// a valid one that a verified read accepts.

export interface EventRowIn {
  readonly stream_id: string;
  readonly stream_position: number;
  readonly event_id: string;
  readonly event_type: string;
  readonly data_json: string;
  readonly committed_at_ms: number;
  /** The chain link (R9.2): the digest over the link of the event before it. */
  readonly chain_digest: string;
}

/** A command already known to be valid (built by `buildScenario`): canonical form and digest only. */
export const trustedDecoded = (command: ToolExecutionStartCommand): DecodedStartCommand => {
  const canonical = canonicalJson(command);
  return { command, canonical, commandDigest: digestCanonical(RECORD_TAGS.command, canonical) };
};

/** The lifecycle of a scenario, decided and folded as orchestration would. */
export const lifecycleOf = (scenario: Scenario): { events: RunStreamEvent[]; state: RunState } => {
  let state = initialRunState();
  const events: RunStreamEvent[] = [];
  for (const c of scenario.lifecycle) {
    const decided = decideLifecycle(c, state);
    state = decided.reduce(evolve, state);
    events.push(...decided);
  }
  return { events, state };
};

/** `previousChain`: the link of the event at `fromVersion` ('' before the first). */
export const eventRowsOf = (runId: string, fromVersion: number, events: readonly RunStreamEvent[], committedAtMs: number, json?: readonly string[], previousChain = ''): EventRowIn[] => {
  let chain = previousChain;
  return events.map((e, i) => {
    const row = {
      stream_id: streamNameOf(runId),
      stream_position: fromVersion + i + 1,
      event_id: naturalEventIdOf(e) ?? randomUUID(),
      event_type: e.type,
      data_json: json?.[i] ?? canonicalJson(e.data),
      committed_at_ms: committedAtMs,
    };
    chain = eventChainDigest(chain, row);
    return { ...row, chain_digest: chain };
  });
};

export interface StartWrite {
  readonly facts: StartFacts;
  readonly rows: StartRows;
  /** The five start events at positions runVersion+1 .. runVersion+5. */
  readonly events: EventRowIn[];
  /** The StepRun row after the start (status running) and the Run version after it. */
  readonly stepRunAfter: StepRunRow;
  readonly runVersionBefore: number;
  readonly runVersionAfter: number;
}

/**
 * Everything one start writes, given the Run state before it. Event JSON reuses the fact rows'
 * canonical JSON (the same objects), so seeding does not canonicalise twice.
 */
/** `previousChain`: the link of the Run's last event, where the caller knows it (seeding). */
export const startWriteOf = (decoded: DecodedStartCommand, before: RunState, committedAtMs: number, previousChain = ''): StartWrite => {
  const facts = buildStartFacts(decoded, before);
  const rows = startRowsOf(facts, committedAtMs);
  const run = before.run!;
  const started = facts[3].data;
  const from = before.stepRuns[started.stepRunId]!;
  const json = startEventJsonOf(rows);
  return {
    facts,
    rows,
    events: eventRowsOf(run.runId, run.version, facts, committedAtMs, json, previousChain),
    stepRunAfter: stepRunRowOf({ ...from, status: 'running', version: started.stepRunVersion, lastStartId: started.startId }),
    runVersionBefore: run.version,
    runVersionAfter: run.version + facts.length,
  };
};

/** A whole started Run (lifecycle + one start) as rows: what the scale seeders write. */
export interface SeededRun {
  readonly stream: { stream_id: string; stream_type: string; version: number };
  readonly run: RunRow;
  readonly stepRun: StepRunRow;
  readonly events: EventRowIn[];
  readonly start: StartWrite;
}

export const seededRunOf = (scenario: Scenario, committedAtMs: number): SeededRun => {
  const { events, state } = lifecycleOf(scenario);
  const run = state.run!;
  const lifecycle = eventRowsOf(run.runId, 0, events, committedAtMs);
  const start = startWriteOf(trustedDecoded(scenario.startCommand()), state, committedAtMs, lifecycle[lifecycle.length - 1]?.chain_digest ?? '');
  return {
    stream: { stream_id: streamNameOf(run.runId), stream_type: 'run', version: start.runVersionAfter },
    run: runRowOf({ ...run, version: start.runVersionAfter }),
    stepRun: start.stepRunAfter,
    events: [...lifecycle, ...start.events],
    start,
  };
};
