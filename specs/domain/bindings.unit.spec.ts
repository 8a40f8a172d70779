import { expect } from 'chai';
import {
  CorruptRecordError,
  PreconditionError,
  barrierMatchesItsCommand,
  commandDigestOf,
  commandOfBarrier,
  startToolExecution,
  verifyStoredBarrier,
  canonicalJson,
  digestOf,
  RECORD_TAGS,
  type EventOf,
} from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { given, historyOf, preconditionFailed } from '../../testkit/deciderSpec';

describe('R1.4 the barrier binds its command exactly', () => {
  const scenario = buildScenario({ prefix: 'bind', withApproval: true });
  const history = historyOf(scenario.lifecycle);
  const command = scenario.startCommand();

  it('R1.4.1 a command naming another snapshot than the Run is refused (snapshot_mismatch)', () => {
    given(...history)
      .when(startToolExecution({ ...command, project: { ...command.project, snapshotId: 'snapshot-other' } }))
      .thenThrows(PreconditionError, preconditionFailed('snapshot_mismatch'));
    given(...history)
      .when(startToolExecution({ ...command, project: { ...command.project, snapshotDigest: digestOf(RECORD_TAGS.command, 'other') } }))
      .thenThrows(PreconditionError, preconditionFailed('snapshot_mismatch'));
  });

  it('R1.4 R5.3 the command rebuilt from its barrier has the barrier commandDigest', () => {
    const facts = given(...history).when(startToolExecution(command)).decided();
    const barrier = (facts[4] as EventOf<'ToolExecutionStartBarrierCommitted'>).data.barrier;
    expect(commandOfBarrier(barrier)).to.deep.equal(command);
    expect(commandDigestOf(commandOfBarrier(barrier))).to.equal(barrier.commandDigest);
    expect(barrierMatchesItsCommand(barrier)).to.equal(true);
  });

  it('R5.3 a barrier re-sealed with drifted content (e.g. another plan or adapter) no longer matches its commandDigest and reads fail closed', () => {
    const facts = given(...history).when(startToolExecution(command)).decided();
    const barrier = (facts[4] as EventOf<'ToolExecutionStartBarrierCommitted'>).data.barrier;
    for (const drifted of [
      { ...barrier, admission: { ...barrier.admission, planDigest: digestOf(RECORD_TAGS.command, 'other plan') } },
      { ...barrier, contracts: { ...barrier.contracts, adapter: { ...barrier.contracts.adapter, id: 'adapter.http.v1' } } },
      { ...barrier, handlerBinding: { ...barrier.handlerBinding, id: 'other-binding' } },
    ]) {
      expect(barrierMatchesItsCommand(drifted)).to.equal(false);
      const json = canonicalJson(drifted);
      expect(() => verifyStoredBarrier(barrier.startId, json, digestOf(RECORD_TAGS.barrier, drifted))).to.throw(CorruptRecordError, /commandDigest/);
    }
  });
});
