import { expect } from 'chai';
import {
  CorruptRecordError,
  StartCompactedError,
  classifyReplay,
  type ReplayHits,
  PreconditionError,
  RECORD_TAGS,
  REPLAY_IDENTITIES,
  SemanticConflictError,
  ValidationError,
  auditEventDigestOf,
  buildStartFactsWithJson,
  canonicalJson,
  commandDigestOf,
  decodeStartCommand,
  digestOf,
  event,
  mutationDigestOf,
  noReplayHits,
  receiptDigestOf,
  replayKeysOf,
  startToolExecution,
  stepRunDigest,
  traceDigestOf,
  type EventOf,
  type ReplayIdentity,
  type RunStreamEvent,
  type StartBarrierRecord,
  type StepRunState,
  type ToolExecutionStartCommand,
} from '../../domain';
import { allIdentitiesHit, foldEvents, given, historyOf, preconditionFailed, replayHits } from '../../testkit/deciderSpec';
import { allKeys, leafPaths, scenarioWithHistory, stepRunAfter, withPath, withoutPath } from '../../testkit/domainFixtures';
import { expectIssue } from '../support/validation';

const AT = 1_780_000_000_000;
const otherDigest = digestOf(RECORD_TAGS.command, { other: true });

/**
 * The five facts of R3.3-R3.7, written out field by field from the command and the StepRun as
 * it stood: what the decider must produce, in this order, and nothing else.
 */
const expectedStartFacts = (c: ToolExecutionStartCommand, before: StepRunState, runVersion: number): RunStreamEvent[] => {
  const commandDigest = commandDigestOf(c);
  const ids = { startId: c.startId, runId: c.stepRun.runId, stepRunId: c.stepRun.stepRunId };

  const auditBody = {
    auditEventId: c.evidence.auditEventId,
    ...ids,
    projectId: c.project.projectId,
    action: 'tool_execution.start' as const,
    decision: 'allowed' as const,
    actionDigest: c.admission.actionDigest,
    admissionDigest: c.admission.admissionDigest,
    policyFence: c.admission.policyFence,
    auditContract: c.contracts.audit,
    commandDigest,
    occurredAtMs: c.requestedAtMs,
  };
  const audit = { ...auditBody, auditEventDigest: digestOf(RECORD_TAGS.auditEvent, auditBody) };

  const traceBody = { traceId: c.evidence.traceId, spanId: c.evidence.spanId, ...ids, commandDigest };
  const trace = { ...traceBody, traceDigest: digestOf(RECORD_TAGS.traceAnchor, traceBody) };

  const receiptBody = {
    auditReceiptId: c.evidence.auditReceiptId,
    auditEventId: audit.auditEventId,
    auditEventDigest: audit.auditEventDigest,
    traceId: trace.traceId,
    traceDigest: trace.traceDigest,
    startId: c.startId,
  };
  const receipt = { ...receiptBody, receiptDigest: digestOf(RECORD_TAGS.auditReceipt, receiptBody) };

  const { lastStartId: _previous, ...beforeFields } = before;
  const started: StepRunState = { ...beforeFields, status: 'running', version: before.version + 1 };
  const startedBody = {
    runEventId: c.mutation.runEventId,
    mutationId: c.mutation.mutationId,
    ...ids,
    fromStatus: before.status as 'ready' | 'waiting_approval',
    toStatus: 'running' as const,
    fromStepRunVersion: before.version,
    stepRunVersion: before.version + 1,
    fromStepRunDigest: stepRunDigest(before),
    startedStepRunDigest: stepRunDigest(started),
    runEventSequence: runVersion + 4,
    occurredAtMs: c.requestedAtMs,
    ...(c.approval ? { approval: c.approval } : {}),
  };
  const mutation = { ...startedBody, mutationDigest: digestOf(RECORD_TAGS.mutation, startedBody) };

  const barrier: StartBarrierRecord = {
    schema: 'qinglong/tool-execution-start-barrier@v1',
    startId: c.startId,
    commandDigest,
    requestedAtMs: c.requestedAtMs,
    projectId: c.project.projectId,
    snapshotId: c.project.snapshotId,
    snapshotDigest: c.project.snapshotDigest,
    runId: c.stepRun.runId,
    stepRunId: c.stepRun.stepRunId,
    toolDefinition: c.toolDefinition,
    handlerBinding: c.handlerBinding,
    admission: c.admission,
    contracts: c.contracts,
    attempt: {
      fromStatus: startedBody.fromStatus,
      fromStepRunVersion: before.version,
      fromStepRunDigest: startedBody.fromStepRunDigest,
      startedStepRunVersion: before.version + 1,
      startedStepRunDigest: startedBody.startedStepRunDigest,
    },
    mutation: { mutationId: c.mutation.mutationId, mutationDigest: mutation.mutationDigest },
    runEvent: { runEventId: c.mutation.runEventId, runEventSequence: runVersion + 4 },
    trace: { traceId: trace.traceId, spanId: trace.spanId, traceDigest: trace.traceDigest },
    audit: {
      auditEventId: audit.auditEventId,
      auditEventDigest: audit.auditEventDigest,
      auditReceiptId: receipt.auditReceiptId,
      auditReceiptDigest: receipt.receiptDigest,
    },
    ...(c.approval ? { approval: c.approval } : {}),
  };

  return [
    event('SecurityAuditEventRecorded', audit),
    event('TraceAnchorRecorded', trace),
    event('AuditReceiptIssued', receipt),
    event('StepRunStarted', mutation),
    event('ToolExecutionStartBarrierCommitted', { barrier, barrierDigest: digestOf(RECORD_TAGS.barrier, barrier) }),
  ];
};

