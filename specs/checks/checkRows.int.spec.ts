import { isDeepStrictEqual } from 'node:util';
import { expect } from 'chai';
import fc from 'fast-check';
import { isLeft } from 'fp-ts/lib/Either';
import { CorruptRecordError, PAYLOAD_CODECS, StoredStartBarrierRecord, canonicalJson, isRunEventType, receiptDigestOf, digestedBarrierOf, traceDigestOf, verifyStoredBarrier, type StartFacts } from '../../domain';
import { naturalEventIdOf, startEventJsonOf, startRowsOf } from '../../projections/rows';
import { buildScenario } from '../../domain/scenario';
import { impliedFacts, provenBarrier } from '../../domain/checkRecords';
import { checkStartRows, provenStartRows } from '../../application/checks/checkRows';
import { checkEventRow, provenEventRow, decodeEventRow, type EventRow } from '../../domain/eventRows';
import { verifyStartRows, type StoredStartRows } from '../../application/checks/verifyRows';
import { recordCases } from '../../reliability/fuzz/recordCases';
import { mutateCell, reformatJson } from '../../testkit/damage';
import { sqliteRaw } from '../../testkit/rawSql';
import { readStartRows } from '../../testkit/startRows';
import { openFreshSqlite } from '../sqlite/support';
import { freshDbPath } from '../support/tmp';

// R5.3 at the cost of one pass (application/checks/checkRows.ts, domain/checkRecords.ts) held to the
// verifier it replaces on the read paths, the oracle (application/checks/verifyRows.ts): on real stored
// rows of a SQLite file, valid and damaged the ways the reliability record fuzzer and the damage
// suites damage them, the one pass gives the same verdict, the same value and the same error
// (class, code, message, problem). Its proof alone must never accept what the oracle refuses,
// and must prove every valid start (or the one pass would cost nothing but a second check).

type Outcome<T> = { value: T; error?: undefined } | { value?: undefined; error: unknown };
const attempt = <T>(f: () => T): Outcome<T> => {
  try {
    return { value: f() };
  } catch (error) {
    return { error };
  }
};

const describeError = (e: unknown) =>
  e instanceof Error ? { class: e.constructor.name, code: (e as { code?: unknown }).code, message: e.message, problem: (e as { problem?: unknown }).problem } : { thrown: String(e) };

/** Same verdict, same value, same error as the oracle; and the proof alone never exceeds it. */
const expectSameAsOracle = <T>(label: string, oracle: () => T, checked: () => T, proven: () => T | undefined): void => {
  const want = attempt(oracle);
  const got = attempt(checked);
  if (want.error !== undefined) {
    expect(want.error, `${label}: the oracle throws typed`).to.be.instanceOf(CorruptRecordError);
    expect(describeError(got.error), label).to.deep.equal(describeError(want.error));
    expect(proven(), `${label}: proven although the oracle refuses: ${describeError(want.error).message}`).to.equal(undefined);
  } else {
    expect(got.error, `${label}: ${String(got.error)}`).to.equal(undefined);
    expect(isDeepStrictEqual(got.value, want.value), `${label}: another value than the oracle`).to.equal(true);
    const p = proven();
    if (p !== undefined) expect(isDeepStrictEqual(p, want.value), `${label}: proven value differs`).to.equal(true);
  }
};

const sameRowsAsOracle = (label: string, rows: StoredStartRows) =>
  expectSameAsOracle(label, () => verifyStartRows(rows), () => checkStartRows(rows), () => provenStartRows(rows));
const sameEventAsOracle = (label: string, row: EventRow) =>
  expectSameAsOracle(label, () => decodeEventRow(row), () => checkEventRow(row), () => provenEventRow(row));

