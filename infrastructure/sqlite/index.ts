// `@qinglong/start-barrier/sqlite`: the embedded authority (edge, standalone), R5.1.
export { openSqliteStartBarrier, type SqliteStartBarrier, type SqliteStartBarrierOptions } from './sqliteAuthority';
export type { StartBarrierAuthority, PrepareResult, StoredBarrier, StepRunView, StoredEvent, AppendOutcome, StartStep, StartStepHook } from '../../application/authority';
export { START_STEPS } from '../../application/authority';
export { MigrationError } from '../migrations';
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
} from '../../application/authority';
export type { EvidenceKey, EvidenceKeyringOptions } from '../../application/evidenceKeys';