const ready = (prefix = 'start') => scenarioWithHistory({ prefix, requestedAtMs: AT });
const waiting = (prefix = 'start-approval') => scenarioWithHistory({ prefix, requestedAtMs: AT, withApproval: true });

const barrierOf = (facts: readonly RunStreamEvent[]): EventOf<'ToolExecutionStartBarrierCommitted'> => {
  const last = facts[facts.length - 1];
  expect(last?.type).to.equal('ToolExecutionStartBarrierCommitted');
  return last as EventOf<'ToolExecutionStartBarrierCommitted'>;
};

/** A ready scenario whose start A was committed: the history including A's five facts. */
const committedStart = (prefix = 'replay') => {
  const { scenario, history } = ready(prefix);
  const a = scenario.startCommand();
  const events = historyOf([startToolExecution(a)], history);
  return { scenario, history, a, aDigest: commandDigestOf(a), events };
};

describe('R3 one start decides its facts in a fixed order', () => {
  it('R3.3-R3.7 a start from ready decides exactly: audit event, trace anchor, audit receipt, StepRunStarted, barrier', () => {
    const { scenario, history } = ready();
    const command = scenario.startCommand();
    const runVersion = foldEvents(history).run?.version ?? -1;
    expect(runVersion).to.equal(3);
    const facts = given(...history)
      .when(startToolExecution(command))
      .thenExactly(expectedStartFacts(command, scenario.stepRun, runVersion));

    const started = facts[3] as EventOf<'StepRunStarted'>;
    expect(started.data).to.include({
      fromStatus: 'ready',
      toStatus: 'running',
      fromStepRunVersion: 2,
      stepRunVersion: 3,
      runEventSequence: runVersion + 4,
      fromStepRunDigest: command.stepRun.expectedDigest,
      startedStepRunDigest: stepRunDigest({ ...scenario.stepRun, status: 'running', version: 3 }),
    });
    expect(started.data).not.to.have.property('approval');
  });

  it('R5.3 every digest in the facts recomputes through the exported *DigestOf helpers and stepRunDigest', () => {
    const { scenario, history } = ready();
    const command = scenario.startCommand();
    const [audit, trace, receipt, started, committed] = given(...history).when(startToolExecution(command)).decided() as [
      EventOf<'SecurityAuditEventRecorded'>,
      EventOf<'TraceAnchorRecorded'>,
      EventOf<'AuditReceiptIssued'>,
      EventOf<'StepRunStarted'>,
      EventOf<'ToolExecutionStartBarrierCommitted'>,
    ];
    expect(auditEventDigestOf(audit.data)).to.equal(audit.data.auditEventDigest);
    expect(traceDigestOf(trace.data)).to.equal(trace.data.traceDigest);
    expect(receiptDigestOf(receipt.data)).to.equal(receipt.data.receiptDigest);
    expect(mutationDigestOf(started.data)).to.equal(started.data.mutationDigest);
    expect(stepRunDigest(scenario.stepRun)).to.equal(started.data.fromStepRunDigest);
    const after = stepRunAfter([...history, audit, trace, receipt, started, committed], scenario.stepRunId);
    expect(stepRunDigest(after)).to.equal(started.data.startedStepRunDigest);
    expect(committed.data.barrierDigest).to.equal(digestOf(RECORD_TAGS.barrier, committed.data.barrier));
    expect(committed.data.barrier.commandDigest).to.equal(commandDigestOf(command));
    // the receipt binds the audit event and the trace anchor it vouches for
    expect(receipt.data).to.include({ auditEventDigest: audit.data.auditEventDigest, traceDigest: trace.data.traceDigest });
  });

  it('R5.3 the canonical JSON the decider hands the write plan is each fact\'s own, digests recomputing (from ready and from waiting_approval)', () => {
    for (const options of [{}, { withApproval: true }]) {
      const { scenario, history } = scenarioWithHistory(options);
      const { facts, json } = buildStartFactsWithJson(decodeStartCommand(scenario.startCommand()), foldEvents(history));
      const [audit, trace, receipt, started, committed] = facts;
      expect(json).to.deep.equal({
        audit: canonicalJson(audit.data),
        trace: canonicalJson(trace.data),
        receipt: canonicalJson(receipt.data),
        mutation: canonicalJson(started.data),
        barrier: canonicalJson(committed.data.barrier),
      });
      expect(auditEventDigestOf(audit.data)).to.equal(audit.data.auditEventDigest);
      expect(traceDigestOf(trace.data)).to.equal(trace.data.traceDigest);
      expect(receiptDigestOf(receipt.data)).to.equal(receipt.data.receiptDigest);
      expect(mutationDigestOf(started.data)).to.equal(started.data.mutationDigest);
    }
  });

  it('R3.4-R3.5 folding the facts moves the StepRun to running at version+1 and the Run version by five', () => {
    const { scenario, history } = ready();
    const command = scenario.startCommand();
    const after = foldEvents(historyOf([startToolExecution(command)], history));
    expect(after.run?.version).to.equal(8);
    expect(after.stepRuns[scenario.stepRunId]).to.deep.equal({ ...scenario.stepRun, status: 'running', version: 3, lastStartId: command.startId });
  });

  it('R2.1 R3.3-R3.7 a start from waiting_approval with the exact approval binds it in the mutation and the barrier', () => {
    const { scenario, history } = waiting();
    const command = scenario.startCommand();
    expect(command.mutation.fromStatus).to.equal('waiting_approval');
    expect(command.approval).to.deep.equal(scenario.approval);
    const facts = given(...history)
      .when(startToolExecution(command))
      .thenExactly(expectedStartFacts(command, scenario.stepRun, 3));
    expect((facts[3] as EventOf<'StepRunStarted'>).data.approval).to.deep.equal(scenario.approval);
    expect(barrierOf(facts).data.barrier.approval).to.deep.equal(scenario.approval);
    expect(barrierOf(facts).data.barrier.attempt.fromStatus).to.equal('waiting_approval');
  });

  it('R3.10 the decision carries no commit time: only the caller business time, and it ignores the wall clock', () => {
    const { scenario, history } = ready();
    const command = scenario.startCommand();
    const first = given(...history).when(startToolExecution(command)).decided();
    const keys = allKeys(first);
    expect(keys.filter((k) => /commit(ted)?_?at|committed|commit_?time/i.test(k))).to.deep.equal([]);
    const times = first.flatMap((e) => leafPaths(e.data).filter((p) => /AtMs$/.test(p[p.length - 1] ?? '')).map((p) => p.reduce<unknown>((v, k) => (v as Record<string, unknown>)[k], e.data)));
    expect(times).to.have.length.greaterThan(0);
    expect(new Set(times)).to.deep.equal(new Set([command.requestedAtMs]));

    const realNow = Date.now;
    try {
      Date.now = () => 4_102_444_800_000; // the clock moves; the decision must not
      const again = given(...history).when(startToolExecution(command)).decided();
      expect(again).to.deep.equal(first);
    } finally {
      Date.now = realNow;
    }
    const later = given(...history)
      .when(startToolExecution({ ...command, requestedAtMs: AT + 1 }))
      .decided();
    expect(barrierOf(later).data.barrier.requestedAtMs).to.equal(AT + 1);
  });
});

