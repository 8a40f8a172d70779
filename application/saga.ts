// The `./saga` subpath: the saga that drives one start to its outcome, `runTool` and `recover`
// built on it, and what their callers type their arguments with.
export * from './toolStepSaga';
export { ExecutionAuthority, openExecution, type ExecutionOptions } from './execution';
export type { RedactionContract, PlanPreview, PlanStatus, PlanKeyringOptions, PlanStoreOptions } from './invocationPlans';
// What a saga's caller types its arguments with, from the subpath that makes the saga.
export type { ToolStepTrigger, StartPlan, InvocationPlan, ToolAdapter, AdapterReport, AdapterAnswer, InspectReport, InspectAnswer, ToolOutput, ToolCallTelemetry, DriverClaim } from '../domain';
export { runTool, recover, type Tool, type RunToolCall, type RunToolOptions, type RunToolResult, type RecoverOptions, type RecoverReport, type RecoveredStart } from './runTool';
export type { RecoverableStartBarrierAuthority } from './authority';
export type { StartOutcome, StoredBarrier } from '../domain/records';
