import { expect } from 'chai';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { REPLAY_IDENTITIES } from '../../domain';
import * as Memory from '../../infrastructure/memory/identities';
import * as Pg from '../../infrastructure/postgres/identities';
import * as Lite from '../../infrastructure/sqlite/identities';

// R4.1: the seven identities live in one table per backend, and everything a backend does
// with them (lookup, probes, recovery lookup, unique-violation mapping) is derived from it.

const ROOT = join(__dirname, '..', '..');

describe('R4.1 one identity table per backend', () => {
  it('R4.1 each table names exactly the identities of R4.1, in their order', () => {
    for (const table of [Memory.IDENTITY_STORAGE, Pg.IDENTITY_STORAGE, Lite.IDENTITY_STORAGE]) expect(Object.keys(table)).to.deep.equal([...REPLAY_IDENTITIES]);
  });

  it('R4.1 a new identity needs one PostgreSQL table entry (plus its migration): lookup, probes, recovery and violation mapping follow', () => {
    const table = { ...Pg.IDENTITY_STORAGE, ticketId: { column: 'ticket_id', constraints: ['tool_execution_start_barriers_ticket_id_key'] } };
    expect(Pg.lookupReplaySql(table)).to.contain(`('ticketId', :ticket_id)`);
    expect(Pg.barrierProbesSql(table)).to.contain(`SELECT 'ticketId', b.ticket_id FROM b`);
    // the compact replay index (pg-0051): every probe is derived from the barrier, none reads the index by start_id
    expect(Pg.barrierProbesSql(table)).to.not.contain('start_replay_identities');
    expect(Pg.lookupReplaySql(table)).to.contain('ib.command_digest');
    expect(Pg.identityStartIdsSql(table.ticketId)).to.contain('WHERE ticket_id = :key');
    expect(Pg.identityOfViolation({ constraint: 'tool_execution_start_barriers_ticket_id_key' }, table)).to.equal('ticketId');
    expect(Pg.identityOfViolation({ constraint: 'start_replay_identities_key', detail: 'Key (identity, value)=(ticketId, t-1) already exists.' }, table)).to.equal('ticketId');
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
