import { expect } from 'chai';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { REPLAY_IDENTITIES } from '../../domain';
import * as Memory from '../../infrastructure/memory/identities';
import * as Pg from '../../infrastructure/postgres/identities';
import * as Lite from '../../infrastructure/sqlite/identities';

// R4.1: where the seven identities live is one table per backend (on PostgreSQL, the unique key
// of the fact that carries each), and everything a backend does with them (lookup, probes,
// recovery lookup, unique-violation mapping) is derived from it.

const ROOT = join(__dirname, '..', '..');

describe('R4.1 one identity table per backend', () => {
  it('R4.1 each table names exactly the identities of R4.1, in their order', () => {
    for (const table of [Memory.IDENTITY_STORAGE, Pg.IDENTITY_STORAGE, Lite.IDENTITY_STORAGE]) expect(Object.keys(table)).to.deep.equal([...REPLAY_IDENTITIES]);
  });

  it('R4.1 a new identity needs one PostgreSQL table entry (plus its key in the schema file): lookup, recovery, compaction guard and violation mapping follow', () => {
    const ticket: Pg.IdentityStorage = {
      table: 'ql3.tickets',
      key: ['ticket_id'],
      startOf: 'f.start_id',
      barrier: ['ticket_id'],
      constraints: ['tickets_pkey'],
      fact: ({ barrier }) => ({ value: barrier.start_id, start_id: barrier.start_id }),
    };
    const table = { ...Pg.IDENTITY_STORAGE, ticketId: ticket };
    // each identity is probed in its own fact's unique key, never in a replay-index table
    expect(Pg.lookupReplaySql(table)).to.contain(`SELECT 'ticketId'::text AS identity, :ticket_id::text AS value, f.start_id AS start_id FROM ql3.tickets f WHERE f.ticket_id = :ticket_id`);
    expect(Pg.lookupReplaySql(table)).to.not.contain('start_replay_identities');
    expect(Pg.lookupReplaySql(table)).to.contain('ib.command_digest');
    expect(Pg.identityStartIdsSql(ticket)).to.contain('WHERE f.ticket_id = :key');
    expect(Pg.liveCompactedSql(table)).to.contain(`c.identity = 'ticketId' AND EXISTS (SELECT 1 FROM ql3.tickets f WHERE f.ticket_id = c.value)`);
    expect(Pg.barrierIdentitiesSql('b', table)).to.contain(`('ticketId', b.ticket_id)`);
    expect(Pg.identityOfViolation({ constraint: 'tickets_pkey' }, table)).to.equal('ticketId');
    // a compacted identity's reuse names it in the key the guard raises
    expect(Pg.identityOfViolation({ constraint: 'compacted_identities_pkey', detail: 'Key (identity, value)=(ticketId, t-1) already exists (compacted, R14.2).' }, table)).to.equal('ticketId');
    // the attempt is the barrier's own unique key, matched against the parts of its canonical JSON
    expect(Pg.lookupReplaySql()).to.contain('(f.run_id, f.step_run_id, f.started_step_run_version) = ((:attempt)::json ->> 0');
    expect(Pg.identityOfViolation({ constraint: 'tool_execution_start_barriers_attempt_key' })).to.equal('attempt');
  });

  it('R4.1 a new identity needs one SQLite table entry (plus the key that holds it): lookup, probes, recovery and violation mapping follow', () => {
    const table = { ...Lite.IDENTITY_STORAGE, ticketId: { column: 'ticket_id', unique: ['tickets.ticket_id'], via: 'tickets' } };
    // each identity is probed by the key of the row that holds it: the facts' own keys, no replay-index table
    expect(Lite.lookupReplaySql(table)).to.contain(`SELECT 'ticketId' AS identity, k.ticket_id AS value, k.start_id FROM tickets k WHERE k.ticket_id = ?`);
    expect(Lite.lookupReplaySql(table).match(/\?/g)).to.have.length(REPLAY_IDENTITIES.length + 1);
    expect(Lite.lookupReplaySql(table)).to.not.contain('start_replay_identities');
    expect(Lite.identitiesOfStartSql(table)).to.contain('FROM tickets k WHERE k.ticket_id = ?');
    // the attempt is the barrier's unique key, probed by its three columns
    expect(Lite.lookupReplaySql(table)).to.contain("k.run_id = CASE WHEN json_valid(p.v) THEN json_extract(p.v, '$[0]') END");
    // the command digest is read once per start the rows name, not joined to each probe
    expect(Lite.commandDigestOfStartSql()).to.contain('WHERE start_id = ?');
    expect(Lite.identityStartIdsSql(table.ticketId)).to.contain('WHERE ticket_id = @key');
    expect(Lite.identityOfUniqueColumn('tickets.ticket_id', table)).to.equal('ticketId');
    expect(Lite.identityOfUniqueColumn('tool_execution_start_barriers.run_id')).to.equal('attempt');
    expect(Lite.barrierIdentitiesSql(table)).to.contain(`SELECT 'ticketId' AS identity, k.ticket_id AS value`);
  });

  it('R4.1 PostgreSQL maps a refused event id to the identity its prefix names (events_event_id_key)', () => {
    const detail = (id: string) => ({ constraint: 'events_event_id_key', detail: `Key (event_id)=(${id}) already exists.` });
    expect(Pg.identityOfViolation(detail('audit:a-1'))).to.equal('auditEventId');
    expect(Pg.identityOfViolation(detail('trace:t-1'))).to.equal('traceId');
    expect(Pg.identityOfViolation(detail('receipt:r-1'))).to.equal('auditReceiptId');
    expect(Pg.identityOfViolation(detail('barrier:s-1'))).to.equal('startId');
    expect(Pg.identityOfViolation(detail('re-1'))).to.equal('runEventId');
    expect(Pg.identityOfViolation({ constraint: 'streams_pkey' })).to.equal(undefined);
  });

  it('R4.1 no adapter file outside its identity table lists an identity by name', () => {
    const names = REPLAY_IDENTITIES.filter((i) => i !== 'attempt');
    for (const dir of ['memory', 'sqlite', 'postgres']) {
      // .made.ts: the catalog as a migration made it (its CHECKs list the identities the SQL does), written by a script
      for (const f of readdirSync(join(ROOT, 'infrastructure', dir)).filter((n) => n.endsWith('.ts') && n !== 'identities.ts' && !n.endsWith('.made.ts'))) {
        const text = readFileSync(join(ROOT, 'infrastructure', dir, f), 'utf8');
        for (const name of names) expect(text, `${relative(ROOT, join(ROOT, 'infrastructure', dir, f))} names ${name}`).to.not.contain(`'${name}'`);
      }
    }
  });
});
