import { isDeepStrictEqual, types } from 'node:util';
import fc from 'fast-check';
import {
  CorruptRecordError,
  ValidationError,
  canonicalJson,
  decodeBarrierRecord,
  decodeRunEvent,
  decodeStartCommand,
  isStartBarrierError,
  parseJsonBytes,
  verifyStoredBarrier,
  type DecodedStartCommand,
  type ToolExecutionStartCommand,
  type ValidationReason,
} from '../../domain';
import { buildScenario } from '../../domain/scenario';
import { verifyStartRows, type StoredStartRows } from '../../application/checks/verifyRows';
import { checkStartRows } from '../../application/checks/checkRows';
import { countChanges, tableCounts, type BackendName } from '../../testkit/rawSql';
import { readStartRows } from '../../testkit/startRows';
import { freshStore, withRaw, type AnyAuthority, type Store } from '../lib/stores';
import { commandCases, isAtOrBelow, type CommandCase } from './commandCases';
import { looksForbidden } from './corpus';
import { recordCases, sameRows } from './recordCases';

// Bad input (R1.1, R1.5): generated commands through the decoder and through `prepare` on a real
// SQLite file and a real PostgreSQL database, then stored rows fuzzed through the read-side
// decoders. Nothing may crash, every invalid case gets the typed ValidationError with a path,
// and no table gains a row: the stores hold two Runs whose StepRuns are already running, so no
// generated command can legitimately start anything.

/** The barrier record's text inside a barrier event's data `{"barrier":…,"barrierDigest":…}`, as stored (undefined if it is not that shape). */
const barrierTextOf = (data: unknown): string | undefined => {
  const text = String(data);
  const at = text.lastIndexOf(',"barrierDigest":');
  return text.startsWith('{"barrier":') && at > 11 ? text.slice(11, at) : undefined;
};

export interface FuzzOptions {
  readonly cases: number;
  readonly recordCases: number;
  readonly seed: number;
  readonly backends: readonly BackendName[];
  readonly log?: (line: string) => void;
}

export interface FuzzReport {
  readonly seed: number;
  readonly cases: number;
  readonly byKind: Readonly<Record<string, number>>;
  /** Decoder verdicts. */
  readonly accepted: number;
  readonly rejected: number;
  /** Rejections that were the typed ValidationError with a path on every issue. */
  readonly rejectedTyped: number;
  /** Cases built to be invalid, and how many of those were rejected at the named path. */
  readonly invalidCases: number;
  readonly invalidAtPath: number;
  readonly storeCalls: number;
  readonly storeOutcomes: Readonly<Record<string, number>>;
  readonly rowsGained: readonly string[];
  /** `sameAsOracle`: cases where the one-pass verifier of the read paths gave verifyStartRows' verdict, value and error. */
  readonly records: { readonly cases: number; readonly changed: number; readonly detected: number; readonly unchangedAccepted: number; readonly sameAsOracle: number };
  readonly crashes: number;
  /** Milliseconds per phase. */
  readonly timings: Readonly<Record<string, number>>;
  readonly failures: readonly string[];
  readonly ok: boolean;
}

const REASONS: readonly ValidationReason[] = ['invalid_json', 'unknown_field', 'forbidden_field', 'forbidden_value', 'invalid_value', 'too_large', 'too_deep'];

const show = (v: unknown): string => {
  try {
    const s = JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : typeof x === 'function' ? '[function]' : x));
    return (s ?? String(v)).slice(0, 300);
  } catch {
    return String(v).slice(0, 300);
  }
};

/** Plain objects and arrays only (proxies and exotic objects are left as they are), 64 levels. */
const deepFreeze = (v: unknown, depth = 0): void => {
  if (v === null || typeof v !== 'object' || types.isProxy(v) || depth > 64) return;
  const proto = Object.getPrototypeOf(v);
  if (!(Array.isArray(v) || proto === Object.prototype || proto === null)) return;
  for (const d of Object.values(Object.getOwnPropertyDescriptors(v))) if ('value' in d) deepFreeze(d.value, depth + 1);
  Object.freeze(v);
};

