import type { RunStreamEvent, StartBarrierRecord, StepRunState } from '../domain';

// The surface every backend offers (in-memory for specs, SQLite, PostgreSQL). The shared
// conformance suite in `specs/conformance/` drives it unchanged against each.

/** A barrier as stored: the immutable record, its digest, and the database's commit clock. */
export interface StoredBarrier {
  readonly record: StartBarrierRecord;
  readonly barrierDigest: string;
  /** The transaction clock of the database that committed it (R3.10), never the caller's time. */
  readonly committedAtMs: number;
}

export interface PrepareResult {
  readonly outcome: 'created' | 'existing';
  readonly barrier: StoredBarrier;
}

export interface StepRunView extends StepRunState {
  readonly digest: string;
}

export interface StoredEvent {
  readonly eventId: string;
  readonly streamPosition: number;
  readonly globalPosition: number;
  readonly committedAtMs: number;
  readonly event: RunStreamEvent;
}

export interface AppendOutcome {
  readonly runVersion: number;
  readonly events: readonly StoredEvent[];
}

export interface RunsApi {
  /** Decide and append one lifecycle command (`{ type, data }`, strictly decoded). */
  handle(command: unknown): Promise<AppendOutcome>;
  getStepRun(runId: string, stepRunId: string): Promise<StepRunView | null>;
  /** Every event of `run-<runId>`, decoded and in order. */
  readStream(runId: string): Promise<readonly StoredEvent[]>;
}

export interface BarriersApi {
  /** R3: one transaction, fixed order; `existing` on an exact replay (R4.2). */
  prepare(command: unknown): Promise<PrepareResult>;
  getByStartId(startId: string): Promise<StoredBarrier | null>;
  getByStepRunAttempt(runId: string, stepRunId: string, startedStepRunVersion: number): Promise<StoredBarrier | null>;
}

/** The points of the start transaction (R3.1 .. R3.7, then just before commit). */
export const START_STEPS = [
  'lookup',
  'lock',
  'evidence',
  'stepRunCas',
  'runCas',
  'runEvent',
  'barrier',
  'beforeCommit',
] as const;
export type StartStep = (typeof START_STEPS)[number];

/**
 * Called inside the start transaction after each step. Throwing aborts the transaction: the
 * fault-injection specs use it to prove R3.9; production leaves it unset.
 */
export type StartStepHook = (step: StartStep) => void | Promise<void>;

export interface StartBarrierAuthority {
  readonly backend: 'memory' | 'sqlite' | 'postgres';
  readonly runs: RunsApi;
  readonly barriers: BarriersApi;
  close(): Promise<void>;
}
