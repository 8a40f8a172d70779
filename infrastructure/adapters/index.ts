// `@qinglong/start-barrier/adapters`: the real tool adapters (process, HTTP, MCP) that meet the
// adapter contract (R11.1), the driver claims the saga takes (R11.2), and execution opened
// explicitly (R11.3). The saga itself is `@qinglong/start-barrier/saga`.
export { processAdapter, journalPathsOf, PROCESS_KILL_GRACE_MS, type ProcessAdapterOptions } from './process';
export type { Containment } from './processTree';
export { httpAdapter, type HttpAdapterOptions } from './http';
export { mcpAdapter, MCP_START_ID_META, type McpAdapterOptions, type McpTransportOptions } from './mcp';
export { memoryDriverClaims, CLAIM_LEASE_GRACE_MS, MAX_CLAIM_GENERATIONS } from '../../application/driverClaimRules';
export type { DriverClaims } from '../../domain';
export { openExecution, ExecutionAuthority, type ExecutionOptions } from '../../application/saga';
/** A read-only ticket for an operator's inspect of one committed start (it never starts anything). */
export { inspectionTicket } from '../../application/execution';
export type {
  ToolAdapter,
  AdapterDeclaration,
  AdapterGuarantees,
  AdapterReport,
  AdapterStartContext,
  ExecutionTicket,
  InspectReport,
  InspectAttempt,
  InspectState,
  InvocationPlan,
  DriverClaim,
  ClaimResult,
} from '../../domain';
export { invocationPlanDigest, outputDigestOf, ExecutionRefusedError } from '../../domain';
/** One declaration of a runtime's adapters, made into adapters by the runtime and read by the CLI (`--adapters`). */
export { defineAdapters, loadAdapters, type AdapterRegistry, type AdapterEntry, type AdapterRegistryDeclaration, type ProcessAdapterEntry, type HttpAdapterEntry, type McpAdapterEntry } from './registry';
