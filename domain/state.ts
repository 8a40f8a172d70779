import { digestOf, RECORD_TAGS } from './canonical';
import type { Ref } from './codecs';
import type { ApprovalBinding } from './command';
import type { RunStreamEvent, StepRunStatus, STEP_RUN_KINDS } from './events';

export type StepRunKind = (typeof STEP_RUN_KINDS)[number];

export interface RunHead {
  readonly runId: string;
  readonly projectId: string;
  readonly snapshotId: string;
  readonly snapshotDigest: string;
  /** Stream version: the number of events in `run-<runId>` (R3.5's compare-and-set value). */
  readonly version: number;
}

export interface StepRunState {
  readonly runId: string;
  readonly stepRunId: string;
  readonly projectId: string;
  readonly kind: StepRunKind;
  readonly toolDefinition?: Ref;
  readonly status: StepRunStatus;
  /** Counts this StepRun's own events; the attempt identity of R4.4. */
  readonly version: number;
  readonly approval?: ApprovalBinding;
  /** The start whose attempt is current or was last; not part of the digest. */
  readonly lastStartId?: string;
}

/**
 * The state a decision needs. Stores may hand in a partial view (the Run head and only the
 * StepRuns a command touches) so a start never folds the whole stream on the hot path.
 */
export interface RunState {
  readonly run: RunHead | null;
  readonly stepRuns: Readonly<Record<string, StepRunState>>;
}

/**
 * StepRuns by id in a null-prototype object: ids are data, never property names, so a StepRun
 * named `constructor`, `toString` or `hasOwnProperty` is found (or not) like any other.
 */
export const stepRunTable = (entries: Iterable<readonly [string, StepRunState]>): Readonly<Record<string, StepRunState>> => {
  const table = Object.create(null) as Record<string, StepRunState>;
  for (const [id, s] of entries) table[id] = s;
  return table;
};

export const initialRunState = (): RunState => ({ run: null, stepRuns: stepRunTable([]) });

export const streamNameOf = (runId: string): string => `run-${runId}`;

/** The StepRun digest a start command must name (R2.2) and a barrier binds (R5.3). */
export const stepRunDigest = (s: StepRunState): string => stepRunDigestAt(s, s.status, s.version);

/** The digest of StepRun `s` moved to `status` at `version`, without building that state. */
export const stepRunDigestAt = (s: StepRunState, status: StepRunStatus, version: number): string => {
  // Built in canonical key order (`approval` first), never on a spread: digestOf then prints it
  // natively when the bindings it holds are in order too.
  const body: Record<string, unknown> = s.approval ? { approval: s.approval } : {};
  body.kind = s.kind;
  body.projectId = s.projectId;
  body.runId = s.runId;
  body.status = status;
  body.stepRunId = s.stepRunId;
  if (s.toolDefinition) body.toolDefinition = s.toolDefinition;
  body.version = version;
  return digestOf(RECORD_TAGS.stepRun, body);
};

const withStepRun = (state: RunState, run: RunHead, stepRun: StepRunState): RunState => ({
  run,
  stepRuns: stepRunTable([...Object.entries(state.stepRuns), [stepRun.stepRunId, stepRun]]),
});

const bump = (run: RunHead | null): RunHead => {
  if (run === null) throw new Error('event applied to a Run that does not exist');
  return { ...run, version: run.version + 1 };
};

const stepRunOf = (state: RunState, stepRunId: string): StepRunState => {
  const s = state.stepRuns[stepRunId];
  if (s === undefined) throw new Error(`event applied to StepRun ${stepRunId} that is not in the state`);
  return s;
};

/**
 * Pure fold. Events are facts already accepted, so a gap (unknown StepRun) is a programming
 * or storage error, never silently skipped. A partial state without the StepRun an event
 * names is tolerated only for events that do not change that StepRun.
 */
export const evolve = (state: RunState, event: RunStreamEvent): RunState => {
  switch (event.type) {
    case 'RunCreated': {
      const d = event.data;
      return { run: { runId: d.runId, projectId: d.projectId, snapshotId: d.snapshotId, snapshotDigest: d.snapshotDigest, version: 1 }, stepRuns: stepRunTable([]) };
    }
    case 'StepRunCreated': {
      const d = event.data;
      const run = bump(state.run);
      return withStepRun(state, run, {
        runId: d.runId,
        stepRunId: d.stepRunId,
        projectId: run.projectId,
        kind: d.kind,
        status: 'created',
        version: d.stepRunVersion,
        ...(d.toolDefinition ? { toolDefinition: d.toolDefinition } : {}),
      });
    }
    case 'StepRunReady': {
      const { approval: _dropped, ...s } = stepRunOf(state, event.data.stepRunId);
      return withStepRun(state, bump(state.run), { ...s, status: 'ready', version: event.data.stepRunVersion });
    }
    case 'StepRunAwaitingApproval': {
      const s = stepRunOf(state, event.data.stepRunId);
      return withStepRun(state, bump(state.run), { ...s, status: 'waiting_approval', approval: event.data.approval, version: event.data.stepRunVersion });
    }
    case 'StepRunStarted': {
      const s = stepRunOf(state, event.data.stepRunId);
      return withStepRun(state, bump(state.run), { ...s, status: 'running', version: event.data.stepRunVersion, lastStartId: event.data.startId });
    }
    case 'StepRunLost':
    case 'StepRunCompleted':
    case 'StepRunFailed': {
      const s = stepRunOf(state, event.data.stepRunId);
      const status = event.type === 'StepRunLost' ? 'lost' : event.type === 'StepRunCompleted' ? 'completed' : 'failed';
      return withStepRun(state, bump(state.run), { ...s, status, version: event.data.stepRunVersion });
    }
    case 'SecurityAuditEventRecorded':
    case 'TraceAnchorRecorded':
    case 'AuditReceiptIssued':
    case 'ToolExecutionStartBarrierCommitted':
      return { ...state, run: bump(state.run) };
    default: {
      const _exhaustive: never = event;
      throw new Error(`unknown event ${(_exhaustive as { type: string }).type}`);
    }
  }
};
