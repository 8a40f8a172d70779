import { expect } from 'chai';
import fc from 'fast-check';
import {
  EXECUTION_CLASSES,
  RECORD_TAGS,
  ValidationError,
  canonicalJson,
  decodeBarrierRecord,
  decodeLifecycleCommand,
  decodeStartCommand,
  digestOf,
  startToolExecution,
  type EventOf,
  type ToolExecutionStartCommand,
} from '../../domain';
import { Identity } from '../../domain/codecs';
import { given } from '../../testkit/deciderSpec';
import { getPath, leafPaths, scenarioWithHistory, withPath } from '../../testkit/domainFixtures';

// Property-based specs. ~200 runs each keeps the whole domain suite well under its time budget;
// a failure prints fast-check's seed and shrunk counterexample, which replays deterministically.
const RUNS = { numRuns: Number(process.env['FC_NUM_RUNS'] ?? 200) };

/** Rebuild every object with its keys in a seeded random order (own data properties only). */
const shuffleKeys = (value: unknown, seed: number): unknown => {
  let state = seed >>> 0 || 1;
  const next = () => {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    return state;
  };
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== 'object') return v;
    const entries = Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, walk(x)] as const);
    for (let i = entries.length - 1; i > 0; i -= 1) {
      const j = next() % (i + 1);
      [entries[i], entries[j]] = [entries[j] as (typeof entries)[number], entries[i] as (typeof entries)[number]];
    }
    // fromEntries defines own properties, so a generated "__proto__" key stays a key
    return Object.fromEntries(entries);
  };
  return walk(value);
};

const json = fc.jsonValue({ maxDepth: 6, stringUnit: 'grapheme' });

const base = scenarioWithHistory({ prefix: 'prop', requestedAtMs: 1_780_000_000_000 });
const validCommand: ToolExecutionStartCommand = base.scenario.startCommand();
const validDigest = decodeStartCommand(validCommand).commandDigest;

const digestArb = fc.stringMatching(/^[0-9a-f]{64}$/).map((hex) => `sha256:${hex}`);
const identityArb = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,40}$/).filter((s) => Identity.is(s));
/** Leaves that cannot change alone and stay valid: single-value literals, and fromStatus (tied to approval). */
const FIXED_LEAVES = new Set(['schema', 'kind', 'toStatus', 'fromStatus']);

const valueFor = (path: readonly string[]): fc.Arbitrary<unknown> => {
  const key = path[path.length - 1] ?? '';
  if (key === 'digest' || key.endsWith('Digest')) return digestArb;
  if (key === 'timeoutMs') return fc.integer({ min: 1, max: 86_400_000 });
  if (key === 'requestedAtMs') return fc.maxSafeNat().map((n) => n % 8_640_000_000_000_001);
  if (key === 'expectedVersion' || key === 'policyVersion') return fc.integer({ min: 1, max: 2_147_483_647 });
  if (key === 'executionClass') return fc.constantFrom(...EXECUTION_CLASSES);
  return identityArb;
};

const mutablePaths = leafPaths(validCommand).filter((p) => !FIXED_LEAVES.has(p[p.length - 1] ?? ''));

const singleFieldChange = fc
  .constantFrom(...mutablePaths)
  .chain((path) => valueFor(path).filter((v) => v !== getPath(validCommand, path)).map((value) => ({ path, value })));

/** Decoders may only fail with the typed ValidationError, never a TypeError or a crash. */
const onlyValidationErrors = (decode: () => unknown): boolean => {
  try {
    decode();
  } catch (e) {
    if (!(e instanceof ValidationError)) throw e;
    expect(e.issues.length).to.be.greaterThan(0);
    for (const issue of e.issues) expect(issue.path).to.be.a('string');
  }
  return true;
};

const anyValue = fc.anything({
  maxDepth: 4,
  withBigInt: true,
  withBoxedValues: true,
  withDate: true,
  withMap: true,
  withSet: true,
  withNullPrototype: true,
  withObjectString: true,
  withSparseArray: true,
  withTypedArray: true,
  withUnicodeString: true,
});
const anything = fc.oneof({ weight: 4, arbitrary: anyValue }, { weight: 1, arbitrary: fc.func(anyValue) }, { weight: 1, arbitrary: fc.constantFrom(Number.NaN, -0, Symbol('s'), undefined, new Error('boom')) });

