import { expect } from 'chai';
import fc from 'fast-check';
import { ValidationError, parseJsonBytes } from '../../domain';
import { expectIssue } from '../support/validation';

// R10.1, the parser alone: what JSON.parse reads the same way is read the same way; what it
// would read differently (or not at all) is refused by path.

describe('R10.1 strict JSON parsing', () => {
  it('R10.1 agrees with JSON.parse on every JSON text without duplicates or lossy numbers (fast-check)', () => {
    const exact = fc.jsonValue({ maxDepth: 6 }).filter((v) => !JSON.stringify(v).includes('-0') && JSON.stringify(v) !== undefined);
    fc.assert(
      fc.property(exact, fc.boolean(), (value, pretty) => {
        const text = JSON.stringify(value, null, pretty ? 2 : undefined);
        expect(parseJsonBytes('x', Buffer.from(text))).to.deep.equal(JSON.parse(text));
      }),
      { numRuns: 300, seed: 20261201 },
    );
  });

  it('R10.1 a duplicate key at any depth is refused at its path (fast-check)', () => {
    const key = fc.string({ minLength: 1, maxLength: 8 }).filter((k) => !k.includes('.') && !k.includes('['));
    fc.assert(
      fc.property(fc.array(key, { minLength: 1, maxLength: 4 }), key, (path, dup) => {
        const inner = `{${JSON.stringify(dup)}:1,${JSON.stringify(dup)}:2}`;
        const text = path.reduceRight((acc, k) => `{${JSON.stringify(k)}:${acc}}`, inner);
        expectIssue(() => parseJsonBytes('x', text), [...path, dup].join('.'), 'invalid_json');
      }),
      { numRuns: 200, seed: 20261201 },
    );
  });

  it('R10.1 numbers: exact texts pass (1.0, 1e3, 0.1, 1e21, -3), lossy ones are refused with the reason', () => {
    expect(parseJsonBytes('x', '[1.0,1e3,0.1,1e21,-3,0,0e5,1.5e-7]')).to.deep.equal([1, 1000, 0.1, 1e21, -3, 0, 0, 1.5e-7]);
    for (const [text, says] of [
      ['1e-400', 'underflows'],
      ['1e400', 'overflows'],
      ['-1e400', 'overflows'],
      ['7.0000000000000001', 'does not round-trip'],
      ['9007199254740993', 'does not round-trip'],
      ['-0', 'negative zero'],
      ['-0.0e7', 'negative zero'],
    ] as const) {
      const e = expectIssue(() => parseJsonBytes('x', `{"n":[${text}]}`), 'n[0]', 'invalid_json');
      expect(e.issues[0]?.message).to.contain(says);
    }
  });

  it('R10.1 a BOM is refused, never skipped (bytes and text); invalid UTF-8 and trailing text too', () => {
    expectIssue(() => parseJsonBytes('x', Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d])), '(root)', 'invalid_json');
    expectIssue(() => parseJsonBytes('x', '\uFEFF{}'), '(root)', 'invalid_json');
    expectIssue(() => parseJsonBytes('x', Buffer.from([0x22, 0xff, 0x22])), '(root)', 'invalid_json');
    expectIssue(() => parseJsonBytes('x', '{} {}'), '(root)', 'invalid_json');
    expectIssue(() => parseJsonBytes('x', '{"a":1,}'), '(root)', 'invalid_json');
  });

  it('R10.1 nesting past 64 levels is refused before the recursive parse (no stack overflow on 10^6 brackets)', () => {
    expectIssue(() => parseJsonBytes('x', '['.repeat(1_000_000)), '(root)', 'too_deep');
    expect(() => parseJsonBytes('x', `${'['.repeat(64)}${']'.repeat(64)}`)).to.not.throw();
    // brackets inside strings do not count
    expect(parseJsonBytes('x', JSON.stringify({ s: '['.repeat(100) }))).to.deep.equal({ s: '['.repeat(100) });
  });

  it('ids are data: "__proto__" and "constructor" keys are own data properties, never a prototype', () => {
    const v = parseJsonBytes('x', '{"__proto__":{"polluted":1},"constructor":2}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(v)).to.equal(Object.prototype);
    expect(Object.keys(v)).to.deep.equal(['__proto__', 'constructor']);
    expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
    expect(() => parseJsonBytes('x', '{"__proto__":1,"__proto__":2}')).to.throw(ValidationError);
  });
});