const stringLeaves = (v: unknown, out: string[] = []): string[] => {
  if (typeof v === 'string') out.push(v);
  else if (v !== null && typeof v === 'object') for (const x of Object.values(v)) stringLeaves(x, out);
  return out;
};

interface Target {
  readonly store: Store;
  readonly authority: AnyAuthority;
  readonly before: Record<string, number>;
  readonly rows: StoredStartRows[];
}

export const runFuzz = async (options: FuzzOptions): Promise<FuzzReport> => {
  const log = options.log ?? (() => undefined);
  const failures: string[] = [];
  const fail = (what: string) => {
    if (failures.length < 200) failures.push(what);
  };
  const byKind: Record<string, number> = {};
  const storeOutcomes: Record<string, number> = {};
  let accepted = 0;
  let rejected = 0;
  let rejectedTyped = 0;
  let invalidCases = 0;
  let invalidAtPath = 0;
  let storeCalls = 0;
  let crashes = 0;
  const timings: Record<string, number> = {};

  const scenarios = [buildScenario({ prefix: 'fuzz-a' }), buildScenario({ prefix: 'fuzz-b', withApproval: true })];
  const bases: ToolExecutionStartCommand[] = scenarios.map((s) => s.startCommand());
  const baseDigests = new Set(bases.map((b) => decodeStartCommand(b).commandDigest));
  const targets: Target[] = [];
  const rowsGained: string[] = [];
  const records = { cases: 0, changed: 0, detected: 0, unchangedAccepted: 0, sameAsOracle: 0 };

  try {
    for (const backend of options.backends) {
      const store = await freshStore(backend, 'fuzz');
      const authority = await store.open();
      targets.push({ store, authority, before: {}, rows: [] });
      for (const s of scenarios) {
        for (const c of s.lifecycle) await authority.runs.handle(c);
        await authority.barriers.prepare(s.startCommand());
      }
      const target = targets[targets.length - 1]!;
      Object.assign(target.before, await withRaw(store, tableCounts));
      target.rows.push(...(await withRaw(store, async (raw) => Promise.all(bases.map((b) => readStartRows(raw, b.startId))))));
    }
    const storedDigests = new Map<string, string>();
    for (const b of bases) storedDigests.set(decodeStartCommand(b).commandDigest, (await targets[0]!.authority.barriers.getByStartId(b.startId))!.barrierDigest);

    // ------------------------------------------------------------ commands
    let clock = Date.now();
    const lap = (name: string) => {
      const now = Date.now();
      timings[name] = (timings[name] ?? 0) + now - clock;
      clock = now;
    };
    const cases = fc.sample(commandCases(bases), { numRuns: options.cases, seed: options.seed });
    lap('generate commands');
    let n = 0;
    for (const c of cases) {
      n++;
      byKind[c.kind] = (byKind[c.kind] ?? 0) + 1;
      const label = `case ${n} (${c.kind})`;
      let input: unknown = c.input;
      let decoded: DecodedStartCommand | undefined;
      let error: unknown;
      try {
        if (c.bytes !== undefined) input = parseJsonBytes('start command', c.bytes);
        deepFreeze(input);
        decoded = decodeStartCommand(input);
      } catch (e) {
        error = e;
      }
      if (c.expect === 'invalid') invalidCases++;
      if (error !== undefined) {
        rejected++;
        if (!(error instanceof ValidationError) || error.code !== 'VALIDATION_FAILED') {
          crashes++;
          fail(`${label}: untyped error ${String(error)} for ${show(c.input ?? '[bytes]')}`);
        } else if (error.issues.length === 0 || error.issues.some((i) => typeof i.path !== 'string' || i.path === '' || !REASONS.includes(i.reason))) {
          fail(`${label}: ValidationError without a path or reason: ${show(error.issues)}`);
        } else {
          rejectedTyped++;
          if (c.expect === 'valid') fail(`${label}: a valid command was rejected: ${error.message}`);
          if (c.expect === 'invalid' && c.path !== undefined) {
            if (error.issues.some((i) => isAtOrBelow(i.path, c.path!))) invalidAtPath++;
            else fail(`${label}: rejected, but no issue at ${c.path}: ${show(error.issues)}`);
          }
        }
      } else if (decoded !== undefined) {
        accepted++;
        if (c.expect === 'invalid') fail(`${label}: an invalid command was accepted (expected an issue at ${c.path}): ${show(c.input ?? '[bytes]')}`);
        const { schema: _fixedLiteral, ...content } = decoded.command;
        const leaked = stringLeaves(content)
          .map((s) => [s, looksForbidden(s)] as const)
          .find(([, why]) => why !== undefined);
        if (leaked) fail(`${label}: accepted a command carrying ${leaked[1]} content ${show(leaked[0])}`);
        try {
          const again = decodeStartCommand(JSON.parse(decoded.canonical));
          if (again.commandDigest !== decoded.commandDigest || again.canonical !== decoded.canonical) fail(`${label}: canonical form does not decode to itself`);
        } catch (e) {
          fail(`${label}: canonical form of an accepted command is rejected: ${String(e)}`);
        }
      }

      lap('decode');
      // The same input through `prepare` on every backend.
      for (const target of targets) {
        storeCalls++;
        const backend = target.store.backend;
        let outcome: string;
        try {
          const r = await target.authority.barriers.prepare((c.bytes !== undefined && error !== undefined ? c.bytes : input) as never);
          outcome = r.outcome;
          const exact = decoded !== undefined && baseDigests.has(decoded.commandDigest);
          if (r.outcome === 'created') fail(`${label}: ${backend} created a start from a generated command`);
          else if (!exact) fail(`${label}: ${backend} answered existing for a command no start has`);
          else if (r.barrier.barrierDigest !== storedDigests.get(decoded!.commandDigest)) fail(`${label}: ${backend} existing with another barrier`);
        } catch (e) {
          outcome = isStartBarrierError(e) ? e.code : 'untyped';
          if (!isStartBarrierError(e)) {
            crashes++;
            fail(`${label}: ${backend} threw an untyped error ${String(e)}`);
          } else if (error !== undefined) {
            if (!(e instanceof ValidationError)) fail(`${label}: ${backend} answered ${e.code} to input the decoder rejects`);
            else if (c.bytes === undefined && !isDeepStrictEqual(e.issues, (error as ValidationError).issues)) fail(`${label}: ${backend} reported other issues than the decoder`);
          } else if (c.exact) {
            fail(`${label}: ${backend} rejected an exact replay with ${e.code}: ${e.message}`);
          } else if (e instanceof CorruptRecordError) {
            fail(`${label}: ${backend} reported corruption: ${e.message}`);
          }
        }
        storeOutcomes[`${backend} ${outcome}`] = (storeOutcomes[`${backend} ${outcome}`] ?? 0) + 1;
        lap(`prepare on ${backend}`);
      }
      if (n % 2000 === 0) log(`  fuzz: ${n}/${cases.length} commands, ${failures.length} failures`);
    }

    for (const target of targets) {
      const after = await withRaw(target.store, tableCounts);
      for (const change of countChanges(target.before, after)) rowsGained.push(`${target.store.backend} ${change}`);
    }

    // ------------------------------------------------------------ stored rows, fuzzed
    const allRows = targets.flatMap((t) => t.rows);
    for (const rows of allRows) {
      try {
        verifyStartRows(rows);
      } catch (e) {
        fail(`stored rows of ${rows.barrier.start_id} do not verify before fuzzing: ${String(e)}`);
      }
    }
    const expected = allRows.map((rows) => verifyStartRows(rows));
    lap('counts');
    const recordSamples = fc.sample(recordCases(allRows), { numRuns: options.recordCases, seed: options.seed + 1 });
    lap('generate records');
    for (const rc of recordSamples) {
      records.cases++;
      byKind[`record ${rc.kind}`] = (byKind[`record ${rc.kind}`] ?? 0) + 1;
      const original = allRows[rc.start]!;
      const changed = !sameRows(rc.rows, original);
      const label = `record case ${records.cases} (${rc.kind} at ${rc.where})`;
      if (changed) records.changed++;
      const outcome = attempt(() => verifyStartRows(rc.rows));
      if (outcome.error !== undefined && !(outcome.error instanceof CorruptRecordError)) {
        crashes++;
        fail(`${label}: verifyStartRows threw an untyped ${String(outcome.error)}`);
      } else if (changed && outcome.error === undefined) {
        fail(`${label}: a changed record was accepted`);
      } else if (changed) {
        records.detected++;
      } else if (outcome.error !== undefined) {
        fail(`${label}: unchanged rows rejected: ${String(outcome.error)}`);
      } else if (!isDeepStrictEqual(outcome.value, expected[rc.start])) {
        fail(`${label}: unchanged rows read back differently`);
      } else {
        records.unchangedAccepted++;
      }
      // The read paths verify in one pass (checkRows.ts); verifyStartRows is its oracle.
      const oneCheck = attempt(() => checkStartRows(rc.rows));
      const messageOf = (e: unknown) => (e instanceof Error ? `${e.constructor.name}: ${e.message}` : undefined);
      if (messageOf(oneCheck.error) !== messageOf(outcome.error) || !isDeepStrictEqual(oneCheck.value, outcome.value)) {
        fail(`${label}: the one-pass verifier answered ${messageOf(oneCheck.error) ?? 'valid'} where verifyStartRows answered ${messageOf(outcome.error) ?? 'valid'}`);
      } else {
        records.sameAsOracle++;
      }

      // The single-record decoders on the changed JSON text, where the change was to one.
      // The barrier's one stored copy is inside its event (the fifth): { barrier, barrierDigest }.
      if (rc.where === 'events[4].data_json') {
        const json = barrierTextOf(rc.rows.events[4]?.data_json);
        const r = attempt(() => verifyStoredBarrier(original.barrier.start_id, String(json), original.barrier.barrier_digest));
        if (r.error !== undefined && !(r.error instanceof CorruptRecordError)) {
          crashes++;
          fail(`${label}: verifyStoredBarrier threw an untyped ${String(r.error)}`);
        } else if (r.error === undefined && json !== barrierTextOf(original.events[4]?.data_json)) fail(`${label}: verifyStoredBarrier accepted changed JSON`);
        const parsed = attempt(() => JSON.parse(String(json)) as unknown);
        if (parsed.error === undefined) {
          const d = attempt(() => decodeBarrierRecord(parsed.value));
          if (d.error !== undefined && !(d.error instanceof ValidationError)) {
            crashes++;
            fail(`${label}: decodeBarrierRecord threw an untyped ${String(d.error)}`);
          } else if (d.value !== undefined && canonicalJson(d.value.record) !== canonicalJson(parsed.value)) fail(`${label}: decodeBarrierRecord changed what it accepted`);
        }
      }
      const ev = /^events\[(\d)\]\.data_json$/.exec(rc.where);
      if (ev) {
        const row = rc.rows.events[Number(ev[1])]!;
        const parsed = attempt(() => JSON.parse(String(row.data_json)) as unknown);
        if (parsed.error === undefined) {
          const d = attempt(() => decodeRunEvent(row.event_type, parsed.value, rc.where));
          if (d.error !== undefined && !(d.error instanceof CorruptRecordError)) {
            crashes++;
            fail(`${label}: decodeRunEvent threw an untyped ${String(d.error)}`);
          } else if (d.value !== undefined && !isDeepStrictEqual(d.value.data, parsed.value)) fail(`${label}: decodeRunEvent stripped or changed the payload`);
        }
      }
    }
    lap('verify records');
  } finally {
    for (const t of targets) {
      await t.authority.close().catch(() => undefined);
      await t.store.destroy().catch(() => undefined);
    }
  }

  const report = {
    seed: options.seed,
    cases: options.cases,
    byKind,
    accepted,
    rejected,
    rejectedTyped,
    invalidCases,
    invalidAtPath,
    storeCalls,
    storeOutcomes,
    rowsGained,
    records,
    crashes,
    timings,
    failures,
  };
  return { ...report, ok: failures.length === 0 && crashes === 0 && rowsGained.length === 0 && rejected === rejectedTyped && records.changed === records.detected };
};

const attempt = <T>(f: () => T): { value?: T; error?: unknown } => {
  try {
    return { value: f() };
  } catch (error) {
    return { error: error ?? new Error('thrown undefined') };
  }
};

export type { CommandCase };