describe('R1 properties (fast-check)', () => {
  it('R1.3 canonical JSON and its digests are stable under key order', () => {
    fc.assert(
      fc.property(json, fc.integer(), (value, seed) => {
        const shuffled = shuffleKeys(value, seed);
        const canonical = canonicalJson(value);
        expect(canonicalJson(shuffled)).to.equal(canonical);
        expect(digestOf(RECORD_TAGS.command, shuffled)).to.equal(digestOf(RECORD_TAGS.command, value));
        expect(digestOf(RECORD_TAGS.barrier, shuffled)).to.equal(digestOf(RECORD_TAGS.barrier, value));
        // canonical form is a fixed point: parsing and re-canonicalising changes nothing
        expect(canonicalJson(JSON.parse(canonical))).to.equal(canonical);
      }),
      RUNS,
    );
  });

  it('R1.3 a valid command is stable under key order: same canonical JSON, same command digest', () => {
    fc.assert(
      fc.property(fc.integer(), (seed) => {
        const decoded = decodeStartCommand(shuffleKeys(validCommand, seed));
        expect(decoded.commandDigest).to.equal(validDigest);
      }),
      RUNS,
    );
  });

  it('R1.3 R1.4 any single-field change of a valid command (still valid) changes the command digest', () => {
    fc.assert(
      fc.property(singleFieldChange, ({ path, value }) => {
        const changed = withPath(validCommand, path, value);
        const decoded = decodeStartCommand(changed);
        expect(decoded.commandDigest, path.join('.')).not.to.equal(validDigest);
      }),
      RUNS,
    );
  });

  it('R1.3 R1.4 adding or changing one annotation changes the command digest', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z][a-z0-9_.-]{0,20}$/), fc.string({ maxLength: 40 }), (key, text) => {
        fc.pre(!/input|args|param|payload|secret|passw|token|credential|api_?key|privatekey|handler|function|callback|exec|seam|module|path|url|uri|endpoint|href|output|result|exception|error|stack/.test(key));
        let decoded;
        try {
          decoded = decodeStartCommand({ ...validCommand, annotations: { [key]: text } });
        } catch (e) {
          expect(e).to.be.instanceOf(ValidationError); // text the codec forbids (R1.5)
          return;
        }
        expect(decoded.commandDigest).not.to.equal(validDigest);
      }),
      RUNS,
    );
  });

  it('R1.5 decoding arbitrary JSON never throws anything but ValidationError', () => {
    fc.assert(
      fc.property(json, (input) => {
        onlyValidationErrors(() => decodeStartCommand(input));
        onlyValidationErrors(() => decodeBarrierRecord(input));
        onlyValidationErrors(() => decodeLifecycleCommand(input));
      }),
      RUNS,
    );
  });

  it('R1.5 decoding arbitrary JS values (functions, errors, boxed, Date, Map, Set, typed and sparse arrays, null-prototype, bigint) never throws anything but ValidationError', () => {
    fc.assert(
      fc.property(anything, (input) => {
        onlyValidationErrors(() => decodeStartCommand(input));
        onlyValidationErrors(() => decodeBarrierRecord(input));
        onlyValidationErrors(() => decodeLifecycleCommand(input));
      }),
      RUNS,
    );
  });

  it('R1.5 a valid command or barrier with any one subtree replaced by anything decodes or fails with ValidationError only', () => {
    const barrier = (given(...base.history).when(startToolExecution(validCommand)).decided()[4] as EventOf<'ToolExecutionStartBarrierCommitted'>).data.barrier;
    const pathsOf = (v: unknown): string[][] => {
      const leaves = leafPaths(v);
      const inner = leaves.flatMap((p) => p.slice(0, -1).map((_, i) => p.slice(0, i + 1)));
      const extra = leaves.map((p) => [...p.slice(0, -1), 'extraField']);
      return [...leaves, ...inner, ...extra];
    };
    const commandPaths = pathsOf(validCommand);
    const barrierPaths = pathsOf(barrier);
    fc.assert(
      fc.property(fc.constantFrom(...commandPaths), fc.constantFrom(...barrierPaths), fc.oneof(anything, json), (cp, bp, value) => {
        onlyValidationErrors(() => decodeStartCommand(withPathUnsafe(validCommand, cp, value)));
        onlyValidationErrors(() => decodeBarrierRecord(withPathUnsafe(barrier, bp, value)));
      }),
      RUNS,
    );
  });
});

/** `withPath` for values structuredClone cannot copy (functions, symbols): copy only the spine. */
const withPathUnsafe = (value: unknown, path: readonly string[], replacement: unknown): unknown => {
  const [head, ...rest] = path;
  if (head === undefined) return replacement;
  const object = value as Record<string, unknown>;
  return { ...object, [head]: withPathUnsafe(object[head], rest, replacement) };
};
