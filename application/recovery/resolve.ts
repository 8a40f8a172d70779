import { CorruptRecordError, PreconditionError, SemanticConflictError, decodeResolve, noteDigestOf, resolutionCommandOf, type StartOutcomeKind } from '../../domain';
import { Identity, decodeOrThrow } from '../../domain/codecs';
import type { ResolveResult, StartOutcome } from '../../domain/records';
import type { RecoveryApi } from '../authority';
import { agreedOutcomeOf, outcomeOf } from './agreement';
import type { RecoveryBackend } from './view';

// `recovery.outcome` and `recovery.resolve`: an operator's resolution is a new lifecycle event
// (never an edit), made only for a start whose records agree (R9.3); the same outcome again is
// `existing`, another one a typed conflict.

export const outcomeOperation =
  (backend: RecoveryBackend): RecoveryApi['outcome'] =>
  async (startId) => {
    const id = decodeOrThrow(Identity, 'startId', startId);
    return backend.snapshot(async (v) => (await agreedOutcomeOf(v, id, backend.keyring?.())).outcome);
  };

export const resolveOperation =
  (backend: RecoveryBackend): RecoveryApi['resolve'] =>
  async (startId, outcome, options) => {
    const clock = backend.clock ?? Date.now;
    const req = decodeResolve(startId, outcome, options);
    const settled = (existing: StartOutcome): ResolveResult => {
      if (existing.outcome === req.outcome) return { status: 'existing', outcome: existing };
      throw new SemanticConflictError(
        'startId',
        req.startId,
        req.startId,
        `start ${req.startId} is already resolved as ${existing.outcome} by ${existing.decidedBy}; outcomes are facts, not edits (retry with a new attempt instead)`,
      );
    };
    const before = await backend.snapshot((v) => agreedOutcomeOf(v, req.startId, backend.keyring?.()));
    if (before.outcome !== null) return settled(before.outcome);
    const b = before.barrier.record;
    // R10.2: the note goes to its side record first; the event then binds its digest. If the
    // event is not ours in the end (a failure, a racing resolver), our note is purged again.
    const note = req.options.note === undefined ? undefined : { digest: noteDigestOf(req.options.note), text: req.options.note };
    if (note !== undefined) await backend.notes.put(req.startId, note.digest, note.text);
    const dropOrphanNote = async (bound: StartOutcome | null): Promise<void> => {
      if (note !== undefined && bound?.noteDigest !== note.digest) await backend.notes.purge(req.startId, note.digest);
    };
    const command = resolutionCommandOf(
      { startId: b.startId, runId: b.runId, stepRunId: b.stepRunId, startedStepRunVersion: b.attempt.startedStepRunVersion },
      req.outcome as StartOutcomeKind,
      req.options,
      clock(),
    );
    try {
      await backend.handle(command);
    } catch (e) {
      const after = await backend.snapshot((v) => outcomeOf(v, req.startId, backend.keyring?.())).catch(() => null);
      await dropOrphanNote(after);
      // Lost a race with another resolver: the winner's fact decides, exactly as a replay would.
      if (!(e instanceof PreconditionError)) throw e;
      if (after === null) throw e;
      return settled(after);
    }
    const recorded = await backend.snapshot((v) => outcomeOf(v, req.startId, backend.keyring?.()));
    if (recorded === null) throw new CorruptRecordError('start outcome', req.startId, 'the outcome event was appended but not projected');
    return { status: 'recorded', outcome: recorded };
  };
