import { expect } from 'chai';
import {
  CorruptRecordError,
  RECORD_TAGS,
  auditEventDigestOf,
  canonicalJson,
  decodeRunEvent,
  digestOf,
  digestedBarrierOf,
  startToolExecution,
  verifyStartFacts,
  verifyStoredBarrier,
  type EventOf,
  type StartBarrierRecord,
  type StartFacts,
} from '../../domain';
import { given } from '../../testkit/deciderSpec';
import { getPath, leafPaths, scenarioWithHistory, withPath } from '../../testkit/domainFixtures';

const otherDigest = digestOf(RECORD_TAGS.command, { tampered: true });

const decided = (withApproval = false): StartFacts => {
  const { scenario, history } = scenarioWithHistory({ prefix: withApproval ? 'verify-approval' : 'verify', requestedAtMs: 1_780_000_000_000, withApproval });
  const command = scenario.startCommand();
  return given(...history).when(startToolExecution(command)).decided() as unknown as StartFacts;
};

const barrierRecord = (facts: StartFacts): StartBarrierRecord => facts[4].data.barrier;

/** A different value of the same type: the smallest damage a single field can suffer. */
const tamper = (value: unknown): unknown => {
  if (typeof value === 'number') return value + 1;
  if (typeof value === 'string') return value.startsWith('sha256:') ? (value === otherDigest ? digestOf(RECORD_TAGS.command, 1) : otherDigest) : `${value}-x`;
  throw new Error(`no tamper for ${typeof value}`);
};

const expectCorrupt = (fn: () => void, what: string): CorruptRecordError => {
  let thrown: unknown;
  try {
    fn();
  } catch (e) {
    thrown = e;
  }
  expect(thrown, `${what} was accepted`).to.be.instanceOf(CorruptRecordError);
  expect((thrown as CorruptRecordError).code).to.equal('CORRUPT_RECORD');
  return thrown as CorruptRecordError;
};

