import type { Command } from 'commander';
import { PreconditionError, REPLAY_IDENTITIES, ValidationError, type LookupValue, type ReplayIdentity } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import type { PlanStatus } from '../../application/invocationPlans';
import type { BackendAccess } from './backend';

// `show`: one barrier found by any replay identity (R4.1). The options follow the domain's
// identity list, so a new identity is a new option with no edit here.

type WithAuthority = <T>(access: BackendAccess, body: (a: RecoverableStartBarrierAuthority) => Promise<T>) => Promise<T>;

const optionOf = (identity: string): string => `--${identity.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
const usage = (message: string): ValidationError => new ValidationError('command line', [{ path: '(arguments)', reason: 'invalid_value', message }]);

const SINGLE: readonly Exclude<ReplayIdentity, 'attempt'>[] = REPLAY_IDENTITIES.filter((i): i is Exclude<ReplayIdentity, 'attempt'> => i !== 'attempt');

const versionOf = (text: string): number => {
  if (!/^[1-9][0-9]{0,15}$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new ValidationError('command line', [{ path: '--attempt VERSION', reason: 'invalid_value', message: `expected a positive whole number, got "${text}"` }]);
  }
  return Number(text);
};

export const addShowCommand = (program: Command, withAuthority: WithAuthority): void => {
  const show = program
    .command('show')
    .description('one barrier, found by any replay identity, with its outcome (null while in doubt)')
    .option('--attempt <run-step-version...>', 'RUN STEP VERSION: the started StepRun version');
  for (const identity of SINGLE) show.option(`${optionOf(identity)} <id>`, `the start whose ${identity} is ID (R4.1 identity)`);
  show.action(async (opts: Record<string, string | string[] | undefined>) => {
    const given: [ReplayIdentity, LookupValue][] = [];
    for (const identity of SINGLE) {
      const v = opts[identity];
      if (typeof v === 'string') given.push([identity, v]);
    }
    if (opts.attempt !== undefined) {
      const parts = opts.attempt as string[];
      if (parts.length !== 3) throw usage(`--attempt takes RUN STEP VERSION, got ${parts.length} value(s)`);
      given.push(['attempt', { runId: parts[0]!, stepRunId: parts[1]!, startedStepRunVersion: versionOf(parts[2]!) }]);
    }
    if (given.length !== 1) throw usage(`give exactly one of ${['--attempt', ...SINGLE.map(optionOf)].join(', ')}`);
    const [identity, value] = given[0]!;
    await withAuthority('read', async (a) => {
      const barrier = await a.recovery.lookup(identity, value);
      if (barrier === null) {
        throw new PreconditionError('start_not_found', `no start barrier has ${identity} ${typeof value === 'string' ? value : JSON.stringify(value)}`);
      }
      const outcome = await a.recovery.outcome(barrier.record.startId);
      print({ barrier, outcome, inDoubt: outcome === null, ...(await planShown(a, barrier.record.startId)) });
    });
  });
};

/** R12.2: the sealed plan's status and redacted preview, never its input (no key is needed or used); nothing for a start with no plan. */
export const planShown = async (a: RecoverableStartBarrierAuthority, startId: string): Promise<{ plan?: PlanStatus }> => {
  const plan = await a.plans.status(startId);
  return plan.status === 'absent' ? {} : { plan };
};

const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
};
