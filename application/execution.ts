import { ExecutionRefusedError, PreconditionError, ValidationError, type DriverClaims, type ExecutionTicket, type InvocationPlan, type Ref } from '../domain';
import type { RecoverableStartBarrierAuthority } from './authority';
import type { PrepareResult, StartOutcome, StoredBarrier } from '../domain/records';
import { openedPlanOf, type InvocationPlanRow, type InvocationPlans, type OpenedPlan } from './invocationPlans';

// Execution is minted, not asserted (R12.1, R12.4). An authority's backend registers, when it
// is opened, what execution needs from it: its own verified barrier read, its open state, its
// driver claims (on its own connection) and its plan store. Only an authority registered here
// can be opened for execution, only `openExecution` makes an execution authority, and only an
// open execution authority mints tickets. Tickets and opened plans are known by identity
// (module-private WeakMaps): a value of the same shape built anywhere else is refused.

/** What a backend gives execution, captured when the authority is opened (later monkey-patching changes nothing). */
export interface ExecutionPort {
  /** The backend's verified read of a committed barrier (R5.3). */
  readBarrier(startId: string): Promise<StoredBarrier | null>;
  outcome(startId: string): Promise<StartOutcome | null>;
  isOpen(): boolean;
  /** Driver claims through the authority's own connection. */
  claims(): DriverClaims;
  readonly plans: InvocationPlans;
  /** `barriers.prepare` with the start's sealed plan written in the start's own transaction (R12.2). */
  prepare(command: unknown, sealed: InvocationPlanRow): Promise<PrepareResult>;
}

/** A backend's prepare that also writes the start's sealed plan, given to execution only (never on the public surface). */
export type SealedPrepare = (command: unknown, sealed: InvocationPlanRow) => Promise<PrepareResult>;

const ports = new WeakMap<object, ExecutionPort>();

/** Called by each backend's opener for the authority it made (never by a caller). */
export const registerExecutionPort = (authority: object, port: ExecutionPort): void => {
  ports.set(authority, port);
};

/**
 * Register an authority its opener just made: its verified read, outcome read and claims are
 * captured now, so replacing them on the object later changes nothing execution sees.
 */
export const registerAuthority = (authority: RecoverableStartBarrierAuthority, isOpen: () => boolean, plans: InvocationPlans, prepare: SealedPrepare): void => {
  const read = authority.barriers.getByStartId;
  const outcome = authority.recovery.outcome;
  const claims = authority.driverClaims;
  registerExecutionPort(authority, { readBarrier: (id) => read(id), outcome: (id) => outcome(id), isOpen, claims: () => claims.call(authority), plans, prepare });
};

export const executionPortOf = (authority: unknown): ExecutionPort | undefined => (typeof authority === 'object' && authority !== null ? ports.get(authority) : undefined);

interface TicketState {
  readonly ticket: ExecutionTicket;
  readonly planDigest: string;
  live(): boolean;
}
const tickets = new WeakMap<object, TicketState>();

const deepFreeze = <T>(value: T): T => {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
};

const mint = (stored: StoredBarrier, use: ExecutionTicket['use'], live: () => boolean): ExecutionTicket => {
  const record = deepFreeze(structuredClone(stored.record));
  const ticket: ExecutionTicket = Object.freeze({
    barrier: record,
    barrierDigest: stored.barrierDigest,
    committedAtMs: stored.committedAtMs,
    timeoutMs: record.admission.timeoutMs,
    startId: record.startId,
    attempt: record.attempt.startedStepRunVersion,
    adapter: record.contracts.adapter,
    use,
  });
  tickets.set(ticket, { ticket, planDigest: record.admission.planDigest, live });
  return ticket;
};

/**
 * The check at the top of every adapter's `start` and `inspect`, before any I/O: the value is
 * a ticket this library minted, still live, for this adapter (and, to start, for execution,
 * with a plan the library opened for the ticket's own start). Returns the ticket as minted.
 */
