import type { Command } from 'commander';
import { PreconditionError, REPLAY_IDENTITIES, ValidationError, type LookupValue, type ReplayIdentity } from '../../domain';
import type { RecoverableStartBarrierAuthority } from '../../application/authority';
import type { PlanStatus } from '../../application/invocationPlans';
import { executionPortOf } from '../../application/execution';
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

/**
 * What `show`, `inspect` and `in-doubt` print of a start's sealed plan (R12.2): its status
 * (sealed, shredded or absent) and redacted preview, never its input. With a plan keyring
 * (planKeyring.ts) a sealed plan is opened to prove it is the one its barrier binds, and its
 * input dropped unread: a changed plan is CORRUPT_RECORD (exit 5), `verified: true` otherwise;
 * without one it is shown as stored, `verified: false`.
 */
export type PlanShown = PlanStatus | (PlanStatus & { readonly status: 'sealed'; readonly verified: boolean });

export const planShown = async (a: RecoverableStartBarrierAuthority, startId: string): Promise<{ plan: PlanShown }> => {
  const plan = await a.plans.status(startId);
  if (plan.status !== 'sealed') return { plan };
  const plans = executionPortOf(a)?.plans;
  if (plans?.keyed !== true) return { plan: { ...plan, verified: false } };
  const barrier = await a.barriers.getByStartId(startId);
  if (barrier === null) throw new PreconditionError('start_not_found', `no start barrier has startId ${startId}`);
  await plans.open(startId, barrier.record.admission.planDigest); // fails closed; the input is never kept
  return { plan: { ...plan, verified: true } };
};

/** `in-doubt`: each listed start with its plan, as `show` prints it. */
export const withPlans = async <T extends { readonly startId: string }>(a: RecoverableStartBarrierAuthority, listed: readonly T[]): Promise<(T & { plan: PlanShown })[]> => {
  const out: (T & { plan: PlanShown })[] = [];
  for (const s of listed) out.push({ ...s, ...(await planShown(a, s.startId)) });
  return out;
};

const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
};
