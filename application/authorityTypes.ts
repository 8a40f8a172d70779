// The authority's types that every store subpath (/sqlite, /postgres, /testing) names, so a
// user types what an opener returns from the subpath that made it: one list, re-exported.
export type { StartBarrierAuthority, RecoverableStartBarrierAuthority, RecoveryApi, InDoubtQuery, VerifyOptions } from './authority';
export type { PrepareResult, StoredBarrier, StepRunView, StoredEvent, AppendOutcome, InDoubtStart, AttemptHistoryEntry, StartOutcome, ResolveResult, VerifyProblem, VerifyReport } from '../domain/records';
