import { canonicalJsonOf, stepRunDigest, type RunHead, type StepRunState } from '../domain';
import type { RunRow, StepRunRow } from './tableRows';

export * from './tableRows';
export * from './startRows';

// Inline projections, as pure row derivations shared by every backend: the stores write these
// rows in the same transaction as the events, and the rebuild specs derive them again from the
// event log and compare. The table rows are in tableRows.ts, a start's in startRows.ts.

export const runRowOf = (run: RunHead): RunRow => ({
  run_id: run.runId,
  project_id: run.projectId,
  snapshot_id: run.snapshotId,
  snapshot_digest: run.snapshotDigest,
  version: run.version,
});

export const stepRunRowOf = (s: StepRunState): StepRunRow => ({
  run_id: s.runId,
  step_run_id: s.stepRunId,
  project_id: s.projectId,
  kind: s.kind,
  status: s.status,
  version: s.version,
  digest: stepRunDigest(s),
  state_json: canonicalJsonOf(s),
});

/**
 * stepRunRowOf for the StepRun a start leaves: `from` moved to running at `version`, its attempt
 * `startId`, and `digest` that state's digest as the decider computed it (startedStepRunDigest).
 * Built in canonical key order, field by field, so its state JSON prints natively.
 */
export const startedStepRunRowOf = (from: StepRunState, version: number, startId: string, digest: string): StepRunRow => {
  const state: Record<string, unknown> = from.approval ? { approval: from.approval } : {};
  state.kind = from.kind;
  state.lastStartId = startId;
  state.projectId = from.projectId;
  state.runId = from.runId;
  state.status = 'running';
  state.stepRunId = from.stepRunId;
  if (from.toolDefinition) state.toolDefinition = from.toolDefinition;
  state.version = version;
  return {
    run_id: from.runId,
    step_run_id: from.stepRunId,
    project_id: from.projectId,
    kind: from.kind,
    status: 'running',
    version,
    digest,
    state_json: canonicalJsonOf(state),
  };
};
