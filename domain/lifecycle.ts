import * as t from 'io-ts';
import type { Command } from '@event-driven-io/emmett';
import { Digest, EpochMillis, Identity, Ref, Version, decodeOrThrow, oneOf, strictObject } from './codecs';
import { ApprovalBinding } from './command';
import { PreconditionError, ValidationError, type ValidationIssue } from './errors';
import { optionalResolutionFields, resolutionFields } from './resolution';
import { STEP_RUN_KINDS, event, type RunStreamEvent } from './events';
import type { RunHead, RunState, StepRunState } from './state';

// The lifecycle orchestration drives around a start (R2.1): the barrier never creates a
// StepRun; these commands do, each decided against the folded Run like any other command.

const at = { requestedAtMs: EpochMillis };
const target = { runId: Identity, stepRunId: Identity };
const optionalExpected = { expectedStepRunVersion: Version };
// R10.2: a code and references only; a person's note is bound by its digest (resolution.ts).
const resolution = resolutionFields;

const lifecycleData = {
  CreateRun: strictObject('CreateRun', { runId: Identity, projectId: Identity, snapshotId: Identity, snapshotDigest: Digest, ...at }),
  CreateStepRun: strictObject('CreateStepRun', { ...target, kind: oneOf(STEP_RUN_KINDS), ...at }, { toolDefinition: Ref }),
  MarkStepRunReady: strictObject('MarkStepRunReady', { ...target, ...at }, optionalExpected),
  AwaitStepRunApproval: strictObject('AwaitStepRunApproval', { ...target, approval: ApprovalBinding, ...at }, optionalExpected),
  MarkStepRunLost: strictObject('MarkStepRunLost', { ...target, ...resolution, ...at }, { ...optionalExpected, ...optionalResolutionFields, startId: Identity }),
  CompleteStepRun: strictObject('CompleteStepRun', { ...target, ...resolution, ...at }, { ...optionalExpected, ...optionalResolutionFields, startId: Identity, outcomeDigest: Digest }),
  FailStepRun: strictObject('FailStepRun', { ...target, ...resolution, ...at }, { ...optionalExpected, ...optionalResolutionFields, startId: Identity, outcomeDigest: Digest }),
} as const;

type LifecycleData = typeof lifecycleData;
export type LifecycleCommandType = keyof LifecycleData;
export const LIFECYCLE_COMMAND_TYPES = Object.keys(lifecycleData) as LifecycleCommandType[];
export type LifecycleCommand = { [K in LifecycleCommandType]: Command<K, t.TypeOf<LifecycleData[K]>> }[LifecycleCommandType];

/**
 * What callers may pass: a lifecycle command, also as emmett's `command(type, data, metadata)`
 * builds it (emmett's `Command` type already has the optional `kind` and `metadata`).
 */
export type LifecycleCommandInput = LifecycleCommand;

const LifecycleEnvelope = strictObject('LifecycleCommand', { type: oneOf(LIFECYCLE_COMMAND_TYPES), data: t.unknown });

/**
 * emmett's envelope around `{ type, data }`: `kind: 'Command'` and `metadata` (its `now` is a
 * Date, not JSON). Both are checked and set aside; time comes from `data.requestedAtMs`. Only
 * a plain object of data properties is unwrapped: anything else (accessors, symbols, other
 * prototypes) goes to the strict decoder unchanged, which rejects it as before.
 */
const withoutEmmettEnvelope = (input: unknown): unknown => {
  if (typeof input !== 'object' || input === null || Object.getPrototypeOf(input) !== Object.prototype) return input;
  const descriptors = Object.getOwnPropertyDescriptors(input);
  if (!('kind' in descriptors) && !('metadata' in descriptors)) return input;
  if (Reflect.ownKeys(descriptors).some((k) => typeof k === 'symbol' || !('value' in descriptors[k as string]!))) return input;
  const { kind, metadata, ...rest } = Object.fromEntries(Object.entries(descriptors).map(([k, d]) => [k, d.value as unknown]));
  const issues: ValidationIssue[] = [];
  if ('kind' in descriptors && kind !== 'Command') issues.push({ path: 'kind', reason: 'invalid_value', message: 'expected "Command" (emmett\'s command envelope) or no kind' });
  if ('metadata' in descriptors && (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata))) {
    issues.push({ path: 'metadata', reason: 'invalid_value', message: 'expected an object (emmett\'s command metadata) or no metadata' });
  }
  if (issues.length > 0) throw new ValidationError('lifecycle command', issues);
  return rest;
};

/** Boundary for lifecycle commands (CLI `apply`, saga): `{ type, data }`, strictly decoded. */
export const decodeLifecycleCommand = (raw: unknown): LifecycleCommand => {
  const input = withoutEmmettEnvelope(raw);
  const envelope = decodeOrThrow(LifecycleEnvelope, 'lifecycle command', input);
  const data = decodeOrThrow(lifecycleData[envelope.type] as t.Type<unknown, unknown, unknown>, `${envelope.type} command`, envelope.data);
  return { type: envelope.type, data } as LifecycleCommand;
};

/** The Run that a lifecycle command names, for routing to its stream. */
export const runIdOf = (c: LifecycleCommand): string => c.data.runId;

