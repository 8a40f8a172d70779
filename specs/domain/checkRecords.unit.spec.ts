import { expect } from 'chai';
import {
  RECORD_TAGS,
  START_FACT_TYPES,
  decodeRunEvent,
  auditEventDigestOf,
  canonicalJson,
  digestOf,
  mutationDigestOf,
  receiptDigestOf,
  digestedBarrierOf,
  startToolExecution,
  traceDigestOf,
  verifyStartFacts,
  type DigestedBarrier,
  type StartFacts,
} from '../../domain';
import { factsAgree, impliedFacts, impliedFactsHold, type FactTexts } from '../../domain/checkRecords';
import { given } from '../../testkit/deciderSpec';
import { getPath, leafPaths, scenarioWithHistory, withPath } from '../../testkit/domainFixtures';

// R5.3: factsAgree (the one-pass check every read path uses) asks every question verifyStartFacts
// (its oracle) asks. Each fact field is damaged alone and the fact then re-digested, so its own
// digest still holds and only the field-by-field agreement with the barrier can catch it; each
// barrier field is damaged and the barrier re-sealed with its event. Same verdict every time.

const otherDigest = digestOf(RECORD_TAGS.command, { tampered: true });
const tamper = (value: unknown): unknown => {
  if (typeof value === 'number') return value + 1;
  if (typeof value === 'string') return value.startsWith('sha256:') ? (value === otherDigest ? digestOf(RECORD_TAGS.command, 1) : otherDigest) : `${value}-x`;
  throw new Error(`no tamper for ${typeof value}`);
};

