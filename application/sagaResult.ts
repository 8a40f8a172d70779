import type { AdapterReport, DriverClaim, InspectReport, ToolOutput } from '../domain';
import type { StartOutcome, StoredBarrier } from '../domain/records';

// What one attempt of the saga answers. Apart from the attempt itself (sagaAttempt.ts), so the
// public types load no optional peer (the attempt's telemetry types import @opentelemetry/api).

export interface SagaBase {
  readonly prepared: 'created' | 'existing';
  readonly barrier: StoredBarrier;
}

export type InDoubtWhy =
  /** `start` threw or timed out: the tool may or may not have acted. */
  | 'start_unknown'
  /** The adapter answered but the outcome could not be recorded. */
  | 'record_failed'
  /** An earlier driver may have invoked, and the adapter has neither inspect nor idempotent starts. */
  | 'no_inspect'
  | 'inspect_unknown'
  | 'inspect_running';

export type SagaResult =
  /** The outcome is now a fact: from the adapter's answer (`via: start`) or from inspect. */
  | (SagaBase & {
      readonly status: 'completed' | 'failed';
      readonly invoked: boolean;
      readonly via: 'start' | 'inspect';
      readonly outcome: StartOutcome;
      readonly report: AdapterReport | InspectReport;
      /** The tool's output as the adapter returned it (bounded; never recorded), when it could. */
      readonly output?: ToolOutput;
    })
  /** The attempt already had an outcome fact (replay, or decided by someone else meanwhile). */
  | (SagaBase & { readonly status: 'already_resolved'; readonly invoked: boolean; readonly outcome: StartOutcome })
  /** Another driver holds the attempt's claim: this one did nothing. */
  | (SagaBase & { readonly status: 'claimed_elsewhere'; readonly invoked: false; readonly holder: DriverClaim })
  /** Unknown or unrecordable outcome: recovery lists it, `inspect` may resolve it. */
  | (SagaBase & { readonly status: 'in_doubt'; readonly invoked: boolean; readonly why: InDoubtWhy; readonly error?: { readonly code?: string; readonly message: string } });
