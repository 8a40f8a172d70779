import { ValidationError, isStartBarrierError } from '../../domain';
import { passwordsOf, redactSecrets } from '../../domain/redact';
import { ConnectionError, DriverMissingError } from '../../application/openErrors';

// The CLI's error line on stderr: the error's code and message, never a password (R13.3).

/**
 * The passwords the command line and the environment carry (`--postgres URL`, in any form
 * PostgreSQL accepts): no line the CLI writes shows them (R13.3).
 */
export const secretsOfArgv = (argv: readonly string[]): string[] => {
  const given = argv.flatMap((arg, i) => (arg === '--postgres' ? [argv[i + 1] ?? ''] : arg.startsWith('--postgres=') ? [arg.slice('--postgres='.length)] : []));
  return [...given, process.env.QINGLONG_BARRIER_POSTGRES ?? ''].flatMap((text) => passwordsOf(text === '' ? undefined : text));
};

export const describeError = (e: unknown, secrets: readonly string[] = []): string => redactSecrets(describeErrorText(e), secrets);

const describeErrorText = (e: unknown): string => {
  if (e instanceof ValidationError) {
    return [`${e.code}: invalid ${e.record}`, ...e.issues.map((i) => `  - ${i.path}: ${i.message} (${i.reason})`)].join('\n');
  }
  if (isStartBarrierError(e) || e instanceof ConnectionError || e instanceof DriverMissingError) return `${e.code}: ${e.message}`;
  return e instanceof Error ? e.message : String(e);
};

