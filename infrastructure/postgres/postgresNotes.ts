import type { Pool, PoolClient } from 'pg';
import type { NoteRow, NoteStore } from '../../application/recoveryRules';
import { mapPgError } from './errors';
import { bind, named } from './named';

// R10.2: resolution notes on PostgreSQL: one short autocommit statement each, on the
// authority's pool. The runtime role may insert a note and purge it, nothing else.

const INSERT_NOTE = named(`INSERT INTO ql3.resolution_notes (start_id, note_digest, note_text) VALUES (:start_id, :note_digest, :note_text)
  ON CONFLICT (start_id, note_digest) DO NOTHING`);
/** Through the owner's function: the runtime role has no UPDATE of its own (R9.1). */
const PURGE_NOTE = named('SELECT ql3.purge_resolution_note(:start_id, :note_digest) AS purged');
const NOTES_OF = named('SELECT start_id, note_digest, note_text, purged_at_ms, purge_digest FROM ql3.resolution_notes WHERE start_id = :start_id ORDER BY note_digest');
const ALL_NOTES = named('SELECT start_id, note_digest, note_text, purged_at_ms, purge_digest FROM ql3.resolution_notes ORDER BY start_id, note_digest');

/** `on` is read on each call: the authority builds its recovery surface before its pool field is set; `verify` passes its snapshot's client. */
export const createPostgresNoteStore = (on: () => Pool | PoolClient): NoteStore => {
  const q = async (sql: ReturnType<typeof named>, params: Record<string, unknown>): Promise<NoteRow[]> => {
    try {
      return (await on().query<NoteRow>(sql.text, bind(sql, params))).rows;
    } catch (e) {
      throw mapPgError(e);
    }
  };
  return {
    put: async (startId, noteDigest, text) => void (await q(INSERT_NOTE, { start_id: startId, note_digest: noteDigest, note_text: text })),
    purge: async (startId, noteDigest) => void (await q(PURGE_NOTE, { start_id: startId, note_digest: noteDigest })),
    rows: (startId) => q(NOTES_OF, { start_id: startId }),
    all: () => q(ALL_NOTES, {}),
  };
};
