// `@qinglong/start-barrier/testing`: the in-memory authority (the same surface and the same
// conformance suite as SQLite and PostgreSQL, no driver) and a complete valid scenario, for
// users' own given-when-then specs.
export { openMemoryStartBarrier, type MemoryStartBarrierOptions } from './memoryAuthority';
export { buildScenario, type Scenario, type ScenarioOptions } from '../../domain/scenario';
// The authority's types, as /sqlite and /postgres name them (application/authorityTypes.ts).
export * from '../../application/authorityTypes';
