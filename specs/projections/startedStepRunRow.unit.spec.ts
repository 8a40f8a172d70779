import { expect } from 'chai';
import fc from 'fast-check';
import { stepRunDigest, type StepRunState } from '../../domain';
import { startedStepRunRowOf, stepRunRowOf } from '../../projections/rows';

// R3.4: the StepRun row a start writes is the row of the StepRun it started, whichever way it
// is built. startedStepRunRowOf (the write plan's, in canonical key order, with the decider's
// digest) against stepRunRowOf of the started state (its oracle).

const id = fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/);
const digest = fc.stringMatching(/^[0-9a-f]{64}$/).map((h) => `sha256:${h}`);
const ref = fc.record({ id, digest });
const stepRun: fc.Arbitrary<StepRunState> = fc
  .record(
    {
      runId: id,
      stepRunId: id,
      projectId: id,
      kind: fc.constantFrom('tool', 'llm', 'human', 'workflow'),
      status: fc.constantFrom('ready', 'waiting_approval'),
      version: fc.integer({ min: 1, max: 1_000_000 }),
      toolDefinition: ref,
      approval: fc.record({ approvalRequestId: id, dispatchId: id, approvalDigest: digest }),
      lastStartId: id,
    },
    { requiredKeys: ['runId', 'stepRunId', 'projectId', 'kind', 'status', 'version'] },
  )
  .map((s) => s as StepRunState);

describe('R3.4 the started StepRun row of a write plan', () => {
  it('R3.4 equals stepRunRowOf of the started state (same digest, same canonical state JSON), with or without approval, definition or an earlier attempt', () => {
    fc.assert(
      fc.property(stepRun, id, (from, startId) => {
        const started: StepRunState = { ...from, status: 'running', version: from.version + 1, lastStartId: startId };
        expect(startedStepRunRowOf(from, from.version + 1, startId, stepRunDigest(started))).to.deep.equal(stepRunRowOf(started));
      }),
      { numRuns: 500 },
    );
  });
});
