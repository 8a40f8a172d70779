// `@qinglong/start-barrier`: the pure domain protocol only. No storage authority here (R6.1):
// SQLite and PostgreSQL are reached through `/sqlite` and `/postgres`.
export * from './errors';
export { redactSecrets, passwordsOf } from './redact';
export * from './canonical';
export { plainJsonIssues, parseJsonBytes, decodeOrThrow, type Ref } from './codecs';
export * from './command';
export * from './barrier';
export * from './events';
export * from './state';
export * from './lifecycle';
export * from './startDecider';
export * from './verify';
export * from './decider';
export * from './recovery';
export * from './saga';
export * from './nextAttempt';
export { Traceparent, W3cTraceId, traceparentProblem } from './traceContext';
export * from './adapter';
export * from './retention';
