import { join, resolve } from 'node:path';
import { buildScenario } from '../domain/scenario';
import { lifecycleOf, seededRunOf } from './lib/startRows';
import { stepRunRowOf } from '../projections/rows';
import { decodeStepRunRow, runStateOf } from '../projections/runState';
import { median } from './lib/stats';

// `npx tsx bench/domainSideBySide.ts --baseline DIR [--candidate DIR] [--rounds N] [--n N]`:
// the client CPU of the domain work of a start and of a replay, in one process, against two
// built checkouts (each one's dist/, so both are compiled alike): per barrier, the verified
// read's checks (checkStartRows); per new start, decode + classify + decide + plan; per
// replay, decode + classify + verify. The same rows for both, rounds interleaved, medians.

interface Subject {
  readonly label: string;
  readonly checkStartRows: (rows: unknown) => unknown;
  readonly decodeStartCommand: (c: unknown) => { command: { startId: string } };
  readonly classifyReplay: (d: unknown, hits: unknown) => { kind: string };
  readonly noReplayHits: () => unknown;
  readonly buildStartFactsWithJson: (d: unknown, s: unknown) => { facts: unknown; json: unknown };
  readonly planStartWrite: (facts: unknown, s: unknown, at: number, json: unknown) => unknown;
}

const subjectOf = (label: string, root: string): Subject => {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const domain = require(join(root, 'dist/domain/index.js')) as Record<string, never>;
  const checkRows = require(join(root, 'dist/projections/checkRows.js')) as Record<string, never>;
  const startWrite = require(join(root, 'dist/application/startWrite.js')) as Record<string, never>;
  return {
    label,
    checkStartRows: checkRows['checkStartRows']!,
    decodeStartCommand: domain['decodeStartCommand']!,
    classifyReplay: domain['classifyReplay']!,
    noReplayHits: domain['noReplayHits']!,
    buildStartFactsWithJson: domain['buildStartFactsWithJson']!,
    planStartWrite: startWrite['planStartWrite']!,
  };
};

const arg = (name: string, fallback?: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? process.argv[i + 1] : fallback;
  if (v === undefined) throw new Error(`--${name} is required`);
  return v;
};

const baseline = subjectOf('baseline', resolve(arg('baseline')));
const candidate = subjectOf('candidate', resolve(arg('candidate', '.')));
const rounds = Number(arg('rounds', '9'));
const n = Number(arg('n', '400'));
const only = arg('only', 'verify,decide,replay').split(',');

const at = 1_790_000_000_000;
const scenarios = Array.from({ length: n }, (_, i) => buildScenario({ withApproval: i % 2 === 1 }));
const seeded = scenarios.map((sc) => seededRunOf(sc, at));
/** Commands as a caller sends them: plain parsed JSON. */
const commands = scenarios.map((sc) => JSON.parse(JSON.stringify(sc.startCommand())) as unknown);
/** The Run state as a start reads it: each StepRun decoded from its stored row (canonical state JSON). */
const states = scenarios.map((sc) => {
  const { state } = lifecycleOf(sc);
  return runStateOf(state.run, Object.values(state.stepRuns).map((s) => decodeStepRunRow(stepRunRowOf(s))));
});
/** Rows as a verified read gets them: fresh strings and objects, identities in index order. */
const rowsOf = (s: (typeof seeded)[number]): unknown => {
  const r = s.start.rows;
  const copy = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
  return {
    barrier: copy(r.barrier),
    audit: copy(r.audit),
    trace: copy(r.trace),
    receipt: copy(r.receipt),
    mutation: copy(r.mutation),
    events: s.start.events.map(({ chain_digest: _, ...e }) => copy(e)),
    identities: copy([...r.identities].sort((a, b) => (a.identity < b.identity ? -1 : 1))),
  };
};
const rows = seeded.map(rowsOf);

type Op = (s: Subject, i: number) => unknown;
const ops: Record<string, Op> = {
  verify: (s, i) => s.checkStartRows(rows[i]),
  decide: (s, i) => {
    const d = s.decodeStartCommand(commands[i]);
    if (s.classifyReplay(d, s.noReplayHits()).kind !== 'new') throw new Error('not new');
    const state = states[i];
    const { facts, json } = s.buildStartFactsWithJson(d, state);
    return s.planStartWrite(facts, state, at, json);
  },
  replay: (s, i) => {
    const d = s.decodeStartCommand(commands[i]);
    s.classifyReplay(d, s.noReplayHits());
    return s.checkStartRows(rows[i]);
  },
};

const timeRound = (s: Subject, op: Op, passes: number): number => {
  const t0 = process.cpuUsage();
  for (let p = 0; p < passes; p++) for (let i = 0; i < n; i++) op(s, i);
  const c = process.cpuUsage(t0);
  return (c.user + c.system) / (passes * n);
};

// Profiling: `--profile candidate|baseline` loops one subject only (run under --cpu-prof).
const profile = process.argv.includes('--profile') ? arg('profile') : undefined;
if (profile !== undefined) {
  const s = profile === 'baseline' ? baseline : candidate;
  for (const name of only) for (let k = 0; k < rounds * 3; k++) timeRound(s, ops[name]!, 3);
} else {
  for (const name of only) {
    const op = ops[name]!;
    const r: Record<string, number[]> = { baseline: [], candidate: [] };
    for (const s of [baseline, candidate]) for (let w = 0; w < 3; w++) timeRound(s, op, 1);
    for (let k = 0; k < rounds; k++) {
      const order = k % 2 === 0 ? [baseline, candidate] : [candidate, baseline];
      for (const s of order) r[s.label]!.push(timeRound(s, op, 3));
    }
    const b = median(r.baseline!);
    const c = median(r.candidate!);
    const bMin = Math.min(...r.baseline!);
    const cMin = Math.min(...r.candidate!);
    console.log(
      `${name.padEnd(7)} baseline ${b.toFixed(1)} µs  candidate ${c.toFixed(1)} µs  ratio ${(c / b).toFixed(3)}  (n=${n}, ${rounds} rounds x 3 passes, CPU µs/op, medians; minima ${bMin.toFixed(1)} / ${cMin.toFixed(1)} = ${(cMin / bMin).toFixed(3)})`,
    );
  }
}