describe('R2.2 preconditions of a start, each on its own', () => {
  it('R2.2 approval: a start whose approval differs in any field from the one bound is refused (approval_mismatch)', () => {
    const { scenario, history } = waiting();
    const command = scenario.startCommand();
    for (const field of ['approvalRequestId', 'dispatchId', 'approvalDigest'] as const) {
      const wrong = withPath(command, ['approval', field], field === 'approvalDigest' ? otherDigest : `${command.approval?.[field] ?? ''}-x`);
      given(...history)
        .when(startToolExecution(wrong))
        .thenThrows(PreconditionError, (e) => {
          preconditionFailed('approval_mismatch')(e);
          expect(e.actual).to.deep.equal(scenario.approval);
          return true;
        });
    }
  });

  it('R2.2 R1.4.4 a start from waiting_approval that binds no approval is a ValidationError naming approval', () => {
    const { scenario, history } = waiting();
    const missing = withoutPath(scenario.startCommand(), ['approval']);
    expectIssue(() => given(...history).when(startToolExecution(missing)).decided(), 'approval', 'invalid_value');
    given(...history).when(startToolExecution(missing)).thenThrows(ValidationError);
  });

  it('R2.2 a start that claims ready for a StepRun waiting for approval is refused (status_mismatch)', () => {
    const { scenario, history } = waiting();
    const asReady = withoutPath(withPath(scenario.startCommand(), ['mutation', 'fromStatus'], 'ready'), ['approval']);
    given(...history).when(startToolExecution(asReady)).thenThrows(PreconditionError, preconditionFailed('status_mismatch'));
  });

  it('R2.2 an approval given for a ready StepRun is refused (approval_unexpected)', () => {
    const { scenario, history } = ready();
    const withApproval = {
      ...scenario.startCommand(),
      approval: { approvalRequestId: 'approval-x', dispatchId: 'dispatch-x', approvalDigest: otherDigest },
    };
    given(...history).when(startToolExecution(withApproval)).thenThrows(PreconditionError, preconditionFailed('approval_unexpected'));
  });

  it('R2.2 the Run must exist (run_not_found)', () => {
    const { scenario } = ready();
    given().when(startToolExecution(scenario.startCommand())).thenThrows(PreconditionError, preconditionFailed('run_not_found'));
    const elsewhere = ready('start-elsewhere');
    given(...elsewhere.history).when(startToolExecution(scenario.startCommand())).thenThrows(PreconditionError, preconditionFailed('run_not_found'));
  });

  it('R2.1 the barrier never creates a StepRun: an unknown StepRun is refused (step_run_not_found)', () => {
    const { scenario, history } = ready();
    const runOnly = history.slice(0, 1);
    given(...runOnly).when(startToolExecution(scenario.startCommand())).thenThrows(PreconditionError, preconditionFailed('step_run_not_found'));
  });

  it('R2.2 the command Project must be the Run Project (project_mismatch)', () => {
    const { scenario, history } = ready();
    const other = withPath(scenario.startCommand(), ['project', 'projectId'], 'project-other');
    given(...history)
      .when(startToolExecution(other))
      .thenThrows(PreconditionError, (e) => {
        preconditionFailed('project_mismatch')(e);
        expect(e.expected).to.equal('project-other');
        expect(e.actual).to.equal(scenario.projectId);
        return true;
      });
  });

  it('R2.2 the StepRun must be a Tool StepRun (not_a_tool_step_run for kind llm)', () => {
    const { scenario, history } = ready();
    const llmHistory = historyOf(
      [
        { type: 'CreateStepRun', data: { runId: scenario.runId, stepRunId: 'step-llm', kind: 'llm', requestedAtMs: AT } },
        { type: 'MarkStepRunReady', data: { runId: scenario.runId, stepRunId: 'step-llm', requestedAtMs: AT } },
      ],
      history,
    );
    const llm = stepRunAfter(llmHistory, 'step-llm');
    expect(llm).to.include({ kind: 'llm', status: 'ready', version: 2 });
    // a well-formed command for that StepRun: its id, version and true digest
    const command = withPath(scenario.startCommand(llm), ['stepRun', 'stepRunId'], 'step-llm');
    expect(command.stepRun.expectedDigest).to.equal(stepRunDigest(llm));
    given(...llmHistory).when(startToolExecution(command)).thenThrows(PreconditionError, preconditionFailed('not_a_tool_step_run'));
  });

  it('R2.2 the StepRun must be in the status the command moves it from (status_mismatch)', () => {
    const { scenario } = ready();
    const created = historyOf(scenario.lifecycle.slice(0, 2));
    const createdStepRun = stepRunAfter(created, scenario.stepRunId);
    expect(createdStepRun.status).to.equal('created');
    const command = withPath(scenario.startCommand(createdStepRun), ['mutation', 'fromStatus'], 'ready');
    given(...created).when(startToolExecution(command)).thenThrows(PreconditionError, preconditionFailed('status_mismatch'));

    // already running, no index hit: a second start of a running StepRun is refused too
    const { events } = committedStart('start-running');
    const running = stepRunAfter(events, `step-start-running`);
    const second = withPath(scenarioWithHistory({ prefix: 'start-running' }).scenario.startCommand(running, 'second'), ['mutation', 'fromStatus'], 'ready');
    given(...events).when(startToolExecution(second)).thenThrows(PreconditionError, preconditionFailed('status_mismatch'));
  });

  it('R2.2 the StepRun must be at the expected version (version_mismatch)', () => {
    const { scenario, history } = ready();
    const stale = { ...scenario.stepRun, version: 3 };
    const command = scenario.startCommand(stale);
    expect(command.stepRun.expectedVersion).to.equal(3);
    given(...history)
      .when(startToolExecution(command))
      .thenThrows(PreconditionError, (e) => {
        preconditionFailed('version_mismatch')(e);
        expect(e.expected).to.equal(3);
        expect(e.actual).to.equal(2);
        return true;
      });
  });

  it('R2.2 the StepRun must have the expected digest (digest_mismatch)', () => {
    const { scenario, history } = ready();
    const command = withPath(scenario.startCommand(), ['stepRun', 'expectedDigest'], otherDigest);
    given(...history)
      .when(startToolExecution(command))
      .thenThrows(PreconditionError, (e) => {
        preconditionFailed('digest_mismatch')(e);
        expect(e.actual).to.equal(stepRunDigest(scenario.stepRun));
        return true;
      });
  });

  it('R2.2 the StepRun must be bound to the command Tool Definition, id and digest (definition_mismatch)', () => {
    const { scenario, history } = ready();
    const command = scenario.startCommand();
    given(...history)
      .when(startToolExecution(withPath(command, ['toolDefinition', 'id'], 'tool-def-other')))
      .thenThrows(PreconditionError, preconditionFailed('definition_mismatch'));
    given(...history)
      .when(startToolExecution(withPath(command, ['toolDefinition', 'digest'], otherDigest)))
      .thenThrows(PreconditionError, preconditionFailed('definition_mismatch'));
  });

  it('R3.9 a refused start decides nothing: every precondition failure is a throw, never a partial batch', () => {
    const { scenario, history } = ready();
    const command = withPath(scenario.startCommand(), ['stepRun', 'expectedDigest'], otherDigest);
    let facts: RunStreamEvent[] | undefined;
    try {
      facts = given(...history).when(startToolExecution(command)).decided();
    } catch (e) {
      expect(e).to.be.instanceOf(PreconditionError);
    }
    expect(facts).to.equal(undefined);
  });
});

