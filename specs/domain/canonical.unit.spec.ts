import { createHash } from 'node:crypto';
import { expect } from 'chai';
import canonicalize from 'canonicalize';
import fc from 'fast-check';
import {
  DIGEST_PATTERN,
  RECORD_TAGS,
  canonicalCopyOf,
  canonicalJson,
  canonicalJsonOf,
  plainJsonIssues,
  commandDigestOf,
  decodeStartCommand,
  digestCanonical,
  digestOf,
  isCanonicalTextOf,
  digestedBarrierOf,
  startToolExecution,
  utf8Length,
  type EventOf,
} from '../../domain';
import { plainCanonicalCopyOf } from '../../domain/codecs';
import { given } from '../../testkit/deciderSpec';
import { scenarioWithHistory } from '../../testkit/domainFixtures';

// FROZEN golden vectors. Computed once from the code and pasted here as literals: any change in
// canonicalisation (RFC 8785), in the digest tags or in the domain separator, or in the shape of
// the command / barrier records, changes a stored digest and must fail here first. Never
// "update" these to make a spec pass: a new record shape is a new `@v2` tag. (The golden
// command comes from `buildScenario({ prefix: 'golden', requestedAtMs: 1780000000000 })`; a
// deliberate change to that fixture is the only reason to re-derive them, and says so.)

const GOLDEN = {
  commandDigest: 'sha256:5826d465a5204ca68aacfd0ed589dec0865d3127e8f492e91562d8624ce2e8f8',
  commandBytes: 1849,
  barrierDigest: 'sha256:efb97aaa1a681f58ef978069dfdfa29b3325ca432d0fceb64506ff30a83b7a87',
  barrierBytes: 2429,
  // keys out of order, a control character, quote and backslash, U+2028, an astral character
  // (UTF-16 surrogate pair sorts before U+FB00: RFC 8785 sorts by UTF-16 code units), numbers
  // in every ECMAScript Number-to-String branch, and -0.
  edgeObject: {
    z: 1,
    '\uFB00': 'ligature',
    '\u{1F600}': 'astral key',
    a: 'é\u2028\u{1F600}',
    '€': [1e21, 0.1, -0, 1.5e-7, 100, 9007199254740991, 1e-7, 123456789012345680000],
    '\u0000x': '\u001f"\\',
    b: { y: true, x: null },
  },
  edgeCanonical:
    '{"\\u0000x":"\\u001f\\"\\\\","a":"é\u2028\u{1F600}","b":{"x":null,"y":true},"z":1,"€":[1e+21,0.1,0,1.5e-7,100,9007199254740991,1e-7,123456789012345680000],"\u{1F600}":"astral key","\uFB00":"ligature"}',
  edgeCommandDigest: 'sha256:c194eeb105a58c34c2814b3e591f672285b4cafe5f821503974583f3243dc17a',
  edgeBarrierDigest: 'sha256:d96858f39f830e3ef8225481edeaace87e7040fe5a72f3bbbe2924c14ecaa15d',
} as const;

const golden = () => scenarioWithHistory({ prefix: 'golden', requestedAtMs: 1_780_000_000_000 });

const attempt = (f: () => unknown): { value?: unknown; error?: string } => {
  try {
    return { value: f() };
  } catch (e) {
    return { error: (e as Error).constructor.name };
  }
};

