import type { SqliteStartBarrier } from '../../infrastructure/sqlite';
import { openFreshSqlite } from '../sqlite/support';
import { recoveryConformance } from './recoveryConformance';
import { rawSqlite } from './support';

recoveryConformance({
  name: 'SQLite (better-sqlite3, real file)',
  controlsClock: false,
  open: () => openFreshSqlite(),
  raw: (a) => rawSqlite(a as SqliteStartBarrier),
  orphanNote: async (a, startId, digest, text) => void (a as SqliteStartBarrier).db.prepare('INSERT INTO resolution_notes (start_id, note_digest, note_text) VALUES (?, ?, ?)').run(startId, digest, text),
});
