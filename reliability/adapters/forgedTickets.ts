import { ExecutionRefusedError, attemptIdsOf, type ToolAdapter } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import { createToolStepSaga, openExecution, type ExecutionAuthority } from '../../application/saga';
import type { BackendName } from '../../testkit/rawSql';
import { adapterFor, executionClassOf, type AdapterConfig, type AdapterName } from '../../testkit/adapters/fixtures';
import { readyToolCall, type ToolCall } from '../../testkit/adapters/toolCall';
import type { EffectsFile } from '../../testkit/adapters/tools';

// Forged tickets, per real adapter (R12.1): an adapter acts only on a ticket the library minted
// from a committed barrier, for that start, attempt and adapter, while its execution authority
// is open. Each forgery is handed to the adapter's own `start` (and `inspect`): a barrier-shaped
// object, a hand-made execution object, a copy of a ticket, a ticket for another start, for an
// earlier attempt of the StepRun, for another adapter, and a ticket after close(). Side effects
// are counted on the tool's side (its effects file, and the requests an HTTP tool received):
// every forgery must be EXECUTION_REFUSED with none.

export interface ForgedTicketCounts {
  readonly backend: BackendName;
  readonly adapter: AdapterName;
  /** Forgeries handed to the adapter's start and inspect. */
  readonly tried: number;
  /** ... refused with EXECUTION_REFUSED. */
  readonly refused: number;
  /** Side effects the tool made for any start a forgery named, and requests an HTTP tool received. */
  readonly sideEffects: number;
}

export interface ForgeryTools {
  readonly dir: string;
  effectsOf(adapter: AdapterName): EffectsFile;
  configOf(adapter: AdapterName): AdapterConfig;
  /** Requests the local HTTP tools received so far (an HTTP forgery must add none). */
  requests(): number;
}

/** A start committed with its plan sealed; the saga stops before any claim or adapter. */
const sealedNotRun = async (execution: ExecutionAuthority, adapter: ToolAdapter, call: ToolCall): Promise<{ call: ToolCall; startId: string }> => {
  const stop = new Error('stopped after the plan was sealed');
  const stopped = await createToolStepSaga({ execution, adapter, hooks: { afterSeal: () => Promise.reject(stop) } })
    .drive(call.trigger, call.plan, call.invocation)
    .catch((e: unknown) => e);
  if (stopped !== stop) throw new Error(`the forgery fixture did not stop after the seal: ${String(stopped)}`);
  return { call, startId: attemptIdsOf(call.scenario.runId, call.scenario.stepRunId, call.trigger.stepRunVersion + 1).startId };
};

export const runForgedTickets = async (
  backend: BackendName,
  authority: RecoverableStartBarrierAuthority,
  execution: ExecutionAuthority,
  tools: ForgeryTools,
  adapters: readonly AdapterName[],
): Promise<{ counts: ForgedTicketCounts[]; failures: string[] }> => {
  const failures: string[] = [];
  const counts: ForgedTicketCounts[] = [];
  for (const name of adapters) {
    const adapter = adapterFor(tools.configOf(name));
    const fresh = async (kind: AdapterName) => sealedNotRun(execution, adapterFor(tools.configOf(kind)), await readyToolCall(authority, executionClassOf(kind), { forged: name }, 30_000));
    const mine = await fresh(name);
    const other = await fresh(name);
    const foreign = await fresh(name === 'process' ? 'http' : 'process');
    const barrierOf = async (startId: string) => (await authority.barriers.getByStartId(startId))!;
    const ticketOf = async (x: { startId: string }, e: ExecutionAuthority = execution) => {
      const b = await barrierOf(x.startId);
      return e.ticket({ startId: x.startId, attempt: b.record.attempt.startedStepRunVersion, adapter: b.record.contracts.adapter });
    };
    const plan = await execution.openPlan(await barrierOf(mine.startId));
    const ticket = await ticketOf(mine);
    // a ticket for `other`'s attempt, which is then lost and retried: the retry's plan with the earlier ticket
    const earlier = await ticketOf(other);
    const { runId, stepRunId } = other.call.scenario;
    await authority.recovery.resolve(other.startId, 'lost', { decidedBy: 'reliability-forgery', reason: 'no_trace_of_tool' });
    const { events } = await authority.runs.handle({ type: 'MarkStepRunReady', data: { runId, stepRunId, requestedAtMs: 5 } });
    const version = (events[0]!.event.data as { stepRunVersion: number }).stepRunVersion;
    const retry = await sealedNotRun(execution, adapter, { ...other.call, trigger: { ...other.call.trigger, stepRunVersion: version } });
    const retryPlan = await execution.openPlan(await barrierOf(retry.startId));
    const closing = openExecution(authority, { execution: 'enabled' });
    const stale = { ticket: await ticketOf(mine, closing), plan: await closing.openPlan(await barrierOf(mine.startId)) };
    await closing.close();
    const foreignTicket = await ticketOf(foreign);
    const foreignPlan = await execution.openPlan(await barrierOf(foreign.startId));
    const claims = authority.driverClaims();
    const b = await barrierOf(mine.startId);
    const forgeries: (() => Promise<unknown>)[] = [
      () => adapter.start({ barrier: b.record, barrierDigest: b.barrierDigest, committedAtMs: b.committedAtMs, timeoutMs: 5000 } as never, plan),
      () => adapter.start({ authority, executionEnabled: true, claims } as never, plan),
      () => adapter.start({ ...ticket }, plan),
      () => adapter.start(earlier, plan),
      () => adapter.start(earlier, retryPlan),
      () => adapter.start(foreignTicket, foreignPlan),
      () => adapter.start(stale.ticket, stale.plan),
      () => adapter.start(ticket, mine.call.invocation),
      ...(adapter.inspect === undefined ? [] : [() => adapter.inspect!({ ...ticket }), () => adapter.inspect!(foreignTicket), () => adapter.inspect!(stale.ticket)]),
    ];
    const requestsBefore = tools.requests();
    let refused = 0;
    try {
      for (const [i, forge] of forgeries.entries()) {
        const e = await forge().then(() => undefined, (x: unknown) => x);
        if (e instanceof ExecutionRefusedError) refused++;
        else failures.push(`${backend} ${name} forged ticket ${i}: ${e === undefined ? 'the adapter acted' : `not refused (${String(e)})`}`);
      }
    } finally {
      await claims.close();
    }
    const effects = tools.effectsOf(name);
    const foreignEffects = tools.effectsOf(name === 'process' ? 'http' : 'process');
    const sideEffects = [mine, other, retry].reduce((s, x) => s + effects.count(x.startId), 0) + foreignEffects.count(foreign.startId) + (tools.requests() - requestsBefore);
    if (sideEffects > 0) failures.push(`${backend} ${name}: ${sideEffects} side effects from forged tickets`);
    counts.push({ backend, adapter: name, tried: forgeries.length, refused, sideEffects });
    // leave nothing in doubt behind: these starts never ran
    for (const x of [mine, retry, foreign]) await authority.recovery.resolve(x.startId, 'lost', { decidedBy: 'reliability-forgery', reason: 'no_trace_of_tool' });
  }
  return { counts, failures };
};
