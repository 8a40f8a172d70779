import type { RecoveryApi } from './authority';
import { historyOperation } from './recovery/history';
import { inDoubtOperation } from './recovery/inDoubt';
import { lookupOperation } from './recovery/lookup';
import { noteOperation, purgeNoteOperation } from './recovery/notes';
import { outcomeOperation, resolveOperation } from './recovery/resolve';
import { verifyOperation } from './recovery/verify';
import type { RecoveryBackend } from './recovery/view';

// The recovery read models and operator resolutions, written once over a small per-backend
// view (recovery/view.ts), so the backends cannot drift. One file per operation in recovery/;
// the rule they share, an answer only from records that agree, in recovery/agreement.ts.

export type { InDoubtFilter, InDoubtIndexRow, NoteRow, NoteStore, RecoveryBackend, RecoveryCounts, RecoveryView, VerifySession } from './recovery/view';
export { purgeDigestOf, purgeProblemOf } from './recovery/notes';
export { MAX_IN_DOUBT_LIMIT } from './recovery/inDoubt';
export { evidenceProblemOf } from './recovery/verify';

export const createRecoveryApi = (backend: RecoveryBackend): RecoveryApi => ({
  inDoubt: inDoubtOperation(backend),
  history: historyOperation(backend),
  lookup: lookupOperation(backend),
  outcome: outcomeOperation(backend),
  note: noteOperation(backend),
  purgeNote: purgeNoteOperation(backend),
  resolve: resolveOperation(backend),
  verify: verifyOperation(backend),
});
