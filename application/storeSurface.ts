// What the driver subpaths (/sqlite, /postgres) both export besides their opener, its options
// and the migration errors: the authority's types, the start steps a hook sees, the typed open
// errors, verify's progress phases and the evidence keyring's options. One list, re-exported.
export * from './authorityTypes';
export { START_STEPS, type StartStep, type StartStepHook } from './authority';
export { DriverMissingError, ConnectionError, type ConnectionFailure } from './openErrors';
export { VERIFY_PHASES, type VerifyPhase, type VerifyProgressListener } from './verifyProgress';
export type { EvidenceKey, EvidenceKeyringOptions } from './evidenceKeys';