export const admitTicket = (value: unknown, adapter: Ref, use: 'start' | 'inspect', plan?: InvocationPlan): ExecutionTicket => {
  const state = typeof value === 'object' && value !== null ? tickets.get(value) : undefined;
  if (state === undefined) throw new ExecutionRefusedError('ticket_refused', 'an adapter acts only on a ticket the library minted from a committed barrier (openExecution)');
  if (!state.live()) throw new ExecutionRefusedError('ticket_expired', `the ticket for start ${state.ticket.startId} outlived its execution authority (closed)`);
  const t = state.ticket;
  if (t.adapter.id !== adapter.id || t.adapter.digest !== adapter.digest) throw new ExecutionRefusedError('ticket_mismatch', `the ticket for start ${t.startId} is for adapter ${t.adapter.id}, not ${adapter.id}`);
  if (use === 'start') {
    if (t.use !== 'execute') throw new ExecutionRefusedError('ticket_mismatch', `the ticket for start ${t.startId} allows inspect only`);
    const opened = openedPlanOf(plan);
    if (opened === undefined) throw new ExecutionRefusedError('plan_unavailable', `start ${t.startId} runs only from its sealed invocation plan, opened by the library`);
    if (opened.startId !== t.startId || opened.planDigest !== state.planDigest) throw new ExecutionRefusedError('ticket_mismatch', `the plan was opened for start ${opened.startId}, the ticket is for start ${t.startId}`);
  }
  return t;
};

/**
 * A read-only ticket for an operator's `inspect` (CLI in-doubt/inspect): minted from a verified
 * read by a registered authority, for the adapter the barrier names, live while it is open.
 * It never starts anything.
 */
export const inspectionTicket = async (authority: RecoverableStartBarrierAuthority, startId: string): Promise<ExecutionTicket> => {
  const port = executionPortOf(authority);
  if (port === undefined) throw new ExecutionRefusedError('execution_disabled', 'only an authority opened by this library mints tickets');
  const stored = await port.readBarrier(startId);
  if (stored === null) throw new PreconditionError('start_not_found', `no start barrier has startId ${startId}`);
  return mint(stored, 'inspect', () => port.isOpen());
};

// ------------------------------------------------------------------ the execution authority

export interface ExecutionOptions {
  readonly execution: 'enabled';
  /** Where the claims live (default: beside the authority's own records, on its own connection). */
  readonly claims?: DriverClaims;
}

/** Options of the saga and of execution: an object with known keys only (VALIDATION_FAILED naming the first other one). */
export const refuseUnknown = (record: string, options: unknown, known: readonly string[], prefix = ''): void => {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new ValidationError(record, [{ path: prefix.slice(0, -1), reason: 'invalid_value', message: 'must be an object' }]);
  }
  const unknown = Object.keys(options).find((k) => !known.includes(k));
  if (unknown !== undefined) throw new ValidationError(record, [{ path: `${prefix}${unknown}`, reason: 'unknown_field', message: `unknown option (known: ${known.join(', ')})` }]);
};

const executions = new WeakSet<object>();

/**
 * Execution opened explicitly on an authority (R11.3, R12.4): the only source of tickets. Its
 * state is private; a value of the same shape is refused by the saga and mints nothing.
 */
export class ExecutionAuthority {
  readonly #port: ExecutionPort;
  readonly #claims: DriverClaims;
  #open = true;

  /** @internal made by openExecution only (a direct `new` is refused: it is not registered). */
  constructor(
    readonly authority: RecoverableStartBarrierAuthority,
    port: ExecutionPort,
    claims: DriverClaims,
  ) {
    this.#port = port;
    this.#claims = claims;
  }

  get executionEnabled(): true {
    return true;
  }

  get claims(): DriverClaims {
    return this.#claims;
  }

  /** Whether tickets minted here still act: made by openExecution, and it and its authority are both open. */
  get open(): boolean {
    return executions.has(this) && this.#open && this.#port.isOpen();
  }

