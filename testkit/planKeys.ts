import { randomBytes } from 'node:crypto';
import type { PlanStoreOptions } from '../application/invocationPlans';

// A plan keyring for specs and the reliability harness (R12.2, R12.4): execution opens only on
// an authority whose plan store has a key. Random per process: no key is ever written down.

export const PLAN_KEY_K1 = randomBytes(32);
export const PLAN_KEY_K2 = randomBytes(32);

export const TEST_PLANS: PlanStoreOptions = { keyring: { current: 'k1', keys: { k1: PLAN_KEY_K1 } } };

/** A keyring shared with child processes through the environment (hex; specs only). */
export const plansFromEnv = (env: NodeJS.ProcessEnv = process.env): PlanStoreOptions =>
  env.QL_TEST_PLAN_KEY === undefined ? TEST_PLANS : { keyring: { current: 'k1', keys: { k1: Buffer.from(env.QL_TEST_PLAN_KEY, 'hex') } } };
export const planKeyEnv = (): Record<string, string> => ({ QL_TEST_PLAN_KEY: PLAN_KEY_K1.toString('hex') });
