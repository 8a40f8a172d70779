import {
  CorruptRecordError,
  isCanonicalTextOf,
  stepRunDigest,
  stepRunTable,
  STEP_RUN_KINDS,
  STEP_RUN_STATUSES,
  type RunHead,
  type RunState,
  type StepRunState,
} from '../domain';
import { Digest, Identity, Ref, Version, oneOf, strictObject } from '../domain/codecs';
import { ApprovalBinding } from '../domain/command';
import type { RunRow, StepRunRow } from './rows';

// The Run head and StepRun read models are what a start locks and reads instead of folding the
// stream (R6.4: constant cost). They are decoded and re-verified on every read like any fact.

const StepRunStateCodec = strictObject(
  'StepRunState',
  { runId: Identity, stepRunId: Identity, projectId: Identity, kind: oneOf(STEP_RUN_KINDS), status: oneOf(STEP_RUN_STATUSES), version: Version },
  { toolDefinition: Ref, approval: ApprovalBinding, lastStartId: Identity },
);

const RunHeadCodec = strictObject('RunHead', { runId: Identity, projectId: Identity, snapshotId: Identity, snapshotDigest: Digest, version: Version });

export const decodeRunRow = (row: RunRow, streamVersion: number | string | null): RunHead => {
  const head = {
    runId: row.run_id,
    projectId: row.project_id,
    snapshotId: row.snapshot_id,
    snapshotDigest: row.snapshot_digest,
    version: Number(row.version),
  };
  // `is`: decode's verdict without an error context per field (the error names no field anyway).
  if (!RunHeadCodec.is(head)) throw new CorruptRecordError('run', row.run_id, 'run head row does not decode');
  if (streamVersion === null || Number(streamVersion) !== head.version) {
    throw new CorruptRecordError('run', row.run_id, `run head is at version ${head.version} but its stream is at ${streamVersion ?? '(missing)'}`);
  }
  return head;
};

export const decodeStepRunRow = (row: StepRunRow): StepRunState => {
  const where = `${row.run_id}/${row.step_run_id}`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(row.state_json);
  } catch {
    throw new CorruptRecordError('step run', where, 'state JSON does not parse');
  }
  if (!StepRunStateCodec.is(parsed)) throw new CorruptRecordError('step run', where, 'state JSON does not decode');
  const s = parsed as StepRunState;
  // Canonical: the parse re-serialised natively gives the text back with its keys in order.
  if (!isCanonicalTextOf(s, row.state_json)) throw new CorruptRecordError('step run', where, 'state JSON is not canonical');
  if (
    s.runId !== row.run_id ||
    s.stepRunId !== row.step_run_id ||
    s.projectId !== row.project_id ||
    s.kind !== row.kind ||
    s.status !== row.status ||
    s.version !== Number(row.version)
  ) {
    throw new CorruptRecordError('step run', where, 'mirror columns do not match the state JSON');
  }
  if (stepRunDigest(s) !== row.digest) throw new CorruptRecordError('step run', where, 'digest does not match the state');
  return s;
};

export const runStateOf = (run: RunHead | null, stepRuns: readonly StepRunState[]): RunState => ({
  run,
  stepRuns: stepRunTable(stepRuns.map((s) => [s.stepRunId, s] as const)),
});
