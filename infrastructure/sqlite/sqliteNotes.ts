import type Database from 'better-sqlite3';
import { purgeDigestOf, type NoteRow, type NoteStore } from '../../application/recoveryRules';
import { mappedRead } from './errors';

// R10.2: resolution notes on SQLite (resolution_notes). Writes run as the authority's own write
// operations (its one connection, serially); reads are plain statements, so `verify` can read
// a note from inside its snapshot on that same connection.

const INSERT_NOTE = 'INSERT INTO resolution_notes (start_id, note_digest, note_text) VALUES (?, ?, ?) ON CONFLICT (start_id, note_digest) DO NOTHING';
/** The purge time (the database clock) and its digest are written together. */
const PURGE_NOTE = `UPDATE resolution_notes SET note_text = NULL, purged_at_ms = ?, purge_digest = ?
  WHERE start_id = ? AND note_digest = ? AND note_text IS NOT NULL`;
const NOW_MS = "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS now_ms";
const NOTES_OF = 'SELECT start_id, note_digest, note_text, purged_at_ms, purge_digest FROM resolution_notes WHERE start_id = ? ORDER BY note_digest';
const ALL_NOTES = 'SELECT start_id, note_digest, note_text, purged_at_ms, purge_digest FROM resolution_notes ORDER BY start_id, note_digest';

export const createSqliteNoteStore = (db: () => Database.Database, write: (body: () => Promise<void>) => Promise<void>): NoteStore => ({
  put: (startId, noteDigest, text) => write(async () => void db().prepare(INSERT_NOTE).run(startId, noteDigest, text)),
  purge: (startId, noteDigest) =>
    write(async () => {
      const at = (db().prepare(NOW_MS).get() as { now_ms: number }).now_ms;
      db().prepare(PURGE_NOTE).run(at, purgeDigestOf(startId, noteDigest, at), startId, noteDigest);
    }),
  rows: (startId) => mappedRead(() => db().prepare(NOTES_OF).all(startId) as NoteRow[]),
  all: () => mappedRead(() => db().prepare(ALL_NOTES).all() as NoteRow[]),
});
