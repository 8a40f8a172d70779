import { CommanderError } from 'commander';
import { CorruptRecordError, isStartBarrierError } from '../../domain';
import { MigrationError } from '../migrations';
import { ConnectionError } from '../../application/openErrors';

// One exit code per error kind: the CLI's contract with scripts (README, "Exit codes").

export const EXIT = {
  ok: 0,
  other: 1,
  validation: 2,
  precondition: 3,
  conflict: 4,
  corrupt: 5,
  concurrency: 6,
  unavailable: 7,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

const UNREACHABLE: ReadonlySet<ConnectionError['reason']> = new Set(['refused', 'host_not_found', 'timeout', 'unavailable']);

/** Commander's own "errors" that are really successful help or version output. */
const COMMANDER_OK = new Set(['commander.helpDisplayed', 'commander.help', 'commander.version']);

export const exitCodeOf = (e: unknown): ExitCode => {
  // A bad command line is bad input; help asked for is ok, help shown for a missing command is not.
  if (e instanceof CommanderError) return COMMANDER_OK.has(e.code) && e.exitCode === 0 ? EXIT.ok : EXIT.validation;
  if (e instanceof ConnectionError && (e.reason === 'invalid_url' || e.reason === 'multi_host')) return EXIT.validation;
  // A server that refuses, does not answer or is shutting down while we open: the same answer
  // as when it goes away later (STORE_UNAVAILABLE, R9.5); a bad login or database stays 1.
  if (e instanceof ConnectionError && UNREACHABLE.has(e.reason)) return EXIT.unavailable;
  if (!isStartBarrierError(e)) return EXIT.other;
  switch (e.code) {
    case 'VALIDATION_FAILED':
      return EXIT.validation;
    case 'PRECONDITION_FAILED':
    case 'EXECUTION_REFUSED':
    case 'START_COMPACTED':
      return EXIT.precondition;
    case 'SEMANTIC_CONFLICT':
      return EXIT.conflict;
    case 'CORRUPT_RECORD':
      return EXIT.corrupt;
    case 'CONCURRENCY_EXHAUSTED':
    case 'TRANSACTION_TIMEOUT':
      return EXIT.concurrency;
    case 'STORE_UNAVAILABLE':
      return EXIT.unavailable;
    default: {
      const _exhaustive: never = e.code;
      return _exhaustive;
    }
  }
};

/**
 * What `verify` lists when the open itself refused the store as damaged (R9.2): a migration
 * ledger or schema objects that contradict the code's migrations. Undefined for any other error.
 */
export const openRefusedAsDamage = (e: unknown): string | undefined => {
  if (e instanceof MigrationError && e.ledgerContradicts) return `schema_migrations: ${e.message}`;
  if (e instanceof CorruptRecordError && e.recordKind === 'schema') return e.problem;
  return undefined;
};
