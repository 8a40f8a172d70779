import { purgeDigestOf, type NoteRow, type NoteStore } from '../../application/recoveryRules';

// R10.2: the redactable side record of resolution notes, in memory (the twin of the
// `resolution_notes` tables). Keyed by a Map: ids are data.

export const createMemoryNoteStore = (clock: () => number): NoteStore => {
  const rows = new Map<string, NoteRow>();
  const key = (startId: string, digest: string) => `${startId}\u0000${digest}`;
  return {
    put: async (startId, noteDigest, text) => {
      if (!rows.has(key(startId, noteDigest))) rows.set(key(startId, noteDigest), { start_id: startId, note_digest: noteDigest, note_text: text, purged_at_ms: null, purge_digest: null });
    },
    purge: async (startId, noteDigest) => {
      const row = rows.get(key(startId, noteDigest));
      if (row === undefined || row.note_text === null) return;
      const at = clock();
      rows.set(key(startId, noteDigest), { ...row, note_text: null, purged_at_ms: at, purge_digest: purgeDigestOf(startId, noteDigest, at) });
    },
    rows: async (startId) => [...rows.values()].filter((r) => r.start_id === startId),
    all: async () => [...rows.values()].sort((a, b) => (key(a.start_id, a.note_digest) < key(b.start_id, b.note_digest) ? -1 : 1)),
  };
};
