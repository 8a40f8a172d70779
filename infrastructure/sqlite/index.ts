// `@qinglong/start-barrier/sqlite`: the embedded authority (edge, standalone), R5.1.
export { openSqliteStartBarrier, type SqliteStartBarrier, type SqliteStartBarrierOptions, type SqliteStartBarrierSettings } from './store';
export type { StartBarrierAuthority, PrepareResult, StoredBarrier, StepRunView, StoredEvent, AppendOutcome, StartStep, StartStepHook } from '../authority';
export { START_STEPS } from '../authority';
export { MigrationError } from '../migrations';
export { DriverMissingError, ConnectionError, type ConnectionFailure } from '../openErrors';
export type {
  RecoveryApi,
  RecoverableStartBarrierAuthority,
  InDoubtQuery,
  InDoubtStart,
  AttemptHistoryEntry,
  StartOutcome,
  ResolveResult,
  VerifyOptions,
  VerifyProblem,
  VerifyReport,
} from '../authority';
