import type { StepRunStatus } from './events';

// The StepRun lifecycle as the log records it, in one place for every check that reads the log
// (the log derivation of `verify`, the read checks, the in-memory store's append check, the SQL
// of the StepRun version index). The database's own triggers spell the same moves in SQL.

/** The status each StepRun event leaves its StepRun in. */
export const STATUS_AFTER: Readonly<Record<string, StepRunStatus>> = {
  StepRunCreated: 'created',
  StepRunReady: 'ready',
  StepRunAwaitingApproval: 'waiting_approval',
  StepRunStarted: 'running',
  StepRunLost: 'lost',
  StepRunCompleted: 'completed',
  StepRunFailed: 'failed',
};

/** Every StepRun event type. */
export const STEP_RUN_EVENT_TYPES: readonly string[] = Object.keys(STATUS_AFTER);

/** `('StepRunCreated', ...)`: the SQL list the StepRun version index is filtered by; a query must name it so to use the index. */
export const STEP_RUN_EVENT_TYPES_SQL = `(${STEP_RUN_EVENT_TYPES.map((t) => `'${t}'`).join(', ')})`;

/** The statuses each StepRun event may move from (domain/lifecycle.ts, the start decider). */
export const MOVES_FROM: Readonly<Record<string, readonly StepRunStatus[]>> = {
  StepRunReady: ['created', 'lost'],
  StepRunAwaitingApproval: ['created', 'lost'],
  StepRunStarted: ['ready', 'waiting_approval'],
  StepRunLost: ['running'],
  StepRunCompleted: ['running'],
  StepRunFailed: ['running'],
};

/** The events that end an attempt: each names the start it ends. */
export const OUTCOME_EVENTS: readonly string[] = ['StepRunCompleted', 'StepRunFailed', 'StepRunLost'];
