import { expect } from 'chai';
import { compactionBlockerOf, compactionDigestOf, compactionRecordProblem, positionRanges, canonicalJson, type CompactionRecord } from '../../domain';

const record: CompactionRecord = {
  runId: 'run-1',
  projectId: 'p',
  streamVersion: 5,
  logDigest: `sha256:${'a'.repeat(64)}`,
  lastChainDigest: null,
  globalPositions: [[3, 7]],
  barriers: [{ startId: 's1', stepRunId: 'step', attempt: 2, commandDigest: `sha256:${'b'.repeat(64)}`, barrierDigest: `sha256:${'c'.repeat(64)}` }],
  identities: ['startId', 'mutationId', 'runEventId', 'traceId', 'auditEventId', 'auditReceiptId', 'attempt'].map((identity) => ({ identity: identity as 'startId', value: `${identity}-1`, startId: 's1' })),
  finishedAtMs: 10,
  beforeMs: 20,
  compactedAtMs: 30,
};

describe('R14.2 compaction rule and record (domain)', () => {
  it('R14.2 a Run is compacted only when every StepRun is terminal, nothing is in doubt, no claim is live, and it finished before the cut-off', () => {
    const whole = { stepRunStatuses: ['completed', 'failed'] as const, starts: 2, outcomes: 2, liveClaims: 0, finishedAtMs: 10 };
    expect(compactionBlockerOf(whole, 11)).to.equal(undefined);
    expect(compactionBlockerOf(whole, 10)).to.equal('finished_after_cutoff');
    expect(compactionBlockerOf({ ...whole, stepRunStatuses: ['completed', 'lost'] }, 11)).to.equal('step_run_not_terminal');
    expect(compactionBlockerOf({ ...whole, outcomes: 1 }, 11)).to.equal('attempt_in_doubt');
    expect(compactionBlockerOf({ ...whole, liveClaims: 1 }, 11)).to.equal('live_driver_claim');
  });

  it('R14.2 a record read back is whole only with its own digest, for its own Run, binding every identity of every start', () => {
    const json = canonicalJson(record);
    const digest = compactionDigestOf(record);
    expect(compactionRecordProblem('run-1', json, digest)).to.equal(undefined);
    expect(compactionRecordProblem('run-2', json, digest)).to.be.a('string');
    expect(compactionRecordProblem('run-1', json.replace('"s1"', '"s2"'), digest)).to.be.a('string');
    expect(compactionRecordProblem('run-1', json, `sha256:${'0'.repeat(64)}`)).to.be.a('string');
    const fewer = { ...record, identities: record.identities.slice(1) };
    expect(compactionRecordProblem('run-1', canonicalJson(fewer), compactionDigestOf(fewer))).to.be.a('string');
  });

  it('R14.2 removed global positions are kept as ranges', () => {
    expect(positionRanges([9, 3, 4, 5])).to.deep.equal([[3, 5], [9, 9]]);
  });
});