describe('R4 replay identity', () => {
  it('R3.1 R4.2 an exact replay (all seven identities bound to this start and digest) decides nothing', () => {
    const { a, aDigest, events, history } = committedStart();
    given(...events)
      .when(startToolExecution(a, allIdentitiesHit({ startId: a.startId, commandDigest: aDigest })))
      .thenNothingHappened();
    // the replay is recognised before any precondition: even against the pre-start state
    given(...history)
      .when(startToolExecution(a, allIdentitiesHit({ startId: a.startId, commandDigest: aDigest })))
      .thenNothingHappened();
  });

  it('R4.1 the seven replay identities are startId, mutation, RunEvent, trace, audit event, audit receipt and the attempt', () => {
    const { a } = committedStart();
    expect([...REPLAY_IDENTITIES]).to.deep.equal(['startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt']);
    // noReplayHits is a literal: the same identities, in the same order, each with no hit
    expect(Object.keys(noReplayHits())).to.deep.equal([...REPLAY_IDENTITIES]);
    expect(Object.values(noReplayHits()).every((h) => Array.isArray(h) && h.length === 0)).to.equal(true);
    expect(noReplayHits().startId).not.to.equal(noReplayHits().startId);
    expect(replayKeysOf(a)).to.deep.equal({
      startId: a.startId,
      mutationId: a.mutation.mutationId,
      runEventId: a.mutation.runEventId,
      traceId: a.evidence.traceId,
      auditEventId: a.evidence.auditEventId,
      auditReceiptId: a.evidence.auditReceiptId,
      attempt: { runId: a.stepRun.runId, stepRunId: a.stepRun.stepRunId, startedStepRunVersion: a.stepRun.expectedVersion + 1 },
    });
  });

  it('R14.2 R9.3 an exact replay of a compacted start whose compaction record is gone fails closed (CORRUPT_RECORD), never START_COMPACTED', () => {
    const { a, aDigest } = committedStart();
    const decoded = decodeStartCommand(a);
    const compactedHits = (compactionDigest: string) =>
      Object.fromEntries(REPLAY_IDENTITIES.map((identity) => [identity, [{ startId: a.startId, commandDigest: aDigest, compacted: { runId: a.stepRun.runId, barrierDigest: `sha256:${'c'.repeat(64)}`, compactionDigest } }]])) as unknown as ReplayHits;
    expect(() => classifyReplay(decoded, compactedHits(`sha256:${'d'.repeat(64)}`))).to.throw(StartCompactedError);
    expect(() => classifyReplay(decoded, compactedHits(''))).to.throw(CorruptRecordError, /no compaction record binds/);
  });

  it('R4.3 the same startId with different content is a semantic conflict naming startId', () => {
    const { a, aDigest, events } = committedStart();
    const drifted = { ...a, admission: { ...a.admission, timeoutMs: a.admission.timeoutMs + 1 } };
    given(...events)
      .when(startToolExecution(drifted, allIdentitiesHit({ startId: a.startId, commandDigest: aDigest })))
      .thenThrows(SemanticConflictError, (e) => {
        expect(e.code).to.equal('SEMANTIC_CONFLICT');
        expect(e.identity).to.equal('startId');
        expect(e.value).to.equal(a.startId);
        expect(e.existingStartId).to.equal(a.startId);
        return true;
      });
  });

  const sharedIdentity: Record<Exclude<ReplayIdentity, 'startId'>, (b: ToolExecutionStartCommand, a: ToolExecutionStartCommand) => ToolExecutionStartCommand> = {
    mutationId: (b, a) => withPath(b, ['mutation', 'mutationId'], a.mutation.mutationId),
    runEventId: (b, a) => withPath(b, ['mutation', 'runEventId'], a.mutation.runEventId),
    traceId: (b, a) => withPath(b, ['evidence', 'traceId'], a.evidence.traceId),
    auditEventId: (b, a) => withPath(b, ['evidence', 'auditEventId'], a.evidence.auditEventId),
    auditReceiptId: (b, a) => withPath(b, ['evidence', 'auditReceiptId'], a.evidence.auditReceiptId),
    attempt: (b) => b, // same StepRun, same expected version: the same attempt
  };

  for (const identity of REPLAY_IDENTITIES) {
    it(`R4.1 R4.3 drift under ${identity}: a different start reusing it is a SemanticConflictError naming ${identity}`, () => {
      const { scenario, a, aDigest, history } = committedStart();
      const b =
        identity === 'startId'
          ? { ...a, requestedAtMs: a.requestedAtMs + 1 }
          : sharedIdentity[identity](scenario.startCommand(scenario.stepRun, 'racer'), a);
      expect(commandDigestOf(b)).not.to.equal(aDigest);
      const expectedValue =
        identity === 'attempt'
          ? `(${scenario.runId}, ${scenario.stepRunId}, 3)`
          : (replayKeysOf(b)[identity] as string);
      // the racer decides against the state it read before A committed; the index says A holds it
      given(...history)
        .when(startToolExecution(b, replayHits([identity], { startId: a.startId, commandDigest: aDigest })))
        .thenThrows(SemanticConflictError, (e) => {
          expect(e.identity).to.equal(identity);
          expect(e.value).to.equal(expectedValue);
          expect(e.existingStartId).to.equal(a.startId);
          return true;
        });
    });
  }

  it('R4.3 a conflict names the first drifting identity in R4.1 order when several drift', () => {
    const { scenario, a, aDigest, history } = committedStart();
    const b = scenario.startCommand(scenario.stepRun, 'racer');
    given(...history)
      .when(startToolExecution(b, replayHits(['auditReceiptId', 'traceId', 'attempt'], { startId: a.startId, commandDigest: aDigest })))
      .thenThrows(SemanticConflictError, (e) => e.identity === 'traceId');
  });

  it('R5.3 an identity bound to several barriers fails closed (CorruptRecordError), for every identity', () => {
    const { a, aDigest, history } = committedStart();
    for (const identity of REPLAY_IDENTITIES) {
      const hits = { ...allIdentitiesHit({ startId: a.startId, commandDigest: aDigest }) };
      const twice = { ...hits, [identity]: [{ startId: a.startId, commandDigest: aDigest }, { startId: 'start-other', commandDigest: otherDigest }] };
      given(...history)
        .when(startToolExecution(a, twice))
        .thenThrows(CorruptRecordError, (e) => {
          expect(e.code).to.equal('CORRUPT_RECORD');
          expect(e.problem).to.contain(identity);
          return true;
        });
    }
  });

  it('R5.3 a start indexed under only some of its identities fails closed (CorruptRecordError), never a best guess', () => {
    const { a, aDigest, events } = committedStart();
    for (const identity of REPLAY_IDENTITIES) {
      const partial = { ...allIdentitiesHit({ startId: a.startId, commandDigest: aDigest }), [identity]: [] };
      given(...events)
        .when(startToolExecution(a, partial))
        .thenThrows(CorruptRecordError, (e) => {
          expect(e.problem).to.contain(`not under ${identity}`);
          return true;
        });
    }
  });

  it('R4.4 lost -> ready -> running at the new version gets a new barrier with a new attempt identity; the first stays untouched', () => {
    const { scenario, a, aDigest, events } = committedStart('retry');
    const retryHistory = historyOf(
      [
        { type: 'MarkStepRunLost', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, decidedBy: 'operator-7', reason: 'worker_lost', requestedAtMs: AT } },
        { type: 'MarkStepRunReady', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, requestedAtMs: AT } },
      ],
      events,
    );
    const firstBarrier = barrierOf(events.slice(0, 8));
    const snapshot = structuredClone(retryHistory);
    const retryStepRun = stepRunAfter(retryHistory, scenario.stepRunId);
    expect(retryStepRun).to.include({ status: 'ready', version: 5 });

    const b = scenario.startCommand(retryStepRun);
    expect(replayKeysOf(b).attempt).to.deep.equal({ runId: scenario.runId, stepRunId: scenario.stepRunId, startedStepRunVersion: 6 });
    expect(replayKeysOf(a).attempt.startedStepRunVersion).to.equal(3);
    for (const identity of REPLAY_IDENTITIES) expect(replayKeysOf(b)[identity], identity).not.to.deep.equal(replayKeysOf(a)[identity]);

    const facts = given(...retryHistory)
      .when(startToolExecution(b, noReplayHits()))
      .thenExactly(expectedStartFacts(b, retryStepRun, 10));
    const second = barrierOf(facts);
    expect(second.data.barrier.attempt).to.include({ fromStepRunVersion: 5, startedStepRunVersion: 6 });
    expect(second.data.barrier.runEvent.runEventSequence).to.equal(14);
    expect(second.data.barrierDigest).not.to.equal(firstBarrier.data.barrierDigest);
    // the decision appends; it never rewrites: the first barrier and all history are as they were
    expect(facts.some((f) => JSON.stringify(f.data).includes(a.startId))).to.equal(false);
    expect(retryHistory).to.deep.equal(snapshot);
    expect(firstBarrier.data.barrier.attempt).to.include({ startedStepRunVersion: 3 });

    // replaying the first start after the retry still returns it: existing, nothing decided
    given(...retryHistory, ...facts)
      .when(startToolExecution(a, allIdentitiesHit({ startId: a.startId, commandDigest: aDigest })))
      .thenNothingHappened();
  });

  it('R4.4 R7 the StepRun id alone is not the identity: a retry reusing the first attempt evidence is a conflict', () => {
    const { scenario, a, aDigest, events } = committedStart('retry-reuse');
    const retryHistory = historyOf(
      [
        { type: 'MarkStepRunLost', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, decidedBy: 'operator-7', reason: 'worker_lost', requestedAtMs: AT } },
        { type: 'MarkStepRunReady', data: { runId: scenario.runId, stepRunId: scenario.stepRunId, requestedAtMs: AT } },
      ],
      events,
    );
    const b = withPath(scenario.startCommand(stepRunAfter(retryHistory, scenario.stepRunId)), ['evidence', 'traceId'], a.evidence.traceId);
    given(...retryHistory)
      .when(startToolExecution(b, replayHits(['traceId'], { startId: a.startId, commandDigest: aDigest })))
      .thenThrows(SemanticConflictError, (e) => e.identity === 'traceId');
  });
});