describe('R1 canonical JSON and domain-separated digests', () => {
  it('R1.1 the golden command canonicalises to a frozen size and digest', () => {
    const { scenario } = golden();
    const decoded = decodeStartCommand(scenario.startCommand());
    expect(utf8Length(decoded.canonical)).to.equal(GOLDEN.commandBytes);
    expect(decoded.commandDigest).to.equal(GOLDEN.commandDigest);
    expect(commandDigestOf(decoded.command)).to.equal(GOLDEN.commandDigest);
  });

  it('R1.2 the barrier the decider seals for the golden start has a frozen size and digest', () => {
    const { scenario, history } = golden();
    const decided = given(...history).when(startToolExecution(scenario.startCommand())).decided();
    const committed = decided[4] as EventOf<'ToolExecutionStartBarrierCommitted'>;
    expect(committed.type).to.equal('ToolExecutionStartBarrierCommitted');
    expect(committed.data.barrierDigest).to.equal(GOLDEN.barrierDigest);
    const sealed = digestedBarrierOf(committed.data.barrier);
    expect(utf8Length(sealed.canonical)).to.equal(GOLDEN.barrierBytes);
    expect(sealed.barrierDigest).to.equal(GOLDEN.barrierDigest);
    expect(committed.data.barrier.commandDigest).to.equal(GOLDEN.commandDigest);
  });

  it('R1.3 canonical JSON of edge-case values is frozen (RFC 8785: UTF-16 key order, ES number form, minimal escapes)', () => {
    expect(canonicalJson(GOLDEN.edgeObject)).to.equal(GOLDEN.edgeCanonical);
  });

  it('R1.3 digests are frozen and are sha256(tag || 0x00 || canonical JSON)', () => {
    const byHand = (tag: string) =>
      'sha256:' + createHash('sha256').update(Buffer.concat([Buffer.from(tag, 'utf8'), Buffer.from([0]), Buffer.from(GOLDEN.edgeCanonical, 'utf8')])).digest('hex');
    expect(digestOf(RECORD_TAGS.command, GOLDEN.edgeObject)).to.equal(byHand('qinglong/tool-execution-start-command@v1'));
    expect(digestOf(RECORD_TAGS.barrier, GOLDEN.edgeObject)).to.equal(byHand('qinglong/tool-execution-start-barrier@v1'));
    expect(digestOf(RECORD_TAGS.command, GOLDEN.edgeObject)).to.equal(GOLDEN.edgeCommandDigest);
    expect(digestOf(RECORD_TAGS.barrier, GOLDEN.edgeObject)).to.equal(GOLDEN.edgeBarrierDigest);
  });

  it('R1.3 the same JSON value gets different digests under the command tag and the barrier tag', () => {
    const { scenario } = golden();
    const command = scenario.startCommand();
    const canonical = canonicalJson(command);
    const asCommand = digestCanonical(RECORD_TAGS.command, canonical);
    const asBarrier = digestCanonical(RECORD_TAGS.barrier, canonical);
    expect(asCommand).to.match(DIGEST_PATTERN);
    expect(asBarrier).to.match(DIGEST_PATTERN);
    expect(asCommand).not.to.equal(asBarrier);
    // and every record kind has its own tag, so no two kinds can share a digest
    const tags = Object.values(RECORD_TAGS);
    expect(new Set(tags).size).to.equal(tags.length);
    expect(new Set(tags.map((tag) => digestCanonical(tag, canonical))).size).to.equal(tags.length);
    expect(RECORD_TAGS.command).to.equal('qinglong/tool-execution-start-command@v1');
    expect(RECORD_TAGS.barrier).to.equal('qinglong/tool-execution-start-barrier@v1');
  });

  it('R1.3 the tag/body split is unambiguous: moving bytes between tag and body changes the digest', () => {
    // Without a separator, ("…command@v1", "{}") and ("…command@v", "1{}") would hash alike.
    const joined = createHash('sha256').update('qinglong/tool-execution-start-command@v1{}').digest('hex');
    expect(digestCanonical(RECORD_TAGS.command, '{}')).not.to.equal('sha256:' + joined);
  });

  it('R1.3 canonical JSON equals the RFC 8785 reference package (canonicalize) byte for byte on arbitrary JSON', () => {
    // We serialise with safe-stable-stringify for speed (issue 6); the reference package is the
    // oracle. Full-unicode strings and keys (lone surrogates included), every number form.
    const text = fc.string({ unit: 'binary', maxLength: 12 });
    const number = fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.constantFrom(-0, 1e21, 1e-7, 5e-324, Number.MAX_VALUE));
    const value = fc.letrec((tie) => ({
      v: fc.oneof({ depthSize: 'small' }, fc.constant(null), fc.boolean(), number, text, fc.array(tie('v'), { maxLength: 5 }), fc.dictionary(text, tie('v'), { maxKeys: 6 })),
    })).v;
    fc.assert(
      fc.property(value, (v) => {
        expect(canonicalJson(v)).to.equal(canonicalize(v));
      }),
      { numRuns: 2000 },
    );
    expect(canonicalJson(GOLDEN.edgeObject)).to.equal(canonicalize(GOLDEN.edgeObject));
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, { a: Number.NEGATIVE_INFINITY }]) expect(() => canonicalJson(bad)).to.throw();
  });

  it('R1.3 the parse-and-compare canonical check gives the full check\'s verdict on any JSON text', () => {
    // isCanonicalTextOf proves stored text canonical on every verified read; it must never say
    // yes where re-serialising says no. Texts: canonical, natively serialised (insertion order,
    // integer-like keys first), and spaced out.
    const text = fc.string({ unit: 'binary', maxLength: 12 });
    const number = fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.constantFrom(-0, 1e21, 1e-7, 5e-324, Number.MAX_VALUE));
    const value = fc.letrec((tie) => ({
      v: fc.oneof({ depthSize: 'small' }, fc.constant(null), fc.boolean(), number, text, fc.array(tie('v'), { maxLength: 5 }), fc.dictionary(text, tie('v'), { maxKeys: 6 })),
    })).v;
    fc.assert(
      fc.property(value, fc.constantFrom(0, 1, 2), (v, form) => {
        const json = form === 0 ? canonicalJson(v) : JSON.stringify(v, null, form === 2 ? 1 : undefined);
        const parsed: unknown = JSON.parse(json);
        expect(isCanonicalTextOf(parsed, json)).to.equal(canonicalJson(parsed) === json);
      }),
      { numRuns: 3000 },
    );
    for (const json of ['{"b":1,"a":2}', '{"10":1,"9":2}', '{"a":1,"a":1}', '{"a":-0}', '{"a":1.0}', '{"a":"\\u0041"}', '[1, 2]', '{"a":{"c":1,"b":2}}']) {
      expect(isCanonicalTextOf(JSON.parse(json), json), json).to.equal(false);
    }
  });

  it('R1.3 canonicalJsonOf (native when already in canonical key order) equals canonicalJson byte for byte on any JSON value, in any key order', () => {
    // Every record the decider seals goes through it. Values: arbitrary JSON as generated
    // (insertion order, integer-like keys enumerated first), and the same value re-read from its
    // canonical text (every object in order, so printed natively); plus what is not plain JSON.
    const text = fc.string({ unit: 'binary', maxLength: 12 });
    const number = fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.constantFrom(-0, 1e21, 1e-7, 5e-324, Number.MAX_VALUE));
    const value = fc.letrec((tie) => ({
      v: fc.oneof({ depthSize: 'small' }, fc.constant(null), fc.boolean(), number, text, fc.array(tie('v'), { maxLength: 5 }), fc.dictionary(text, tie('v'), { maxKeys: 6 })),
    })).v;
    fc.assert(
      fc.property(value, (v) => {
        expect(canonicalJsonOf(v)).to.equal(canonicalJson(v));
        const ordered: unknown = JSON.parse(canonicalJson(v));
        expect(canonicalJsonOf(ordered)).to.equal(canonicalJson(v));
      }),
      { numRuns: 3000 },
    );
    expect(canonicalJsonOf(GOLDEN.edgeObject)).to.equal(canonicalJson(GOLDEN.edgeObject));
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, { a: Number.NEGATIVE_INFINITY }, { a: undefined }, [undefined], { a: () => 1 }, new Date(0), { a: 1n }]) {
      const want = attempt(() => canonicalJson(bad));
      const got = attempt(() => canonicalJsonOf(bad));
      expect(got, String(bad)).to.deep.equal(want);
    }
  });

  it('R1.3 canonicalCopyOf gives what parsing the canonical text gives (same value, same key order, -0 as 0), and that text, or defers', () => {
    // decodeStartCommand's private copy of every command. Keys include integer-like ones and
    // `__proto__` (deferred to the sorting serialiser and a parse).
    const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 12 }), fc.constantFrom('__proto__', '10', '9', '0', 'a'));
    const number = fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.constantFrom(-0, 1e21, 1e-7, 5e-324, Number.MAX_VALUE));
    const value = fc.letrec((tie) => ({
      v: fc.oneof({ depthSize: 'small' }, fc.constant(null), fc.boolean(), number, text, fc.array(tie('v'), { maxLength: 5 }), fc.dictionary(text, tie('v'), { maxKeys: 6 })),
    })).v;
    let copied = 0;
    fc.assert(
      fc.property(value, (v) => {
        const got = canonicalCopyOf(v);
        if (got === undefined) return;
        copied++;
        const canonical = canonicalJson(v);
        expect(got.canonical).to.equal(canonical);
        expect(got.copy).to.deep.equal(JSON.parse(canonical));
        expect(JSON.stringify(got.copy)).to.equal(canonical);
      }),
      { numRuns: 3000 },
    );
    expect(copied).to.be.greaterThan(1000);
    expect(Object.is((canonicalCopyOf({ a: -0 })!.copy as { a: number }).a, 0), '-0 reads back as 0').to.equal(true);
    expect(canonicalCopyOf({ b: 1, '10': 2 })).to.equal(undefined);
    expect(canonicalCopyOf(JSON.parse('{"__proto__":{"a":1}}'))).to.equal(undefined);
  });

  it('R1.5 plainCanonicalCopyOf copies only what plainJsonIssues passes, exactly as canonicalCopyOf copies it (accessors, proxies, holes, symbols, errors, class instances, lone surrogates, depth)', () => {
    // decodeStartCommand's one walk: it may defer (undefined) on anything, but must never copy
    // what plainJsonIssues would refuse, nor copy differently.
    const sameAsLongWay = (v: unknown, label: string): boolean => {
      const got = plainCanonicalCopyOf(v);
      if (got === undefined) return false;
      expect(plainJsonIssues(v), label).to.deep.equal([]);
      const long = canonicalCopyOf(v);
      expect(long, label).not.to.equal(undefined);
      expect(got.canonical, label).to.equal(long!.canonical);
      expect(got.copy, label).to.deep.equal(long!.copy);
      return true;
    };
    fc.assert(fc.property(fc.anything({ withBigInt: true, withBoxedValues: true, withDate: true, withMap: true, withSet: true, withNullPrototype: true, withObjectString: true, withSparseArray: true, withTypedArray: true, withUnicodeString: true, maxDepth: 20 }), (v) => void sameAsLongWay(v, 'anything')), { numRuns: 3000 });
    const text = fc.string({ unit: 'binary', maxLength: 12 });
    const value = fc.letrec((tie) => ({
      v: fc.oneof({ depthSize: 'small' }, fc.constant(null), fc.boolean(), fc.double({ noNaN: true, noDefaultInfinity: true }), text, fc.array(tie('v'), { maxLength: 5 }), fc.dictionary(text, tie('v'), { maxKeys: 6 })),
    })).v;
    let copied = 0;
    fc.assert(
      fc.property(value, (v) => {
        const plain = JSON.parse(canonicalJson(v)) as unknown;
        if (sameAsLongWay(plain, 'parsed JSON')) copied++;
        else if (!/"[0-9]|__proto__|\\ud[89abcdef]/.test(canonicalJson(v))) expect.fail(`deferred on plain JSON ${canonicalJson(v)}`);
      }),
      { numRuns: 2000 },
    );
    expect(copied).to.be.greaterThan(1000);
    const getter = Object.defineProperty({ a: 1 }, 'b', { get: () => 2, enumerable: true });
    const hidden = Object.defineProperty({ a: 1 }, 'b', { get: () => 2, enumerable: false });
    const deep = JSON.parse(`${'{"a":'.repeat(17)}1${'}'.repeat(17)}`) as unknown;
    // eslint-disable-next-line no-sparse-arrays
    for (const [label, v] of Object.entries({ getter, hidden, deep, proxy: new Proxy({ a: 1 }, {}), holes: [1, , 3], error: new Error('x'), symbolKey: { [Symbol('s')]: 1, a: 1 }, lone: { a: '\ud800' }, loneKey: { '\udc00': 1 }, klass: new (class K {})(), fn: { a: () => 1 }, undef: { a: undefined }, nan: [Number.NaN] })) {
      expect(plainCanonicalCopyOf(v), label).to.equal(undefined);
    }
    expect(sameAsLongWay({ b: [1, { d: null, c: -0 }], a: 'x' }, 'nested')).to.equal(true);
  });

  it('R1.1 sizes are UTF-8 bytes of the canonical form, not UTF-16 code units', () => {
    expect(utf8Length(canonicalJson({ a: 'é' }))).to.equal(10);
    expect(utf8Length(canonicalJson({ a: '\u{1F600}' }))).to.equal(12);
    expect(canonicalJson({ a: '\u{1F600}' }).length).to.equal(10);
  });
});