  /**
   * Mint a ticket for one start, from a verified read of its committed barrier: for that
   * attempt and that adapter only. PRECONDITION_FAILED if the start is unknown; EXECUTION_REFUSED
   * (ticket_mismatch) if the barrier names another attempt or adapter, or the attempt already
   * has an outcome.
   */
  async ticket(request: { readonly startId: string; readonly attempt: number; readonly adapter: Ref }): Promise<ExecutionTicket> {
    if (!executions.has(this)) throw new ExecutionRefusedError('execution_disabled', 'only an execution authority made by openExecution mints tickets');
    if (!this.open) throw new ExecutionRefusedError('ticket_expired', 'this execution authority is closed');
    const stored = await this.#port.readBarrier(request.startId);
    if (stored === null) throw new PreconditionError('start_not_found', `no start barrier has startId ${request.startId}`);
    const r = stored.record;
    if (r.attempt.startedStepRunVersion !== request.attempt) throw new ExecutionRefusedError('ticket_mismatch', `start ${r.startId} is attempt ${r.attempt.startedStepRunVersion}, not ${request.attempt}`);
    if (r.contracts.adapter.id !== request.adapter.id || r.contracts.adapter.digest !== request.adapter.digest) {
      throw new ExecutionRefusedError('ticket_mismatch', `start ${r.startId} names adapter ${r.contracts.adapter.id}, not ${request.adapter.id}`);
    }
    if ((await this.#port.outcome(r.startId)) !== null) throw new ExecutionRefusedError('ticket_mismatch', `start ${r.startId} already has its outcome`);
    return mint(stored, 'execute', () => this.open);
  }

  /** Open the sealed invocation plan of a committed start (fails closed: CORRUPT_RECORD; shredded: plan_unavailable). */
  async openPlan(stored: StoredBarrier): Promise<OpenedPlan> {
    if (!executions.has(this)) throw new ExecutionRefusedError('execution_disabled', 'only an execution authority made by openExecution opens plans');
    if (!this.open) throw new ExecutionRefusedError('ticket_expired', 'this execution authority is closed');
    return this.#port.plans.open(stored.record.startId, stored.record.admission.planDigest);
  }

  /** @internal the backend's port, for the saga. */
  static portOf(execution: unknown): ExecutionPort | undefined {
    return execution instanceof ExecutionAuthority && executions.has(execution) ? execution.#port : undefined;
  }

  async close(): Promise<void> {
    if (!this.#open) return;
    this.#open = false;
    await this.#claims.close();
  }

  toJSON(): Record<string, unknown> {
    return { executionEnabled: true, backend: this.authority.backend, open: this.open };
  }
}

export const isExecutionAuthority = (value: unknown): value is ExecutionAuthority => ExecutionAuthority.portOf(value) !== undefined;

export const openExecution = (authority: RecoverableStartBarrierAuthority, options: ExecutionOptions): ExecutionAuthority => {
  if ((options as { execution?: unknown } | undefined)?.execution !== 'enabled') {
    throw new ExecutionRefusedError('execution_disabled', "execution must be opened with { execution: 'enabled' }");
  }
  refuseUnknown('openExecution options', options, ['execution', 'claims']);
  const given = options.claims as Partial<Record<keyof DriverClaims, unknown>> | undefined;
  if (given !== undefined && (typeof given !== 'object' || given === null || !(['claim', 'release', 'history', 'close'] as const).every((m) => typeof given[m] === 'function'))) {
    throw new ValidationError('openExecution options', [{ path: 'claims', reason: 'invalid_value', message: 'must be a DriverClaims store (claim, release, history and close)' }]);
  }
  const port = executionPortOf(authority);
  if (port === undefined) throw new ExecutionRefusedError('execution_disabled', 'execution opens only on an authority this library opened (openSqliteStartBarrier, openPostgresStartBarrier, openMemoryStartBarrier)');
  if (!port.isOpen()) throw new ExecutionRefusedError('execution_disabled', 'the authority is closed');
  // R12.4: the gates. Without a keyed plan store the tool input could not be sealed, re-driven or shredded.
  if (!port.plans.keyed) throw new ExecutionRefusedError('gate_missing', 'gate plans.keyring: execution needs a plan store with a key (open the authority with plans: { keyring })');
  const execution = new ExecutionAuthority(authority, port, options.claims ?? port.claims());
  executions.add(execution);
  return execution;
};
