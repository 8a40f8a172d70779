import { expect } from 'chai';
import {
  PreconditionError,
  RECORD_TAGS,
  digestOf,
  event,
  startToolExecution,
  stepRunDigest,
  type ApprovalBinding,
  type LifecycleCommand,
  type RunStreamEvent,
} from '../../domain';
import { foldEvents, given, historyOf, preconditionFailed } from '../../testkit/deciderSpec';
import { scenarioWithHistory, stepRunAfter } from '../../testkit/domainFixtures';

const AT = 1_780_000_000_000;
const runId = 'run-life';
const stepRunId = 'step-life';
const projectId = 'project-life';
const toolDefinition = { id: 'tool-def-life', digest: digestOf(RECORD_TAGS.command, { definition: 'life' }) };
const approval: ApprovalBinding = {
  approvalRequestId: 'approval-life',
  dispatchId: 'dispatch-life',
  approvalDigest: digestOf(RECORD_TAGS.command, { approval: 'life' }),
};
const outcomeDigest = digestOf(RECORD_TAGS.command, { outcome: 'life' });

const createRun: LifecycleCommand = {
  type: 'CreateRun',
  data: { runId, projectId, snapshotId: 'snapshot-life', snapshotDigest: digestOf(RECORD_TAGS.command, { snapshot: 'life' }), requestedAtMs: AT },
};
const createToolStepRun: LifecycleCommand = { type: 'CreateStepRun', data: { runId, stepRunId, kind: 'tool', toolDefinition, requestedAtMs: AT } };
const markReady = (requestedAtMs = AT): LifecycleCommand => ({ type: 'MarkStepRunReady', data: { runId, stepRunId, requestedAtMs } });
const awaitApproval = (binding: ApprovalBinding = approval): LifecycleCommand => ({
  type: 'AwaitStepRunApproval',
  data: { runId, stepRunId, approval: binding, requestedAtMs: AT },
});
const resolution = { decidedBy: 'operator-7', reason: 'worker_lost' } as const;

const runCreated = historyOf([createRun]);
const stepRunCreated = historyOf([createToolStepRun], runCreated);

/** A real running attempt: the lifecycle of a scenario plus its start, decided for real. */
const runningScenario = () => {
  const { scenario, history } = scenarioWithHistory({ prefix: 'life-run', requestedAtMs: AT });
  const command = scenario.startCommand();
  const events = historyOf([startToolExecution(command)], history);
  return { scenario, command, events };
};

