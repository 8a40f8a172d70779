// `@qinglong/start-barrier/testing`: the in-memory authority (the same surface and the same
// conformance suite as SQLite and PostgreSQL, no driver) and a complete valid scenario, for
// users' own given-when-then specs.
export { openMemoryStartBarrier, type MemoryStartBarrierOptions } from './memoryAuthority';
export { buildScenario, type Scenario, type ScenarioOptions } from '../../domain/scenario';
export type {
  RecoverableStartBarrierAuthority,
  StartBarrierAuthority,
  RecoveryApi,
  InDoubtQuery,
  VerifyOptions,
} from '../../application/authority';
export type { PrepareResult, StoredBarrier, StepRunView, StoredEvent, AppendOutcome, InDoubtStart, AttemptHistoryEntry, StartOutcome, ResolveResult, VerifyProblem, VerifyReport } from '../../domain/records';
