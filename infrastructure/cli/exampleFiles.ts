import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { buildScenario, type Scenario } from '../../domain/scenario';

// `example`: a fresh scenario, printed as its lifecycle commands and start command, or with
// `--out DIR` written as two files that `apply --command` and `prepare --command` take exactly
// as they are (no jq): the lifecycle commands as one JSON array, the start command.

/** The scenario `example` makes: fresh ids, requested now. */
export const exampleScenario = (withApproval = false): Scenario => buildScenario({ requestedAtMs: Date.now(), ...(withApproval ? { withApproval: true } : {}) });

/** What `example` prints of it. */
export const printedExample = (scenario: Scenario) => ({ lifecycle: scenario.lifecycle, start: scenario.startCommand() });

export interface ExampleFiles {
  readonly lifecycle: string;
  readonly start: string;
  /** The commands to run next, in order. */
  readonly next: readonly string[];
}

export const writeExampleFiles = (dir: string, scenario: Scenario): ExampleFiles => {
  const out = resolve(dir);
  mkdirSync(out, { recursive: true });
  const lifecycle = join(out, 'lifecycle.json');
  const start = join(out, 'start.json');
  writeFileSync(lifecycle, `${JSON.stringify(scenario.lifecycle, null, 2)}\n`);
  writeFileSync(start, `${JSON.stringify(scenario.startCommand(), null, 2)}\n`);
  return { lifecycle, start, next: [`qinglong-barrier apply --command ${lifecycle}`, `qinglong-barrier prepare --command ${start}`] };
};
