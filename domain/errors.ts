// Typed errors with stable codes. The code is the contract (CLI exit codes, callers branching);
// the message is for humans and may change.

export type StartBarrierErrorCode =
  | 'VALIDATION_FAILED'
  | 'PRECONDITION_FAILED'
  | 'SEMANTIC_CONFLICT'
  | 'CONCURRENCY_EXHAUSTED'
  | 'TRANSACTION_TIMEOUT'
  | 'CORRUPT_RECORD'
  | 'STORE_UNAVAILABLE'
  | 'EXECUTION_REFUSED'
  | 'START_COMPACTED';

export abstract class StartBarrierError extends Error {
  abstract readonly code: StartBarrierErrorCode;
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
  toJSON(): Record<string, unknown> {
    const { name, message, ...rest } = this as unknown as Record<string, unknown>;
    return { name: this.name, code: this.code, message: this.message, ...rest, stack: undefined };
  }
}

export type ValidationReason =
  | 'invalid_json'
  | 'unknown_field'
  | 'forbidden_field'
  | 'forbidden_value'
  | 'invalid_value'
  | 'too_large'
  | 'too_deep';

export interface ValidationIssue {
  readonly path: string;
  readonly reason: ValidationReason;
  readonly message: string;
}

/** Bad, oversized, unknown or forbidden input (R1.1, R1.2, R1.5). Nothing was written. */
export class ValidationError extends StartBarrierError {
  readonly code = 'VALIDATION_FAILED' as const;
  readonly record: string;
  readonly issues: readonly ValidationIssue[];
  constructor(record: string, issues: readonly ValidationIssue[]) {
    const first = issues[0];
    super(
      `invalid ${record}: ${issues
        .slice(0, 5)
        .map((i) => `${i.path}: ${i.message}`)
        .join('; ')}${issues.length > 5 ? ` (and ${issues.length - 5} more)` : ''}`,
    );
    this.record = record;
    this.issues = issues;
    if (first === undefined) throw new Error('ValidationError needs at least one issue');
  }
  get path(): string {
    return this.issues[0]?.path ?? '';
  }
  get reason(): ValidationReason {
    return this.issues[0]?.reason ?? 'invalid_value';
  }
}

export type PreconditionReason =
  | 'run_not_found'
  | 'run_exists'
  | 'project_mismatch'
  | 'snapshot_mismatch'
  | 'step_run_not_found'
  | 'step_run_exists'
  | 'not_a_tool_step_run'
  | 'status_mismatch'
  | 'version_mismatch'
  | 'digest_mismatch'
  | 'definition_mismatch'
  | 'approval_missing'
  | 'approval_mismatch'
  | 'approval_unexpected'
  | 'invalid_transition'
  /** Recovery: the outcome of this start binds no resolution note (R10.2). */
  | 'note_not_found'
  /** R14.2: the Run was compacted; it takes no new event and its id is never used again. */
  | 'run_compacted'
  /** Recovery: no barrier has this startId. */
  | 'start_not_found'
  /** A start was claimed by drivers as many times as a start may be (R12.3): it is left to recovery. */
  | 'claims_exhausted';

/** The Run or StepRun is not in the state the command expects (R2). Nothing was written. */
export class PreconditionError extends StartBarrierError {
  readonly code = 'PRECONDITION_FAILED' as const;
  constructor(
    readonly reason: PreconditionReason,
    message: string,
    readonly expected?: unknown,
    readonly actual?: unknown,
  ) {
    super(`${reason}: ${message}`);
  }
}

export const REPLAY_IDENTITIES = [
  'startId',
  'mutationId',
  'runEventId',
  'traceId',
  'auditEventId',
  'auditReceiptId',
  'attempt',
] as const;
export type ReplayIdentity = (typeof REPLAY_IDENTITIES)[number];

/** An identity of R4.1 is already bound to a barrier with different content (R4.3). */
export class SemanticConflictError extends StartBarrierError {
  readonly code = 'SEMANTIC_CONFLICT' as const;
  constructor(
    readonly identity: ReplayIdentity,
    readonly value: string,
    readonly existingStartId: string | undefined,
    message?: string,
    /** The fields of a call that differ from the one already bound (runTool), when known. */
    readonly fields?: readonly string[],
  ) {
    super(
      message ??
        (existingStartId === undefined || existingStartId === value
          ? `${identity} ${value} is already bound to a start with different content (R4.3)`
          : `${identity} ${value} is already bound to start ${existingStartId} (R4.3)`),
    );
  }
}

