import * as t from 'io-ts';
import { Digest, EpochMillis, Identity, Version, decodeOrThrow, oneOf, strictObject } from './codecs';
import { NoteText, OutcomeReasonCode, TicketRef, noteDigestOf } from './resolution';

export * from './resolution';
import { REPLAY_IDENTITIES, ValidationError, type ReplayIdentity } from './errors';
import type { RunEventType } from './events';
import type { LifecycleCommand } from './lifecycle';
import type { AttemptKey } from './startDecider';

// Recovery of starts whose outcome is unknown (the ADR's follow-up "inspection and manual
// recovery"). An outcome is a new fact appended to the Run stream, never an edit:
// `completed` and `failed` close the attempt, `lost` closes it and allows `lost -> ready` for a
// new attempt at a new StepRun version (R4.4).

export const START_OUTCOME_KINDS = ['completed', 'failed', 'lost'] as const;
export type StartOutcomeKind = (typeof START_OUTCOME_KINDS)[number];
export const StartOutcomeKind = oneOf(START_OUTCOME_KINDS);

export const OUTCOME_EVENT_TYPES = {
  StepRunCompleted: 'completed',
  StepRunFailed: 'failed',
  StepRunLost: 'lost',
} as const satisfies Partial<Record<RunEventType, StartOutcomeKind>>;
export type OutcomeEventType = keyof typeof OUTCOME_EVENT_TYPES;

export const isOutcomeEventType = (type: string): type is OutcomeEventType => Object.prototype.hasOwnProperty.call(OUTCOME_EVENT_TYPES, type);

/** Who decided and why; `requestedAtMs` is the decider's business time (never the commit time). */
export const ResolveOptions = strictObject(
  'ResolveOptions',
  { decidedBy: Identity, reason: OutcomeReasonCode },
  // R10.2: `note` never enters the event; it goes to the redactable side record, bound by digest
  { ticket: TicketRef, note: NoteText, outcomeDigest: Digest, requestedAtMs: EpochMillis },
);
export type ResolveOptions = t.TypeOf<typeof ResolveOptions>;

const ResolveInput = strictObject('Resolve', { startId: Identity, outcome: StartOutcomeKind, options: ResolveOptions });

/** Boundary for `recovery.resolve` (and the CLI's `resolve`): strictly decoded. */
export const decodeResolve = (startId: unknown, outcome: unknown, options: unknown): { startId: string; outcome: StartOutcomeKind; options: ResolveOptions } =>
  decodeOrThrow(ResolveInput, 'resolve request', { startId, outcome, options });

/** The attempt a resolution closes, as named by its verified barrier. */
export interface ResolvedAttempt {
  readonly startId: string;
  readonly runId: string;
  readonly stepRunId: string;
  readonly startedStepRunVersion: number;
}

/**
 * The lifecycle command that records an outcome. It names the start and the StepRun version the
 * start moved it to, so it applies only to exactly that running attempt (R4.4).
 */
export const resolutionCommandOf = (
  attempt: ResolvedAttempt,
  outcome: StartOutcomeKind,
  options: ResolveOptions,
  nowMs: number,
): LifecycleCommand => {
  const base = {
    runId: attempt.runId,
    stepRunId: attempt.stepRunId,
    startId: attempt.startId,
    expectedStepRunVersion: attempt.startedStepRunVersion,
    decidedBy: options.decidedBy,
    reason: options.reason,
    ...(options.ticket === undefined ? {} : { ticket: options.ticket }),
    ...(options.note === undefined ? {} : { noteDigest: noteDigestOf(options.note) }),
    requestedAtMs: options.requestedAtMs ?? nowMs,
  };
  const digest = options.outcomeDigest === undefined ? {} : { outcomeDigest: options.outcomeDigest };
  switch (outcome) {
    case 'completed':
      return { type: 'CompleteStepRun', data: { ...base, ...digest } };
    case 'failed':
      return { type: 'FailStepRun', data: { ...base, ...digest } };
    case 'lost':
      if (options.outcomeDigest !== undefined) {
        throw new ValidationError('resolve request', [
          { path: 'options.outcomeDigest', reason: 'invalid_value', message: 'a lost start has no outcome to digest' },
        ]);
      }
      return { type: 'MarkStepRunLost', data: base };
    default: {
      const _exhaustive: never = outcome;
      throw new Error(`unknown outcome ${String(_exhaustive)}`);
    }
  }
};

// --- lookup by any replay identity (R4.1) ---

const AttemptKeyCodec = strictObject('AttemptKey', { runId: Identity, stepRunId: Identity, startedStepRunVersion: Version });

export type LookupValue = string | AttemptKey;
export type LookupRequest =
  | { readonly identity: Exclude<ReplayIdentity, 'attempt'>; readonly value: string }
  | { readonly identity: 'attempt'; readonly value: AttemptKey };

/** Boundary for `recovery.lookup`: a known identity and a well-formed value for it. */
export const decodeLookup = (identity: unknown, value: unknown): LookupRequest => {
  const id = decodeOrThrow(oneOf(REPLAY_IDENTITIES), 'lookup identity', identity);
  if (id === 'attempt') return { identity: id, value: decodeOrThrow(AttemptKeyCodec, 'attempt', value) };
  return { identity: id, value: decodeOrThrow(Identity, id, value) };
};