describe('R2.1 lifecycle: orchestration creates the StepRun and moves it to ready or waiting_approval', () => {
  it('R2.1 CreateRun on an empty stream records RunCreated with the business time', () => {
    given()
      .when(createRun)
      .thenExactly([
        event('RunCreated', {
          runId,
          projectId,
          snapshotId: 'snapshot-life',
          snapshotDigest: digestOf(RECORD_TAGS.command, { snapshot: 'life' }),
          occurredAtMs: AT,
        }),
      ]);
    expect(foldEvents(runCreated).run).to.deep.equal({
      runId,
      projectId,
      snapshotId: 'snapshot-life',
      snapshotDigest: digestOf(RECORD_TAGS.command, { snapshot: 'life' }),
      version: 1,
    });
  });

  it('R2.1 CreateRun on an existing Run is refused (run_exists)', () => {
    given(...runCreated).when(createRun).thenThrows(PreconditionError, preconditionFailed('run_exists'));
  });

  it('R2.1 CreateStepRun creates a Tool StepRun at version 1 bound to its Tool Definition', () => {
    given(...runCreated)
      .when(createToolStepRun)
      .thenExactly([event('StepRunCreated', { runId, stepRunId, kind: 'tool', stepRunVersion: 1, occurredAtMs: AT, toolDefinition })]);
    expect(stepRunAfter(stepRunCreated, stepRunId)).to.deep.equal({
      runId,
      stepRunId,
      projectId,
      kind: 'tool',
      status: 'created',
      version: 1,
      toolDefinition,
    });
  });

  it('R2.1 CreateStepRun needs the Run (run_not_found) and a fresh StepRun id (step_run_exists)', () => {
    given().when(createToolStepRun).thenThrows(PreconditionError, preconditionFailed('run_not_found'));
    given(...runCreated)
      .when({ type: 'CreateStepRun', data: { runId: 'run-other', stepRunId, kind: 'tool', toolDefinition, requestedAtMs: AT } })
      .thenThrows(PreconditionError, preconditionFailed('run_not_found'));
    given(...stepRunCreated).when(createToolStepRun).thenThrows(PreconditionError, preconditionFailed('step_run_exists'));
  });

  it('R2.1 a Tool StepRun must name a Tool Definition and only a Tool StepRun may (definition_mismatch)', () => {
    given(...runCreated)
      .when({ type: 'CreateStepRun', data: { runId, stepRunId, kind: 'tool', requestedAtMs: AT } })
      .thenThrows(PreconditionError, preconditionFailed('definition_mismatch'));
    given(...runCreated)
      .when({ type: 'CreateStepRun', data: { runId, stepRunId, kind: 'llm', toolDefinition, requestedAtMs: AT } })
      .thenThrows(PreconditionError, preconditionFailed('definition_mismatch'));
    given(...runCreated)
      .when({ type: 'CreateStepRun', data: { runId, stepRunId, kind: 'llm', requestedAtMs: AT } })
      .thenExactly([event('StepRunCreated', { runId, stepRunId, kind: 'llm', stepRunVersion: 1, occurredAtMs: AT })]);
  });

  it('R2.1 MarkStepRunReady moves created -> ready at the next StepRun version', () => {
    given(...stepRunCreated)
      .when(markReady(AT + 5))
      .thenExactly([event('StepRunReady', { runId, stepRunId, stepRunVersion: 2, occurredAtMs: AT + 5 })]);
    const ready = historyOf([markReady()], stepRunCreated);
    expect(stepRunAfter(ready, stepRunId)).to.include({ status: 'ready', version: 2 });
    expect(foldEvents(ready).run?.version).to.equal(3);
  });

  it('R2.1 MarkStepRunReady checks the optional expected version (version_mismatch) and the StepRun (step_run_not_found)', () => {
    given(...stepRunCreated)
      .when({ type: 'MarkStepRunReady', data: { runId, stepRunId, expectedStepRunVersion: 2, requestedAtMs: AT } })
      .thenThrows(PreconditionError, (e) => {
        preconditionFailed('version_mismatch')(e);
        expect(e.expected).to.equal(2);
        expect(e.actual).to.equal(1);
        return true;
      });
    given(...stepRunCreated)
      .when({ type: 'MarkStepRunReady', data: { runId, stepRunId, expectedStepRunVersion: 1, requestedAtMs: AT } })
      .thenExactly([event('StepRunReady', { runId, stepRunId, stepRunVersion: 2, occurredAtMs: AT })]);
    given(...runCreated).when(markReady()).thenThrows(PreconditionError, preconditionFailed('step_run_not_found'));
    given().when(markReady()).thenThrows(PreconditionError, preconditionFailed('run_not_found'));
  });

  it('R2.1 ready is reachable only from created or lost (invalid_transition)', () => {
    given(...historyOf([markReady()], stepRunCreated)).when(markReady()).thenThrows(PreconditionError, preconditionFailed('invalid_transition'));
    given(...historyOf([awaitApproval()], stepRunCreated)).when(markReady()).thenThrows(PreconditionError, preconditionFailed('invalid_transition'));
  });

  it('R2.1 AwaitStepRunApproval binds the StepRun to an exact approval request; the binding is part of its digest', () => {
    given(...stepRunCreated)
      .when(awaitApproval())
      .thenExactly([event('StepRunAwaitingApproval', { runId, stepRunId, approval, stepRunVersion: 2, occurredAtMs: AT })]);
    const waiting = stepRunAfter(historyOf([awaitApproval()], stepRunCreated), stepRunId);
    expect(waiting).to.include({ status: 'waiting_approval', version: 2 });
    expect(waiting.approval).to.deep.equal(approval);
    const otherApproval = stepRunAfter(historyOf([awaitApproval({ ...approval, dispatchId: 'dispatch-other' })], stepRunCreated), stepRunId);
    expect(stepRunDigest(waiting)).not.to.equal(stepRunDigest(otherApproval));
  });

  it('R2.1 AwaitStepRunApproval from ready or waiting_approval is an invalid_transition', () => {
    given(...historyOf([markReady()], stepRunCreated)).when(awaitApproval()).thenThrows(PreconditionError, preconditionFailed('invalid_transition'));
    given(...historyOf([awaitApproval()], stepRunCreated)).when(awaitApproval()).thenThrows(PreconditionError, preconditionFailed('invalid_transition'));
  });

  it('R4.4 MarkStepRunLost moves a running attempt to lost, naming the start it lost', () => {
    const { scenario, command, events } = runningScenario();
    const lost: LifecycleCommand = {
      type: 'MarkStepRunLost',
      data: { runId: scenario.runId, stepRunId: scenario.stepRunId, ...resolution, startId: command.startId, requestedAtMs: AT + 9 },
    };
    given(...events)
      .when(lost)
      .thenExactly([
        event('StepRunLost', {
          runId: scenario.runId,
          stepRunId: scenario.stepRunId,
          startId: command.startId,
          stepRunVersion: 4,
          resolution,
          occurredAtMs: AT + 9,
        }),
      ]);
    expect(stepRunAfter(historyOf([lost], events), scenario.stepRunId)).to.include({ status: 'lost', version: 4, lastStartId: command.startId });
  });

  it('R4.4 MarkStepRunLost is refused for a StepRun that is not running, or for another start', () => {
    const { scenario, history } = scenarioWithHistory({ prefix: 'life-ready', requestedAtMs: AT });
    const lostOf = (startId?: string): LifecycleCommand => ({
      type: 'MarkStepRunLost',
      data: { runId: scenario.runId, stepRunId: scenario.stepRunId, ...resolution, ...(startId ? { startId } : {}), requestedAtMs: AT },
    });
    given(...history).when(lostOf()).thenThrows(PreconditionError, preconditionFailed('invalid_transition'));
    const running = runningScenario();
    given(...running.events)
      .when({
        type: 'MarkStepRunLost',
        data: { runId: running.scenario.runId, stepRunId: running.scenario.stepRunId, ...resolution, startId: 'start-someone-else', requestedAtMs: AT },
      })
      .thenThrows(PreconditionError, preconditionFailed('invalid_transition'));
  });

  it('R4.4 lost -> ready again for a retry, at the next StepRun version, with no approval carried over', () => {
    const { scenario, events } = runningScenario();
    const lost = historyOf(
      [{ type: 'MarkStepRunLost', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, ...resolution, requestedAtMs: AT } }],
      events,
    );
    given(...lost)
      .when({ type: 'MarkStepRunReady', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, expectedStepRunVersion: 4, requestedAtMs: AT } })
      .thenExactly([event('StepRunReady', { runId: scenario.runId, stepRunId: scenario.stepRunId, stepRunVersion: 5, occurredAtMs: AT })]);
    const { approval: _none, lastStartId: _last, ...retry } = stepRunAfter(
      historyOf([{ type: 'MarkStepRunReady', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, requestedAtMs: AT } }], lost),
      scenario.stepRunId,
    );
    expect(retry).to.deep.equal({ ...scenario.stepRun, status: 'ready', version: 5 });
  });

  it('R4.4 lost -> waiting_approval for a retry that needs a fresh approval', () => {
    const { scenario, events } = runningScenario();
    const lost = historyOf(
      [{ type: 'MarkStepRunLost', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, ...resolution, requestedAtMs: AT } }],
      events,
    );
    given(...lost)
      .when({ type: 'AwaitStepRunApproval', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, approval, requestedAtMs: AT } })
      .thenExactly([event('StepRunAwaitingApproval', { runId: scenario.runId, stepRunId: scenario.stepRunId, approval, stepRunVersion: 5, occurredAtMs: AT })]);
  });

  it('R2.1 CompleteStepRun and FailStepRun record the outcome of the running attempt', () => {
    const { scenario, command, events } = runningScenario();
    given(...events)
      .when({
        type: 'CompleteStepRun',
        data: { runId: scenario.runId, stepRunId: scenario.stepRunId, ...resolution, outcomeDigest, requestedAtMs: AT + 1 },
      })
      .thenExactly([
        event('StepRunCompleted', {
          runId: scenario.runId,
          stepRunId: scenario.stepRunId,
          startId: command.startId,
          stepRunVersion: 4,
          resolution,
          occurredAtMs: AT + 1,
          outcomeDigest,
        }),
      ]);
    given(...events)
      .when({ type: 'FailStepRun', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, ...resolution, requestedAtMs: AT + 2 } })
      .thenExactly([
        event('StepRunFailed', {
          runId: scenario.runId,
          stepRunId: scenario.stepRunId,
          startId: command.startId,
          stepRunVersion: 4,
          resolution,
          occurredAtMs: AT + 2,
        }),
      ]);
  });

  it('R2.1 completed and failed are terminal: no ready, lost, approval or second outcome after them', () => {
    const { scenario, events } = runningScenario();
    const target = { runId: scenario.runId, stepRunId: scenario.stepRunId };
    for (const type of ['CompleteStepRun', 'FailStepRun'] as const) {
      const ended = historyOf([{ type, data: { ...target, ...resolution, requestedAtMs: AT } }], events);
      expect(stepRunAfter(ended, scenario.stepRunId).status).to.equal(type === 'CompleteStepRun' ? 'completed' : 'failed');
      const next: LifecycleCommand[] = [
        { type: 'MarkStepRunReady', data: { ...target, requestedAtMs: AT } },
        { type: 'AwaitStepRunApproval', data: { ...target, approval, requestedAtMs: AT } },
        { type: 'MarkStepRunLost', data: { ...target, ...resolution, requestedAtMs: AT } },
        { type: 'CompleteStepRun', data: { ...target, ...resolution, requestedAtMs: AT } },
        { type: 'FailStepRun', data: { ...target, ...resolution, requestedAtMs: AT } },
      ];
      for (const command of next) given(...ended).when(command).thenThrows(PreconditionError, preconditionFailed('invalid_transition'));
    }
  });

  it('R3.5 every event of the Run stream advances the Run version by one (stream version = RunEvent sequence)', () => {
    const { scenario, events } = runningScenario();
    const all: RunStreamEvent[] = historyOf(
      [
        { type: 'MarkStepRunLost', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, ...resolution, requestedAtMs: AT } },
        { type: 'MarkStepRunReady', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, requestedAtMs: AT } },
      ],
      events,
    );
    all.forEach((_, i) => expect(foldEvents(all.slice(0, i + 1)).run?.version).to.equal(i + 1));
    expect(all.map((e) => e.type)).to.deep.equal([
      'RunCreated',
      'StepRunCreated',
      'StepRunReady',
      'SecurityAuditEventRecorded',
      'TraceAnchorRecorded',
      'AuditReceiptIssued',
      'StepRunStarted',
      'ToolExecutionStartBarrierCommitted',
      'StepRunLost',
      'StepRunReady',
    ]);
  });
});