describe('R5.3 the one-pass verifier against the oracle (application/checks/checkRows.ts vs verifyRows.ts)', function () {
  this.timeout(600_000);
  let starts: StoredStartRows[] = [];
  let streamRows: EventRow[] = [];

  before(async () => {
    const path = freshDbPath('check-rows');
    const a = await openFreshSqlite(undefined, path);
    const scenarios = [...Array.from({ length: 3 }, () => buildScenario()), ...Array.from({ length: 2 }, () => buildScenario({ withApproval: true }))];
    const ids: string[] = [];
    for (const [i, s] of scenarios.entries()) {
      for (const c of s.lifecycle) await a.runs.handle(c);
      const plain = s.startCommand();
      // Some with the caller's W3C traceparent on the trace anchor, as the barrier binds it.
      const command = i % 2 === 0 ? plain : { ...plain, evidence: { ...plain.evidence, traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' } };
      await a.barriers.prepare(command);
      ids.push(command.startId);
    }
    await a.close();
    starts = [];
    streamRows = [];
    for (const [file, startIds] of [[path, ids]] as const) {
      const raw = sqliteRaw(file);
      for (const id of startIds) starts.push(await readStartRows(raw, id));
      streamRows.push(...(await raw.all<EventRow>('SELECT stream_id, stream_position, event_id, event_type, data_json, committed_at_ms FROM events ORDER BY global_position')));
      await raw.close();
    }
  });

  it('R5.3 every stored start is proven in one pass, with the value the oracle returns (ASCII records, never fall back)', () => {
    starts.forEach((rows, i) => {
      sameRowsAsOracle(`start ${i}`, rows);
      const ascii = /^[\x20-\x7e]*$/.test(rows.events[4]!.data_json);
      if (ascii) expect(provenStartRows(rows), `start ${i} proven`).not.to.equal(undefined);
    });
    for (const row of streamRows) {
      sameEventAsOracle(`${row.stream_id}@${row.stream_position}`, row);
      if (/^[\x20-\x7e]*$/.test(row.data_json)) expect(provenEventRow(row), `${row.event_type} proven`).not.to.equal(undefined);
    }
  });

  it('R5.3 facts a barrier does not imply byte for byte (a trace anchor naming another StepRun, every digest re-sealed over it) are proven the long way, as the oracle accepts them', () => {
    const base = starts[0]!;
    const facts = base.events.map((e) => decodeEventRow(e)) as unknown as StartFacts;
    const trace = { ...facts[1].data, stepRunId: `${facts[1].data.stepRunId}-other` };
    trace.traceDigest = traceDigestOf(trace);
    const receipt = { ...facts[2].data, traceDigest: trace.traceDigest };
    receipt.receiptDigest = receiptDigestOf(receipt);
    const record = structuredClone(facts[4].data.barrier);
    record.trace.traceDigest = trace.traceDigest;
    record.audit.auditReceiptDigest = receipt.receiptDigest;
    const sealed = digestedBarrierOf(record);
    const next = [facts[0], { ...facts[1], data: trace }, { ...facts[2], data: receipt }, facts[3], { ...facts[4], data: { barrier: record, barrierDigest: sealed.barrierDigest } }] as unknown as StartFacts;
    const committedAtMs = Number(base.barrier.committed_at_ms);
    const want = startRowsOf(next, committedAtMs);
    const json = startEventJsonOf(want);
    const rows: StoredStartRows = {
      ...want,
      events: base.events.map((e, i) => ({ ...e, event_id: naturalEventIdOf(next[i]!)!, data_json: json[i]! })),
      identities: want.identities,
    };
    sameRowsAsOracle('a trace anchor the barrier does not imply', rows);
    expect(impliedFacts(sealed).texts.trace).not.to.equal(json[1]);
    expect(provenStartRows(rows), 'proven the long way').not.to.equal(undefined);
  });

  it('R5.3 on every single-cell damage of the record fuzzer (JSON bytes, JSON content, scalars, missing, duplicated and swapped rows): same verdict and error', () => {
    fc.assert(
      fc.property(recordCases(starts), (rc) => sameRowsAsOracle(`${rc.kind} at ${rc.where}`, rc.rows)),
      { numRuns: 3000, seed: 140_158 },
    );
  });

  it('R5.3 on every cell changed as the damage suites change it (mutateCell, and JSON reformatted): same verdict and error', () => {
    let cases = 0;
    starts.forEach((base, s) => {
      const tables = ['barrier', 'audit', 'trace', 'receipt', 'mutation'] as const;
      const variants = (value: unknown, column: string): unknown[] => (column.endsWith('_json') ? [mutateCell(value), reformatJson(value)] : [mutateCell(value)]);
      for (const table of tables) {
        for (const [column, value] of Object.entries(base[table]!)) {
          for (const next of variants(value, column)) {
            sameRowsAsOracle(`start ${s} ${table}.${column}`, { ...base, [table]: { ...base[table]!, [column]: next } });
            cases++;
          }
        }
      }
      base.events.forEach((row, i) => {
        for (const [column, value] of Object.entries(row)) {
          for (const next of variants(value, column)) {
            const events = base.events.map((e, j) => (j === i ? { ...e, [column]: next } : e));
            sameRowsAsOracle(`start ${s} events[${i}].${column}`, { ...base, events });
            sameEventAsOracle(`start ${s} event ${i} alone, ${column}`, events[i]!);
            cases++;
          }
        }
      });
      base.identities.forEach((row, i) => {
        for (const [column, value] of Object.entries(row)) {
          const identities = base.identities.map((r, j) => (j === i ? { ...r, [column]: mutateCell(value) } : r));
          sameRowsAsOracle(`start ${s} identities[${i}].${column}`, { ...base, identities: identities as never });
          cases++;
        }
      });
    });
    expect(cases).to.be.greaterThan(500);
  });

  it('R5.3 stored events of every type, their JSON damaged in bytes and in content: same verdict and error as decodeEventRow', () => {
    const texts = fc.constantFrom(...streamRows).chain((row) =>
      fc
        .oneof(
          fc.nat({ max: row.data_json.length - 1 }).map((at) => `${row.data_json.slice(0, at)}\\u${row.data_json.charCodeAt(at).toString(16).padStart(4, '0')}${row.data_json.slice(at + 1)}`),
          fc.nat({ max: row.data_json.length - 1 }).chain((at) => fc.constantFrom('0', 'a', ' ', '"', '\ud800', '\u00e9', '}').map((c) => `${row.data_json.slice(0, at)}${c}${row.data_json.slice(at + 1)}`)),
          fc.nat({ max: row.data_json.length }).map((cut) => row.data_json.slice(0, cut)),
          fc.constant(reformatJson(row.data_json) as string),
          fc.constantFrom('RunCreated', 'StepRunReady', 'NoSuchEvent').map((type) => JSON.stringify({ type })),
        )
        .map((data_json) => ({ ...row, data_json })),
    );
    fc.assert(
      fc.property(texts, (row) => sameEventAsOracle(`${row.event_type}: ${row.data_json.slice(0, 60)}`, row)),
      { numRuns: 2000, seed: 140_159 },
    );
  });

  it('R5.3 the stored barrier alone: provenBarrier never accepts what verifyStoredBarrier refuses, and codec `is` answers as `validate`', () => {
    const stored = starts[0]!;
    const base = { ...stored.barrier, barrier_json: canonicalJson((JSON.parse(stored.events[4]!.data_json) as { barrier: unknown }).barrier) };
    const damaged = fc.oneof(
      fc.nat({ max: base.barrier_json.length - 1 }).chain((at) =>
        fc.constantFrom('0', '1', 'f', 'Z', '.', '-', ' ', '\\u0041').map((c) => `${base.barrier_json.slice(0, at)}${c}${base.barrier_json.slice(at + 1)}`),
      ),
      fc.constant(base.barrier_json),
    );
    fc.assert(
      fc.property(damaged, (json) => {
        const want = attempt(() => verifyStoredBarrier(base.start_id, json, base.barrier_digest));
        const got = provenBarrier(base.start_id, json, base.barrier_digest);
        if (want.error !== undefined) expect(got).to.equal(undefined);
        else if (got !== undefined) expect(isDeepStrictEqual(got, want.value)).to.equal(true);
        const parsed = attempt(() => JSON.parse(json) as unknown);
        if (parsed.error === undefined) expect(StoredStartBarrierRecord.is(parsed.value)).to.equal(!isLeft(StoredStartBarrierRecord.validate(parsed.value, [])));
      }),
      { numRuns: 2000, seed: 140_160 },
    );
    for (const row of streamRows) {
      if (!isRunEventType(row.event_type)) continue;
      const codec = PAYLOAD_CODECS[row.event_type] as unknown as { is(u: unknown): boolean; validate(u: unknown, c: []): unknown };
      const value = JSON.parse(row.data_json) as Record<string, unknown>;
      for (const key of Object.keys(value)) {
        for (const next of [null, 'x', 7, {}, undefined]) {
          const changed = { ...value, [key]: next };
          expect(codec.is(changed), `${row.event_type}.${key}`).to.equal(!isLeft(codec.validate(changed, []) as never));
        }
      }
    }
  });
});
