import { expect } from 'chai';
import { CorruptRecordError } from '../../domain';
import { createEvidenceKeyring } from '../../application/evidenceKeys';
import { checkSealedSpan, originToWrite, requireSealedSpan, sealEvents, type EventMacRow, type SealOriginRow, type SealedEventRow } from '../../application/eventSeals';

// R9.4 the seal rules of the Run stream, over rows as a backend reads them: what is sealed,
// what is legacy (before the sealed origin, ahead of every sealed event), and what is found.

const k1 = createEvidenceKeyring({ active: { id: 'k1', secret: Buffer.alloc(32, 1) } });
const k2 = createEvidenceKeyring({ active: { id: 'k2', secret: Buffer.alloc(32, 2) }, verifyOnly: [{ id: 'k1', secret: Buffer.alloc(32, 1) }] });
const forgedK1 = createEvidenceKeyring({ active: { id: 'k1', secret: Buffer.alloc(32, 9) } });
const S = 'run-r1';
const event = (p: number, ms = 1000 + p): SealedEventRow => ({ stream_id: S, stream_position: p, event_id: `e${p}`, event_type: 'StepRunReady', data_json: `{"p":${p}}`, committed_at_ms: ms, global_position: p });
const events = [1, 2, 3, 4, 5].map((p) => event(p));
const origin = (keys = k1, globalPosition = 3, ms = 1002, gaps: [number, number][] = []): SealOriginRow => originToWrite(keys, [], { globalPosition, ms, gaps })!;