const requireRun = (state: RunState, runId: string): RunHead => {
  if (state.run === null || state.run.runId !== runId) throw new PreconditionError('run_not_found', `Run ${runId} does not exist`);
  return state.run;
};

const requireStepRun = (state: RunState, runId: string, stepRunId: string, expected?: number): StepRunState => {
  requireRun(state, runId);
  const s = state.stepRuns[stepRunId];
  if (s === undefined) throw new PreconditionError('step_run_not_found', `StepRun ${stepRunId} does not exist in Run ${runId}`);
  if (expected !== undefined && s.version !== expected) {
    throw new PreconditionError('version_mismatch', `StepRun ${stepRunId} is at version ${s.version}, expected ${expected}`, expected, s.version);
  }
  return s;
};

const requireStatus = (s: StepRunState, allowed: readonly string[], action: string): void => {
  if (!allowed.includes(s.status)) {
    throw new PreconditionError('invalid_transition', `cannot ${action} StepRun ${s.stepRunId} in status ${s.status} (allowed from: ${allowed.join(', ')})`, allowed, s.status);
  }
};

const requireAttempt = (s: StepRunState, startId: string | undefined): string => {
  if (s.lastStartId === undefined) throw new PreconditionError('invalid_transition', `StepRun ${s.stepRunId} has no start`);
  if (startId !== undefined && startId !== s.lastStartId) {
    throw new PreconditionError('invalid_transition', `StepRun ${s.stepRunId} is running start ${s.lastStartId}, not ${startId}`, startId, s.lastStartId);
  }
  return s.lastStartId;
};

export const decideLifecycle = (command: LifecycleCommand, state: RunState): RunStreamEvent[] => {
  switch (command.type) {
    case 'CreateRun': {
      const d = command.data;
      if (state.run !== null) throw new PreconditionError('run_exists', `Run ${d.runId} already exists`);
      return [event('RunCreated', { runId: d.runId, projectId: d.projectId, snapshotId: d.snapshotId, snapshotDigest: d.snapshotDigest, occurredAtMs: d.requestedAtMs })];
    }
    case 'CreateStepRun': {
      const d = command.data;
      requireRun(state, d.runId);
      if (state.stepRuns[d.stepRunId] !== undefined) throw new PreconditionError('step_run_exists', `StepRun ${d.stepRunId} already exists in Run ${d.runId}`);
      if ((d.kind === 'tool') !== (d.toolDefinition !== undefined)) {
        throw new PreconditionError('definition_mismatch', 'a tool StepRun needs a toolDefinition, and only a tool StepRun may have one');
      }
      return [
        event('StepRunCreated', {
          runId: d.runId,
          stepRunId: d.stepRunId,
          kind: d.kind,
          stepRunVersion: 1,
          occurredAtMs: d.requestedAtMs,
          ...(d.toolDefinition ? { toolDefinition: d.toolDefinition } : {}),
        }),
      ];
    }
    case 'MarkStepRunReady': {
      const d = command.data;
      const s = requireStepRun(state, d.runId, d.stepRunId, d.expectedStepRunVersion);
      // `lost -> ready` is the retry path of R4.4: the next start is at a new version.
      requireStatus(s, ['created', 'lost'], 'ready');
      return [event('StepRunReady', { runId: d.runId, stepRunId: d.stepRunId, stepRunVersion: s.version + 1, occurredAtMs: d.requestedAtMs })];
    }
    case 'AwaitStepRunApproval': {
      const d = command.data;
      const s = requireStepRun(state, d.runId, d.stepRunId, d.expectedStepRunVersion);
      requireStatus(s, ['created', 'lost'], 'await approval for');
      return [event('StepRunAwaitingApproval', { runId: d.runId, stepRunId: d.stepRunId, approval: d.approval, stepRunVersion: s.version + 1, occurredAtMs: d.requestedAtMs })];
    }
    case 'MarkStepRunLost':
    case 'CompleteStepRun':
    case 'FailStepRun': {
      const d = command.data;
      const s = requireStepRun(state, d.runId, d.stepRunId, d.expectedStepRunVersion);
      requireStatus(s, ['running'], command.type === 'MarkStepRunLost' ? 'mark lost' : command.type === 'CompleteStepRun' ? 'complete' : 'fail');
      const base = {
        runId: d.runId,
        stepRunId: d.stepRunId,
        startId: requireAttempt(s, d.startId),
        stepRunVersion: s.version + 1,
        resolution: {
          decidedBy: d.decidedBy,
          reason: d.reason,
          ...(d.ticket === undefined ? {} : { ticket: d.ticket }),
          ...(d.noteDigest === undefined ? {} : { noteDigest: d.noteDigest }),
        },
        occurredAtMs: d.requestedAtMs,
      };
      if (command.type === 'MarkStepRunLost') return [event('StepRunLost', base)];
      const outcome = 'outcomeDigest' in d && d.outcomeDigest !== undefined ? { outcomeDigest: d.outcomeDigest } : {};
      return [command.type === 'CompleteStepRun' ? event('StepRunCompleted', { ...base, ...outcome }) : event('StepRunFailed', { ...base, ...outcome })];
    }
    default: {
      const _exhaustive: never = command;
      throw new Error(`unknown lifecycle command ${(_exhaustive as { type: string }).type}`);
    }
  }
};
