import { expect } from 'chai';
import fc from 'fast-check';
import type { Pool } from 'pg';
import { escapeLiteral, literalText } from '../../infrastructure/postgres/roundTripSql';
import { createDatabase, testPool, type TestDatabase } from '../../testkit/postgresHarness';

describe('R3 the write round trip\'s literals are the very text of each value (PostgreSQL)', () => {
  let db: TestDatabase;
  let pool: Pool;
  before(async () => {
    db = await createDatabase();
    pool = testPool({ connectionString: db.url, max: 1 });
  });
  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  it('R3 a literal reads back as its text: dollar-quoted, or escaped where a tag could end it early', async () => {
    const piece = fc.constantFrom('a', "'", '\\', '"', '$', '$ql3', 'ql3$', '$ql3$', 'E', ' ', '\n', 'é', '\u{1F600}', '{"a":"b\\"c"}', '$$');
    const texts = fc.sample(fc.array(piece, { maxLength: 10 }).map((p) => p.join('')), 300);
    texts.push('', '$', '$ql3', 'x$ql3', '$ql3$', 'a$ql3$b', '$ql3$$ql3$', 'ql3$', '\\', "'", '{"barrier":{"x":"\\u0041"}}');
    const literals = texts.map((text) => literalText(text));
    const { rows } = await pool.query<{ v: string[] }>(`SELECT ARRAY[${literals.map((l) => `${l}::text`).join(', ')}] AS v`);
    expect(rows[0]!.v).to.deep.equal(texts);
    // the tag is used only where there is something to escape and it cannot end the constant early
    expect(literalText('run-1')).to.equal("'run-1'");
    expect(literalText("x'$ql3")).to.equal(escapeLiteral("x'$ql3"));
    expect(literalText("a'$ql3$b")).to.equal(escapeLiteral("a'$ql3$b"));
    const json = '{"a":"it\'s \\\\"}';
    expect(literalText(json)).to.equal('$ql3$' + json + '$ql3$');
  });
});