describe('R9.4 seals of the Run stream (application/eventSeals.ts)', () => {
  it('R9.4 events 1..2 before the origin are legacy; 3..5 sealed in two ranges verify', () => {
    const macs = [sealEvents(k1, S, events.slice(2, 4)), sealEvents(k1, S, events.slice(4))];
    expect(checkSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [origin()], macs, events }, 1, 5)).to.deep.equal({ findings: [], sealed: 3, legacy: 2 });
  });

  it('R9.4 an event after the origin without a seal is found, as one range per run of unsealed positions', () => {
    const macs = [sealEvents(k1, S, events.slice(2, 3))];
    const r = checkSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [origin()], macs, events }, 1, 5);
    expect(r.findings.map((f) => f.record)).to.deep.equal([`${S}@4..5`]);
    expect(() => requireSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [origin()], macs, events }, 1, 5)).to.throw(CorruptRecordError, `${S}@4..5`);
  });

  it('R9.4 a legacy-looking event after a sealed one is not legacy (the legacy events are a prefix)', () => {
    const late = [...events.slice(0, 3), event(4, 1000), event(5, 1000)].map((e, i) => ({ ...e, global_position: i === 3 ? 2 : e.global_position }));
    const macs = [sealEvents(k1, S, late.slice(2, 3))];
    expect(checkSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [origin()], macs, events: late }, 1, 5).findings.map((f) => f.record)).to.deep.equal([`${S}@4..5`]);
  });

  it('R9.4 a seal made without the key (same id, other bytes), a seal over changed cells, and a seal naming missing positions are each found', () => {
    const forged = sealEvents(forgedK1, S, events.slice(2));
    expect(checkSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [origin()], macs: [forged], events }, 1, 5).findings.map((f) => f.problem)[0]).to.contain('does not verify under key k1');
    const good = sealEvents(k1, S, events.slice(2));
    const changed = events.map((e) => (e.stream_position === 4 ? { ...e, data_json: '{"p":40}' } : e));
    expect(checkSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [origin()], macs: [good], events: changed }, 1, 5).findings[0]?.record).to.equal(`${S}@3..5`);
    const beyond: EventMacRow = { ...good, to_position: 6 };
    expect(checkSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [origin()], macs: [beyond], events }, 1, 5).findings[0]?.problem).to.contain('hold no event');
  });

  it('R9.4 no origin: every unsealed event is legacy; origins that no held key verifies: none is', () => {
    expect(checkSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [], macs: [], events }, 1, 5)).to.deep.equal({ findings: [], sealed: 0, legacy: 5 });
    const r = checkSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [originToWrite(createEvidenceKeyring({ active: { id: 'k9', secret: Buffer.alloc(32, 7) } }), [], { globalPosition: 3, ms: 1002, gaps: [] })!], macs: [], events }, 1, 5);
    expect(r.legacy).to.equal(0);
    expect(r.findings.map((f) => f.record)).to.deep.equal([`${S}@1..5`]);
    const bad = { ...origin(), mac: '0'.repeat(64) };
    expect(checkSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [bad], macs: [], events }, 1, 5).findings[0]?.record).to.equal('seal origin k1');
  });

  it('R9.3 no origin while keyed evidence is stored (the origin row deleted): no event is legacy, and the missing origin is found first', () => {
    const macs = [sealEvents(k1, S, events.slice(2))];
    const r = checkSealedSpan(k1, S, { evidenceWithoutOrigin: true, origins: [], macs, events }, 1, 5);
    expect(r.legacy).to.equal(0);
    expect(r.findings[0]?.problem).to.contain('the seal origin is missing');
    expect(r.findings.map((f) => f.record)).to.include(`${S}@1..2`);
    // a stream with no seal of its own (appended without the key) is not legacy either
    expect(() => requireSealedSpan(k1, S, { evidenceWithoutOrigin: true, origins: [], macs: [], events }, 1, 5)).to.throw(CorruptRecordError, 'seal origin is missing');
  });

  it('R9.4 rotation: the new active key re-seals the same origin; the old key id still verifies old seals, and only a keyring holding it', () => {
    const again = originToWrite(k2, [origin()], { globalPosition: 99, ms: 9999, gaps: [[5, 7]] })!;
    expect(again).to.include({ key_id: 'k2', from_global_position: 3, from_ms: 1002 });
    expect(originToWrite(k2, [origin(), again], { globalPosition: 99, ms: 9999, gaps: [[5, 7]] })).to.equal(undefined);
    const macs = [sealEvents(k1, S, events.slice(2))];
    expect(checkSealedSpan(k2, S, { evidenceWithoutOrigin: false, origins: [origin(), again], macs, events }, 1, 5).findings).to.deep.equal([]);
    const onlyK2 = createEvidenceKeyring({ active: { id: 'k2', secret: Buffer.alloc(32, 2) } });
    expect(checkSealedSpan(onlyK2, S, { evidenceWithoutOrigin: false, origins: [origin(), again], macs, events }, 1, 5).findings[0]?.problem).to.contain('which this keyring does not hold');
  });

  it('R14.1 legacy is the frozen set: an event at a position that was free below the origin when it was written is not legacy, whatever its clock', () => {
    // positions 2 and 4 were free when the origin (at 6) was written; an event later put at 2 or 4
    // with a clock from before the origin (a transaction opened before keying) is unsealed, not legacy
    const frozen = origin(k1, 6, 2000, [[2, 2], [4, 4]]);
    const placed = [1, 2].map((p, i) => ({ ...event(p, 1000), global_position: [1, 4][i]! }));
    const r = checkSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [frozen], macs: [], events: placed }, 1, 2);
    expect(r.legacy).to.equal(1);
    expect(r.findings.map((f) => f.record)).to.deep.equal([`${S}@2`]);
    const taken = [1, 3, 5].map((p) => ({ ...event(p === 1 ? 1 : p === 3 ? 2 : 3, 1000), global_position: p }));
    expect(checkSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [frozen], macs: [], events: taken }, 1, 3)).to.deep.equal({ findings: [], sealed: 0, legacy: 3 });
  });

  it('R14.1 the free positions are bound by the origin\'s MAC: a list changed, or one that is not ascending ranges below the origin, makes no event legacy', () => {
    const frozen = origin(k1, 6, 2000, [[2, 2], [4, 4]]);
    const widened = { ...frozen, legacy_gaps: '[[2,2]]' };
    const r = checkSealedSpan(k1, S, { evidenceWithoutOrigin: false, origins: [widened], macs: [], events: [event(1, 1000)] }, 1, 1);
    expect(r.legacy).to.equal(0);
    expect(r.findings[0]?.record).to.equal('seal origin k1');
    expect(() => originToWrite(k1, [], { globalPosition: 6, ms: 0, gaps: [[4, 4], [2, 2]] })).to.throw(RangeError);
    expect(() => originToWrite(k1, [], { globalPosition: 3, ms: 0, gaps: [[2, 3]] })).to.throw(RangeError);
  });
});
