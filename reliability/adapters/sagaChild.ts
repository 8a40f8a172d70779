import { writeSync } from 'node:fs';
import { createToolStepSaga, openExecution } from '../../application/saga';
import type { BackendName } from '../../testkit/rawSql';
import { openAuthority } from '../lib/stores';
import { plansFromEnv } from '../../testkit/planKeys';
import { adapterFor, type AdapterConfig } from '../../testkit/adapters/fixtures';
import type { ToolCall } from '../../testkit/adapters/toolCall';

// A saga process killed between the adapter's answer and the recorded outcome: it drives one
// tool call through a real adapter and SIGKILLs itself (no cleanup, no outcome, its claim
// never released) the moment the adapter has answered. With KILL_AT `sealed`, it is killed
// right after the tool input was sealed, before any claim or adapter: a restarted saga has
// only the stored plan to run from.
// Usage: sagaChild.ts BACKEND TARGET CALL_JSON ADAPTER_CONFIG_JSON [KILL_AT: answered | sealed]

const [backend, target, callJson, configJson, killAt = 'answered'] = process.argv.slice(2);
const die = (what: string) => (startId: string) => {
  writeSync(1, `${what} ${startId}\n`);
  process.kill(process.pid, 'SIGKILL');
};

const main = async (): Promise<void> => {
  const call = JSON.parse(callJson!) as Pick<ToolCall, 'trigger' | 'plan' | 'invocation'>;
  const authority = await openAuthority(backend as BackendName, target!, { plans: plansFromEnv() });
  const saga = createToolStepSaga({
    execution: openExecution(authority, { execution: 'enabled' }),
    adapter: adapterFor(JSON.parse(configJson!) as AdapterConfig),
    leaseGraceMs: 0,
    hooks: killAt === 'sealed' ? { afterSeal: die('sealed') } : { afterStart: die('answered') },
  });
  const result = await saga.drive(call.trigger, call.plan, call.invocation);
  writeSync(2, `the saga returned ${result.status} before it was killed (${killAt})\n`);
  process.exit(3);
};

main().catch((e: unknown) => {
  writeSync(2, `${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(4);
});