describe('R5.3 a stored start re-verifies against its facts', () => {
  it('R5.3 verifyStartFacts accepts the decider own output, from ready and from waiting_approval', () => {
    for (const withApproval of [false, true]) {
      const facts = decided(withApproval);
      expect(() => verifyStartFacts(digestedBarrierOf(barrierRecord(facts)), facts)).not.to.throw();
      // and after a JSON round trip, as a store reads it back
      const readBack = JSON.parse(JSON.stringify(facts)) as StartFacts;
      expect(() => verifyStartFacts(digestedBarrierOf(barrierRecord(readBack)), readBack)).not.to.throw();
    }
  });

  it('R5.3 verifyStartFacts rejects every single tampered field of every fact', () => {
    for (const withApproval of [false, true]) {
      const facts = decided(withApproval);
      const sealed = digestedBarrierOf(barrierRecord(facts));
      let checked = 0;
      facts.forEach((fact, i) => {
        for (const path of leafPaths(fact.data)) {
          const damaged = facts.map((f, j) => (j === i ? withPath(f, ['data', ...path], tamper(getPath(f.data, path))) : f)) as unknown as StartFacts;
          expectCorrupt(() => verifyStartFacts(sealed, damaged), `${fact.type}.${path.join('.')}`);
          checked += 1;
        }
      });
      expect(checked).to.be.greaterThan(80);
    }
  });

  it('R5.3 verifyStartFacts rejects every single tampered field of the barrier record', () => {
    const facts = decided(true);
    for (const path of leafPaths(barrierRecord(facts))) {
      const damaged = withPath(barrierRecord(facts), path, tamper(getPath(barrierRecord(facts), path)));
      expectCorrupt(() => verifyStartFacts(digestedBarrierOf(damaged), facts), `barrier.${path.join('.')}`);
    }
  });

  it('R5.3 a barrier re-sealed with another admission than its audit event allowed is rejected', () => {
    // Both copies of the barrier (record and event) changed and re-digested consistently: the
    // audit event still says what was allowed, so the disagreement must surface.
    const facts = decided();
    const paths = [
      ['admission', 'actionDigest'],
      ['admission', 'admissionDigest'],
      ['admission', 'policyFence', 'policyId'],
      ['admission', 'policyFence', 'policyVersion'],
      ['admission', 'policyFence', 'policyDigest'],
      ['contracts', 'audit', 'id'],
      ['contracts', 'audit', 'digest'],
      ['requestedAtMs'],
    ];
    for (const path of paths) {
      const record = withPath(barrierRecord(facts), path, tamper(getPath(barrierRecord(facts), path)));
      const resealed = digestedBarrierOf(record);
      const consistent = [...facts.slice(0, 4), { ...facts[4], data: { barrier: record, barrierDigest: resealed.barrierDigest } }] as unknown as StartFacts;
      expectCorrupt(() => verifyStartFacts(resealed, consistent), `re-sealed barrier.${path.join('.')}`);
    }
  });

  it('R5.3 a fact re-digested after tampering still disagrees with the barrier', () => {
    const facts = decided();
    const audit = withPath(facts[0], ['data', 'actionDigest'], otherDigest) as EventOf<'SecurityAuditEventRecorded'>;
    const redigested = { ...audit, data: { ...audit.data, auditEventDigest: auditEventDigestOf(audit.data) } };
    const damaged = [redigested, ...facts.slice(1)] as unknown as StartFacts;
    expectCorrupt(() => verifyStartFacts(digestedBarrierOf(barrierRecord(facts)), damaged), 're-digested audit event');
  });

  it('R5.3 facts out of order or of the wrong type are rejected', () => {
    const facts = decided();
    const swapped = [facts[1], facts[0], ...facts.slice(2)] as unknown as StartFacts;
    expectCorrupt(() => verifyStartFacts(digestedBarrierOf(barrierRecord(facts)), swapped), 'swapped facts');
    const otherStart = decided(true);
    const mixed = [...facts.slice(0, 4), otherStart[4]] as unknown as StartFacts;
    expectCorrupt(() => verifyStartFacts(digestedBarrierOf(barrierRecord(facts)), mixed), 'barrier event of another start');
  });

  it('R5.3 verifyStoredBarrier accepts canonical text with its digest and fails closed on any damage', () => {
    const record = barrierRecord(decided());
    const sealed = digestedBarrierOf(record);
    expect(verifyStoredBarrier(record.startId, sealed.canonical, sealed.barrierDigest).record).to.deep.equal(record);

    expectCorrupt(() => verifyStoredBarrier(record.startId, JSON.stringify(record, null, 2), sealed.barrierDigest), 'non-canonical text');
    expectCorrupt(() => verifyStoredBarrier(record.startId, sealed.canonical, otherDigest), 'wrong digest');
    expectCorrupt(() => verifyStoredBarrier('start-other', sealed.canonical, sealed.barrierDigest), 'wrong startId column');
    expectCorrupt(() => verifyStoredBarrier(record.startId, sealed.canonical.slice(0, -1), sealed.barrierDigest), 'truncated JSON');
    const extra = canonicalJson({ ...record, output: 'x' });
    expectCorrupt(() => verifyStoredBarrier(record.startId, extra, digestOf(RECORD_TAGS.barrier, JSON.parse(extra))), 'forbidden field');
    const flipped = sealed.canonical.replace('"requestedAtMs":1780000000000', '"requestedAtMs":1780000000001');
    expect(flipped).not.to.equal(sealed.canonical);
    expectCorrupt(() => verifyStoredBarrier(record.startId, flipped, sealed.barrierDigest), 'one changed digit');
  });

  it('R5.3 event rows decode strictly: an unknown type or a bad payload is corrupt, never skipped', () => {
    const facts = decided();
    const started = facts[3];
    expect(decodeRunEvent(started.type, JSON.parse(JSON.stringify(started.data)), 'run-x@7')).to.deep.equal(started);
    expectCorrupt(() => decodeRunEvent('StepRunTeleported', {}, 'run-x@7'), 'unknown event type');
    expectCorrupt(() => decodeRunEvent('StepRunStarted', { ...started.data, committedAtMs: 1 }, 'run-x@7'), 'unknown field in a payload');
    expectCorrupt(() => decodeRunEvent('StepRunStarted', { ...started.data, toStatus: 'completed' }, 'run-x@7'), 'invalid payload');
  });
});