/** Retries of safe-to-retry failures (serialization, deadlock, busy) were used up. */
export class ConcurrencyExhaustedError extends StartBarrierError {
  readonly code = 'CONCURRENCY_EXHAUSTED' as const;
  constructor(
    readonly attempts: number,
    readonly lastCause: string,
  ) {
    super(`gave up after ${attempts} attempts: ${lastCause}`);
  }
}

/**
 * A compare-and-set on a Run, stream or StepRun head matched no row: the state the transaction
 * locked and decided on had moved, and everything rolled back. No retry was attempted; it keeps
 * the code of `ConcurrencyExhaustedError` because a caller answers both the same way (re-read,
 * then decide again).
 */
export class CompareAndSetLostError extends ConcurrencyExhaustedError {
  constructor(
    readonly target: string,
    problem: string,
  ) {
    super(1, problem);
    this.message = `compare-and-set on ${target} lost: ${problem}`;
  }
}

/** A lock, statement or busy timeout fired; the transaction rolled back. */
export class TransactionTimeoutError extends StartBarrierError {
  readonly code = 'TRANSACTION_TIMEOUT' as const;
  constructor(
    /** `deadline`: the operation's overall bound (R13.1) passed before it could finish; nothing was written. */
    readonly timeout: 'lock' | 'statement' | 'idle_in_transaction' | 'busy' | 'deadline',
    message: string,
  ) {
    super(`${timeout} timeout: ${message}`);
  }
}

/** A stored record failed re-verification (R5.3): read failed closed, never a best guess. */
export class CorruptRecordError extends StartBarrierError {
  readonly code = 'CORRUPT_RECORD' as const;
  constructor(
    readonly recordKind: string,
    readonly recordId: string,
    readonly problem: string,
  ) {
    super(`corrupt ${recordKind} ${recordId}: ${problem}`);
  }
}

export type UnavailableReason =
  | 'connection_refused'
  | 'connection_terminated'
  | 'server_shutdown'
  | 'connect_timeout'
  | 'query_timeout'
  | 'disk_full'
  /** A read-only server: a hot standby (0A000 for SERIALIZABLE), read-only transactions (25006). */
  | 'read_only'
  /** The authority (or the pool it runs on) was closed before or while the operation ran. */
  | 'closed'
  /** `requireSynchronousStandby`: the primary has no synchronous standby attached; nothing was written. */
  | 'no_sync_standby';

/**
 * The store cannot be reached or cannot take the write (R9.5, R13.3): refused or lost
 * connection, a server shutting down, a connect or client-side query bound exceeded, a full
 * disk, a read-only server (a standby after a switch), a closed authority, no synchronous
 * standby when one is required. Whether a write in flight committed is unknown; an exact replay
 * answers it (`settleStart`).
 */
export class StoreUnavailableError extends StartBarrierError {
  readonly code = 'STORE_UNAVAILABLE' as const;
  constructor(
    readonly reason: UnavailableReason,
    message: string,
  ) {
    super(`store unavailable (${reason}): ${message}`);
  }
}

export type ExecutionRefusal =
  | 'execution_disabled'
  | 'adapter_contract_unmet'
  | 'adapter_mismatch'
  | 'plan_mismatch'
  /** A gate of execution does not hold (the message names it): no plan store, no plan key. */
  | 'gate_missing'
  /** The value given to an adapter is not a ticket the library minted. */
  | 'ticket_refused'
  /** The ticket's authority or execution was closed since it was minted. */
  | 'ticket_expired'
  /** A minted ticket for another start, attempt, adapter or use. */
  | 'ticket_mismatch'
  /** No sealed plan to run from: never sealed, shredded, or its key destroyed. */
  | 'plan_unavailable';

/** R11.3: the saga refused to invoke an adapter. Nothing was invoked. */
export class ExecutionRefusedError extends StartBarrierError {
  readonly code = 'EXECUTION_REFUSED' as const;
  constructor(
    readonly reason: ExecutionRefusal,
    message: string,
  ) {
    super(`${reason}: ${message}`);
  }
}

/**
 * R14.2: the start was committed and its Run later compacted (retention). An exact replay of it
 * answers this, never `created`: its identities stay bound, its barrier is kept only as the
 * digest the Run's compaction record binds. Nothing was written.
 */
export class StartCompactedError extends StartBarrierError {
  readonly code = 'START_COMPACTED' as const;
  constructor(
    readonly startId: string,
    readonly runId: string,
    readonly barrierDigest: string,
    readonly compactionDigest: string,
  ) {
    super(`start ${startId} was committed and its Run ${runId} compacted; its barrier digest ${barrierDigest} is bound by compaction record ${compactionDigest} (R14.2)`);
  }
}

export const isStartBarrierError = (e: unknown): e is StartBarrierError => e instanceof StartBarrierError;
