import { expect } from 'chai';
import { DeciderSpecification } from '@event-driven-io/emmett';
import {
  PreconditionError,
  REPLAY_IDENTITIES,
  noReplayHits,
  runDecider,
  type PreconditionReason,
  type ReplayHit,
  type ReplayHits,
  type ReplayIdentity,
  type RunCommand,
  type RunState,
  type RunStreamEvent,
} from '../domain';

// Given-when-then over the one Run decider. emmett's `then` ignores order and extra fields,
// so every spec that emits events asserts with `thenExactly`: fold the given events with the
// decider's own `evolve`, decide, and compare the exact ordered list with chai `deep.equal`.

const emmettSpec = DeciderSpecification.for(runDecider);

export const given = (...givenEvents: RunStreamEvent[]) => ({
  when: (command: RunCommand) => {
    const emmett = emmettSpec(givenEvents).when(command);
    return {
      thenNothingHappened: emmett.thenNothingHappened,
      thenThrows: emmett.thenThrows,
      /** The decision itself, for specs that go on to check it in other ways. */
      decided: (): RunStreamEvent[] => runDecider.decide(command, foldEvents(givenEvents)),
      /** Exact ordered events, every field; returns them for further assertions. */
      thenExactly: (expected: readonly RunStreamEvent[]): RunStreamEvent[] => {
        const state = foldEvents(givenEvents);
        const actual = runDecider.decide(command, state);
        expect(actual).to.deep.equal(expected);
        return actual;
      },
    };
  },
});

export const foldEvents = (events: readonly RunStreamEvent[], from: RunState = runDecider.initialState()): RunState =>
  events.reduce(runDecider.evolve, from);

/** Decide each command against the state so far and collect the events: a real history. */
export const historyOf = (commands: readonly RunCommand[], before: readonly RunStreamEvent[] = []): RunStreamEvent[] => {
  const events = [...before];
  let state = foldEvents(events);
  for (const command of commands) {
    for (const e of runDecider.decide(command, state)) {
      events.push(e);
      state = runDecider.evolve(state, e);
    }
  }
  return events;
};

/** An error check for `thenThrows(PreconditionError, preconditionFailed('…'))`; fails loudly. */
export const preconditionFailed =
  (reason: PreconditionReason) =>
  (error: PreconditionError): boolean => {
    expect(error.code).to.equal('PRECONDITION_FAILED');
    expect(error.reason, error.message).to.equal(reason);
    return true;
  };

/** What the replay index would return: the given identities each bound to `hit`. */
export const replayHits = (identities: readonly ReplayIdentity[], hit: ReplayHit): ReplayHits => {
  const hits: Record<ReplayIdentity, ReplayHit[]> = { ...noReplayHits() } as Record<ReplayIdentity, ReplayHit[]>;
  for (const identity of identities) hits[identity] = [hit];
  return hits;
};

export const allIdentitiesHit = (hit: ReplayHit): ReplayHits => replayHits(REPLAY_IDENTITIES, hit);
