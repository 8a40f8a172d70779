import { Identity, Version, decodeOrThrow, strictObject } from './codecs';

// The read APIs take their arguments from callers as they come (a JSON body, a CLI line, a
// query string). Every backend checks them here, the same way, before any driver sees them:
// `{}`, NaN or undefined is VALIDATION_FAILED naming the argument, never a driver's RangeError,
// a missing SQL parameter, or a silent null.

const StartIdArgs = strictObject('getByStartId arguments', { startId: Identity });
const AttemptArgs = strictObject('getByStepRunAttempt arguments', { runId: Identity, stepRunId: Identity, startedStepRunVersion: Version });
const StepRunArgs = strictObject('StepRun arguments', { runId: Identity, stepRunId: Identity });
const RunArgs = strictObject('Run arguments', { runId: Identity });

export const decodeStartIdArgs = (startId: unknown): string => decodeOrThrow(StartIdArgs, 'getByStartId arguments', { startId }).startId;

export const decodeAttemptArgs = (runId: unknown, stepRunId: unknown, startedStepRunVersion: unknown) =>
  decodeOrThrow(AttemptArgs, 'getByStepRunAttempt arguments', { runId, stepRunId, startedStepRunVersion });

export const decodeStepRunArgs = (runId: unknown, stepRunId: unknown) => decodeOrThrow(StepRunArgs, 'StepRun arguments', { runId, stepRunId });

export const decodeRunArgs = (runId: unknown): string => decodeOrThrow(RunArgs, 'Run arguments', { runId }).runId;
