import { CorruptRecordError, PreconditionError, noteDigestOf } from '../../domain';
import { Identity, decodeOrThrow } from '../../domain/codecs';
import { NOTE_PURGE_DIGEST_TAG, fieldsDigest } from '../../domain/eventChain';
import type { ResolutionNote } from '../../domain/records';
import type { RecoveryApi } from '../authority';
import { agreedOutcomeOf } from './agreement';
import type { NoteRow, RecoveryBackend } from './view';

// Resolution notes (R10.2): a person's words on an outcome, kept in a side record the outcome
// binds by digest. `recovery.note` reads the one an outcome binds; `recovery.purgeNote` erases
// its text for good (its digest stays bound, so `verify` stays green).

/** The digest a purge writes over the note's identity and its purge time. */
export const purgeDigestOf = (startId: string, noteDigest: string, purgedAtMs: number | string): string =>
  fieldsDigest(NOTE_PURGE_DIGEST_TAG, [startId, noteDigest, Number(purgedAtMs)]);

/** A purged note whose purge time no longer matches its digest, or a note with text that carries a purge, or undefined. */
export const purgeProblemOf = (row: NoteRow): string | undefined => {
  if (row.note_text !== null) {
    return row.purged_at_ms === null && row.purge_digest === null ? undefined : `resolution note ${row.note_digest}: it holds its text and a purge time or purge digest`;
  }
  return row.purged_at_ms !== null && row.purge_digest !== purgeDigestOf(row.start_id, row.note_digest, row.purged_at_ms)
    ? `resolution note ${row.note_digest}: its purge time ${String(row.purged_at_ms)} does not match purge_digest`
    : undefined;
};

/** The note a digest binds, verified: its text must hash to the digest, or it is purged. */
export const noteOf = (startId: string, noteDigest: string, rows: readonly NoteRow[]): ResolutionNote => {
  const row = rows.find((r) => r.note_digest === noteDigest);
  if (row === undefined) throw new CorruptRecordError('resolution note', startId, `its outcome binds note ${noteDigest}, which is missing`);
  if (row.note_text === null) {
    if (row.purged_at_ms === null) throw new CorruptRecordError('resolution note', startId, 'note has neither text nor a purge time');
    const damaged = purgeProblemOf(row);
    if (damaged !== undefined) throw new CorruptRecordError('resolution note', startId, damaged);
    return { startId, noteDigest, status: 'purged', purgedAtMs: Number(row.purged_at_ms) };
  }
  if (noteDigestOf(row.note_text) !== noteDigest) throw new CorruptRecordError('resolution note', startId, 'note text does not match the digest its outcome binds');
  const damaged = purgeProblemOf(row);
  if (damaged !== undefined) throw new CorruptRecordError('resolution note', startId, damaged);
  return { startId, noteDigest, status: 'present', text: row.note_text };
};

export const noteOperation =
  (backend: RecoveryBackend): RecoveryApi['note'] =>
  async (startId) => {
    const id = decodeOrThrow(Identity, 'startId', startId);
    const outcome = await backend.snapshot(async (v) => (await agreedOutcomeOf(v, id, backend.keyring?.())).outcome);
    if (outcome?.noteDigest === undefined) return null;
    return noteOf(id, outcome.noteDigest, await backend.notes.rows(id));
  };

export const purgeNoteOperation =
  (backend: RecoveryBackend): RecoveryApi['purgeNote'] =>
  async (startId) => {
    const id = decodeOrThrow(Identity, 'startId', startId);
    const outcome = await backend.snapshot(async (v) => (await agreedOutcomeOf(v, id, backend.keyring?.())).outcome);
    // An orphan (a resolve that stopped between its note and its outcome event) is purged too:
    // it is no evidence, but its text is a person's words kept for nothing (R10.2).
    // Nothing is purged until every row reads as what it is: the note the outcome binds is
    // there, and each text still hashes to its digest. A damaged row is never an orphan to
    // purge (that would destroy the only copy of a bound note's text).
    const rows = await backend.notes.rows(id);
    if (outcome?.noteDigest !== undefined) noteOf(id, outcome.noteDigest, rows);
    for (const r of rows) {
      if (r.note_text !== null && noteDigestOf(r.note_text) !== r.note_digest) throw new CorruptRecordError('resolution note', id, `note ${r.note_digest}: its text does not hash to its digest`);
      const damaged = purgeProblemOf(r);
      if (damaged !== undefined) throw new CorruptRecordError('resolution note', id, damaged);
    }
    const orphans = rows.filter((r) => r.note_text !== null && r.note_digest !== outcome?.noteDigest);
    for (const o of orphans) await backend.notes.purge(id, o.note_digest);
    if (outcome?.noteDigest === undefined) {
      const last = orphans[orphans.length - 1];
      if (last === undefined) throw new PreconditionError('note_not_found', `the outcome of start ${id} binds no note`);
      const row = (await backend.notes.rows(id)).find((r) => r.note_digest === last.note_digest);
      return { startId: id, noteDigest: last.note_digest, status: 'purged', purgedAtMs: Number(row?.purged_at_ms) };
    }
    const current = noteOf(id, outcome.noteDigest, await backend.notes.rows(id));
    if (current.status === 'purged') return current;
    await backend.notes.purge(id, outcome.noteDigest);
    return noteOf(id, outcome.noteDigest, await backend.notes.rows(id));
  };
