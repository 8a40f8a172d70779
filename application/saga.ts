import {
  PreconditionError,
  buildSagaStartCommand,
  decodeAdapterResult,
  decodeToolStepTrigger,
  isStartBarrierError,
  shouldInvoke,
  type AdapterResult,
  type StartPlan,
  type ToolAdapterPort,
} from '../domain';
import { Identity, decodeOrThrow } from '../domain/codecs';
import type { RecoverableStartBarrierAuthority, StartOutcome, StoredBarrier } from './authority';

// The orchestration saga (process manager) for one Tool StepRun attempt, over a real authority
// and an adapter port. The order is the whole point (R3.8): the adapter is reached only after
// `prepare` has returned, i.e. after the start committed, and only while the attempt has no
// outcome fact. The saga holds no state of its own: the barrier and the outcome fact are its
// state, so a replay after a crash or a lost response resumes from what is durable.

export interface ToolStepSagaOptions {
  readonly authority: RecoverableStartBarrierAuthority;
  readonly adapter: ToolAdapterPort;
  /** Recorded as `decidedBy` on the outcome facts this saga appends. */
  readonly sagaId?: string;
  /** Business time of recorded outcomes (never their commit time). */
  readonly clock?: () => number;
}

interface SagaBase {
  readonly prepared: 'created' | 'existing';
  readonly barrier: StoredBarrier;
}

export type SagaResult =
  /** The adapter ran and its outcome is now a fact. */
  | (SagaBase & { readonly status: 'completed' | 'failed'; readonly invoked: true; readonly outcome: StartOutcome; readonly adapterResult: AdapterResult })
  /** The attempt already had an outcome fact (replay, or decided by someone else meanwhile). */
  | (SagaBase & { readonly status: 'already_resolved'; readonly invoked: boolean; readonly outcome: StartOutcome; readonly adapterResult?: AdapterResult })
  /** The adapter was reached but its outcome is unknown or could not be recorded: recovery lists it. */
  | (SagaBase & { readonly status: 'in_doubt'; readonly invoked: true; readonly error: { readonly code?: string; readonly message: string } });

const describe = (e: unknown): { code?: string; message: string } =>
  isStartBarrierError(e) ? { code: e.code, message: e.message } : { message: e instanceof Error ? e.message : String(e) };

export interface ToolStepSaga {
  /**
   * Drive one attempt. A failing `prepare` (validation, precondition, conflict, timeout)
   * rejects with its typed error and the adapter is never reached.
   */
  drive(trigger: unknown, plan: StartPlan): Promise<SagaResult>;
}

export const createToolStepSaga = (options: ToolStepSagaOptions): ToolStepSaga => {
  const { authority, adapter } = options;
  const sagaId = decodeOrThrow(Identity, 'sagaId', options.sagaId ?? 'orchestration-saga');
  const clock = options.clock ?? Date.now;

  return {
    drive: async (input, plan) => {
      const trigger = decodeToolStepTrigger(input);
      const view = await authority.runs.getStepRun(trigger.runId, trigger.stepRunId);
      if (view === null) throw new PreconditionError('step_run_not_found', `StepRun ${trigger.stepRunId} does not exist in Run ${trigger.runId}`);
      const { digest: _digest, ...stepRun } = view;

      const command = buildSagaStartCommand(plan, trigger, stepRun);
      const prepared = await authority.barriers.prepare(command);
      const barrier = prepared.barrier;
      const startId = barrier.record.startId;

      const known = await authority.recovery.outcome(startId);
      if (!shouldInvoke(prepared.outcome, known?.outcome ?? null)) {
        return { status: 'already_resolved', prepared: prepared.outcome, barrier, invoked: false, outcome: known! };
      }

      let adapterResult: AdapterResult;
      try {
        adapterResult = decodeAdapterResult(await adapter.invoke({ barrier: barrier.record, barrierDigest: barrier.barrierDigest, committedAtMs: barrier.committedAtMs }));
      } catch (e) {
        return { status: 'in_doubt', prepared: prepared.outcome, barrier, invoked: true, error: describe(e) };
      }

      try {
        const recorded = await authority.recovery.resolve(startId, adapterResult.outcome, {
          decidedBy: sagaId,
          reason: adapterResult.reason,
          requestedAtMs: clock(),
          ...(adapterResult.outcomeDigest === undefined ? {} : { outcomeDigest: adapterResult.outcomeDigest }),
        });
        if (recorded.outcome.outcome !== adapterResult.outcome) {
          return { status: 'already_resolved', prepared: prepared.outcome, barrier, invoked: true, outcome: recorded.outcome, adapterResult };
        }
        return { status: adapterResult.outcome, prepared: prepared.outcome, barrier, invoked: true, outcome: recorded.outcome, adapterResult };
      } catch (e) {
        // Someone (an operator) may have decided meanwhile; their fact stands, ours is not written.
        const decided = await authority.recovery.outcome(startId).catch(() => null);
        if (decided !== null) return { status: 'already_resolved', prepared: prepared.outcome, barrier, invoked: true, outcome: decided, adapterResult };
        return { status: 'in_doubt', prepared: prepared.outcome, barrier, invoked: true, error: describe(e) };
      }
    },
  };
};
