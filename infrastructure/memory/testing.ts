// `@qinglong/start-barrier/testing`: the in-memory authority (the same surface and the same
// conformance suite as SQLite and PostgreSQL, no driver) and a complete valid scenario, for
// users' own given-when-then specs.
export { openMemoryStartBarrier, type MemoryStartBarrierOptions } from './memoryAuthority';
export { buildScenario, type Scenario, type ScenarioOptions } from '../../domain/scenario';
export type {
  RecoverableStartBarrierAuthority,
  StartBarrierAuthority,
  PrepareResult,
  StoredBarrier,
  StepRunView,
  StoredEvent,
  AppendOutcome,
  RecoveryApi,
  InDoubtQuery,
  InDoubtStart,
  AttemptHistoryEntry,
  StartOutcome,
  ResolveResult,
  VerifyOptions,
  VerifyProblem,
  VerifyReport,
} from '../../application/authority';