/** From ready, or from waiting_approval with the caller's W3C traceparent on the trace anchor. */
const decided = (withApproval: boolean): StartFacts => {
  const { scenario, history } = scenarioWithHistory({ prefix: withApproval ? 'check-approval' : 'check', requestedAtMs: 1_780_000_000_000, withApproval });
  const command = scenario.startCommand();
  const traced = withApproval ? { ...command, evidence: { ...command.evidence, traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' } } : command;
  return given(...history).when(startToolExecution(traced)).decided() as unknown as StartFacts;
};

/** The facts as a verified read holds them: the barrier event's record is the sealed one. */
const asRead = (facts: StartFacts, sealed: DigestedBarrier): StartFacts =>
  [...facts.slice(0, 4), { ...facts[4], data: { barrier: sealed.record, barrierDigest: sealed.barrierDigest } }] as unknown as StartFacts;
const textsOf = (facts: StartFacts): FactTexts => ({
  audit: canonicalJson(facts[0].data),
  trace: canonicalJson(facts[1].data),
  receipt: canonicalJson(facts[2].data),
  mutation: canonicalJson(facts[3].data),
});
const redigest = (facts: StartFacts, i: number): StartFacts => {
  const f = facts.map((x) => ({ ...x, data: { ...x.data } })) as unknown as Record<number, { data: Record<string, unknown> }>;
  const d = f[i]!.data;
  if (i === 0) d.auditEventDigest = auditEventDigestOf(d as never);
  if (i === 1) d.traceDigest = traceDigestOf(d as never);
  if (i === 2) d.receiptDigest = receiptDigestOf(d as never);
  if (i === 3) d.mutationDigest = mutationDigestOf(d as never);
  return f as unknown as StartFacts;
};

/**
 * Fact `i` re-digested, and every copy of the digests it feeds (the receipt's, the barrier's)
 * updated and re-sealed: the damage then hides from every digest, and only the field-by-field
 * agreement between the facts and the barrier is left to find it.
 */
const rebound = (facts: StartFacts, i: number): [DigestedBarrier, StartFacts] => {
  const f = redigest(facts, i) as unknown as { data: Record<string, unknown> }[];
  const d = (k: number) => f[k]!.data;
  if (i < 2) {
    d(2).auditEventDigest = d(0).auditEventDigest;
    d(2).traceDigest = d(1).traceDigest;
    d(2).receiptDigest = receiptDigestOf(d(2) as never);
  }
  const b = structuredClone(facts[4].data.barrier);
  b.audit.auditEventDigest = d(0).auditEventDigest as string;
  b.trace.traceDigest = d(1).traceDigest as string;
  b.audit.auditReceiptDigest = d(2).receiptDigest as string;
  b.mutation.mutationDigest = d(3).mutationDigest as string;
  const sealed = digestedBarrierOf(b);
  return [sealed, asRead(f as unknown as StartFacts, sealed)];
};

const oracleAccepts = (sealed: DigestedBarrier, facts: StartFacts): boolean => {
  try {
    verifyStartFacts(sealed, facts);
    return true;
  } catch {
    return false;
  }
};

describe('R5.3 factsAgree answers as verifyStartFacts (domain/checkRecords.ts against domain/verify.ts)', () => {
  for (const withApproval of [false, true]) {
    it(`R5.3 on the decider's own facts and on every single fact field damaged, with its digest recomputed, and hidden from every digest${withApproval ? ' (from waiting_approval, with a traceparent)' : ''}`, () => {
      const facts = decided(withApproval);
      const sealed = digestedBarrierOf(facts[4].data.barrier);
      const valid = asRead(facts, sealed);
      expect(factsAgree(sealed, valid, textsOf(valid))).to.equal(true);
      let cases = 0;
      for (let i = 0; i < 4; i++) {
        for (const path of leafPaths(valid[i]!.data)) {
          const damaged = valid.map((f, j) => (j === i ? withPath(f, ['data', ...path], tamper(getPath(f.data, path))) : f)) as unknown as StartFacts;
          for (const variant of [damaged, redigest(damaged, i)]) {
            expect(factsAgree(sealed, variant, textsOf(variant)), `${valid[i]!.type}.${path.join('.')}`).to.equal(oracleAccepts(sealed, variant));
            cases++;
          }
          const [resealed, hidden] = rebound(damaged, i);
          expect(factsAgree(resealed, hidden, textsOf(hidden)), `${valid[i]!.type}.${path.join('.')} hidden from every digest`).to.equal(oracleAccepts(resealed, hidden));
        }
      }
      expect(cases).to.be.greaterThan(80);
    });

    it(`R5.3 on every single barrier field damaged and the barrier re-sealed with its event${withApproval ? ' (from waiting_approval, with a traceparent)' : ''}`, () => {
      const facts = decided(withApproval);
      const record = facts[4].data.barrier;
      for (const path of leafPaths(record)) {
        const resealed = digestedBarrierOf(withPath(record, path, tamper(getPath(record, path))));
        const read = asRead(facts, resealed);
        expect(factsAgree(resealed, read, textsOf(read)), `barrier.${path.join('.')}`).to.equal(oracleAccepts(resealed, read));
      }
    });
  }
});

/** The implied texts read back as the oracle reads stored facts: parsed, decoded, canonical, beside the barrier's event. */
const readImplied = (sealed: DigestedBarrier, texts: FactTexts): StartFacts => {
  const data = [texts.audit, texts.trace, texts.receipt, texts.mutation].map((text, i) => {
    const e = decodeRunEvent(START_FACT_TYPES[i]!, JSON.parse(text), `fact ${i}`);
    expect(canonicalJson(e.data), `fact ${i} canonical`).to.equal(text);
    return e;
  });
  return [...data, { type: 'ToolExecutionStartBarrierCommitted', data: { barrier: sealed.record, barrierDigest: sealed.barrierDigest } }] as unknown as StartFacts;
};

describe('R5.3 impliedFacts: the facts a barrier implies are the decided ones, and accepting them never exceeds verifyStartFacts', () => {
  for (const withApproval of [false, true]) {
    const variant = withApproval ? ' (from waiting_approval, with a traceparent)' : '';
    it(`R5.3 on the decider's own facts the implied texts are their canonical JSON, byte for byte, and their digests recompute${variant}`, () => {
      const facts = decided(withApproval);
      const sealed = digestedBarrierOf(facts[4].data.barrier);
      const implied = impliedFacts(sealed);
      expect(implied.texts).to.deep.equal(textsOf(facts));
      expect(implied.payloads).to.deep.equal(facts.slice(0, 4).map((f) => f.data));
      expect(impliedFactsHold(sealed, implied)).to.equal(true);
      expect(oracleAccepts(sealed, readImplied(sealed, implied.texts))).to.equal(true);
    });

    it(`R5.3 on every single barrier field damaged and re-sealed: whenever the implied facts hold, the oracle accepts them as stored${variant}`, () => {
      const record = decided(withApproval)[4].data.barrier;
      let held = 0;
      for (const path of leafPaths(record)) {
        const resealed = digestedBarrierOf(withPath(record, path, tamper(getPath(record, path))));
        const implied = impliedFacts(resealed);
        if (!impliedFactsHold(resealed, implied)) continue;
        held++;
        expect(oracleAccepts(resealed, readImplied(resealed, implied.texts)), `barrier.${path.join('.')}`).to.equal(true);
      }
      // A field no digest covers (the Policy fence's version, an id) still implies facts the oracle accepts.
      expect(held).to.be.greaterThan(0);
    });

    it(`R5.3 on every single fact field damaged and hidden from every digest: stored texts equal to the implied ones only where the oracle accepts${variant}`, () => {
      const facts = decided(withApproval);
      const valid = asRead(facts, digestedBarrierOf(facts[4].data.barrier));
      let differ = 0;
      for (let i = 0; i < 4; i++) {
        for (const path of leafPaths(valid[i]!.data)) {
          const damaged = valid.map((f, j) => (j === i ? withPath(f, ['data', ...path], tamper(getPath(f.data, path))) : f)) as unknown as StartFacts;
          const [resealed, hidden] = rebound(damaged, i);
          const implied = impliedFacts(resealed);
          const stored = textsOf(hidden);
          const same = (Object.keys(stored) as (keyof FactTexts)[]).every((k) => stored[k] === implied.texts[k]);
          if (same && impliedFactsHold(resealed, implied)) expect(oracleAccepts(resealed, hidden), `${valid[i]!.type}.${path.join('.')}`).to.equal(true);
          if (!same) differ++;
        }
      }
      // Fields the oracle never compares with the barrier (a trace anchor's runId) leave the implied texts behind: the caller proves those the long way.
      expect(differ).to.be.greaterThan(0);
    });
  }
});
