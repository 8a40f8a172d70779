import { expect } from 'chai';
import fc from 'fast-check';
import { escapeLiteral as pgEscapeLiteral } from 'pg';
import { escapeLiteral } from '../../infrastructure/postgres/roundTripSql';

describe('R3 the write round trip inlines each value as the literal pg itself would escape', () => {
  it('R3 escapeLiteral gives pg escapeLiteral byte for byte: quotes, backslashes, NUL, any unicode', () => {
    const tricky = fc.string({ unit: fc.constantFrom('a', "'", '\\', 'E', ' ', '\u0000', 'é', '\u{1F600}', '"', '\n') });
    fc.assert(fc.property(fc.oneof(tricky, fc.string({ unit: 'binary' })), (text) => {
      expect(escapeLiteral(text)).to.equal(pgEscapeLiteral(text));
    }), { numRuns: 5000 });
    for (const text of ['', "'", '\\', "'\\'", '{"a":"it\'s"}', 'x'.repeat(70_000)]) expect(escapeLiteral(text)).to.equal(pgEscapeLiteral(text));
  });
});
