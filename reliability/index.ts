import { runAdapterPhase, type AdapterPhaseReport } from './adapters/phase';
import { runSweep, type DamageKind, type SweepReport } from './corruption/sweep';
import { FAILOVER_EVENTS, runFailover, type FailoverOptions, type FailoverReport } from './failover/failover';
import { runForgery, type ForgeryReport } from './forgery/forgery';
import { runFuzz, type FuzzReport } from './fuzz/fuzz';
import type { BackendName } from '../testkit/rawSql';
import { BACKENDS } from './lib/stores';
import { runSoak, type SoakReport } from './soak/soak';

// The reliability harness: crash soak, bad input, corruption sweep, forgeries with the runtime's
// own credentials, PostgreSQL failover on Patroni, adapters under faults. `npm run reliability` runs the
// full sizes; specs/reliability runs the short ones inside `npm test`. Every phase uses real
// SQLite files and real PostgreSQL, never mocks.

export const PHASES = ['soak', 'fuzz', 'corruption', 'forgery', 'failover', 'adapters'] as const;
export type Phase = (typeof PHASES)[number];

export interface Profile {
  readonly name: 'full' | 'short';
  readonly soak: { readonly kills: number; readonly workers: number; readonly maxWindowMs: number };
  readonly fuzz: { readonly cases: number; readonly recordCases: number };
  readonly corruption: { readonly starts: number; readonly targets: number; readonly kinds: readonly DamageKind[]; readonly cliEvery: number };
  readonly failover: Omit<FailoverOptions, 'log'>;
  /** Trials of each fault for each real adapter (R11.4). */
  readonly adapters: { readonly trials: number };
}

export const FULL: Profile = {
  name: 'full',
  soak: { kills: 100, workers: 3, maxWindowMs: 700 },
  fuzz: { cases: 10_000, recordCases: 10_000 },
  corruption: { starts: 24, targets: 6, kinds: ['flip', 'swap', 'reformat'], cliEvery: 12 },
  failover: { events: FAILOVER_EVENTS, clients: 6, loadBeforeMs: 2500, loadAfterMs: 2000, maxStartsPerClient: 2000, eventTimeoutMs: 90_000, timeoutMs: 600_000 },
  adapters: { trials: 3 },
};

export const SHORT: Profile = {
  name: 'short',
  soak: { kills: 10, workers: 2, maxWindowMs: 500 },
  fuzz: { cases: 1_000, recordCases: 1_000 },
  corruption: { starts: 12, targets: 1, kinds: ['flip', 'swap'], cliEvery: 60 },
  // One switchover and one kill: the whole phase stays near a minute (most of it Patroni's boot).
  failover: { events: ['switchover', 'kill_postmaster'], clients: 4, loadBeforeMs: 1500, loadAfterMs: 1000, maxStartsPerClient: 500, eventTimeoutMs: 60_000, timeoutMs: 240_000 },
  adapters: { trials: 1 },
};

export interface ReliabilityOptions {
  readonly phases?: readonly Phase[];
  readonly backends?: readonly BackendName[];
  readonly seed?: number;
  readonly log?: (line: string) => void;
}

export interface ReliabilityReport {
  readonly profile: Profile['name'];
  readonly seed: number;
  readonly soak: readonly SoakReport[];
  readonly fuzz?: FuzzReport;
  readonly corruption: readonly SweepReport[];
  readonly forgery: readonly ForgeryReport[];
  readonly failover: readonly FailoverReport[];
  readonly adapters: readonly AdapterPhaseReport[];
  readonly durationMs: Readonly<Record<string, number>>;
  readonly ok: boolean;
}

export const runReliability = async (profile: Profile, options: ReliabilityOptions = {}): Promise<ReliabilityReport> => {
  const phases = options.phases ?? PHASES;
  const backends = options.backends ?? BACKENDS;
  const seed = options.seed ?? Date.now() % 2_147_483_647;
  const log = options.log ?? (() => undefined);
  const durationMs: Record<string, number> = {};
  const timed = async <T>(name: string, body: () => Promise<T>): Promise<T> => {
    const t0 = Date.now();
    try {
      return await body();
    } finally {
      durationMs[name] = Date.now() - t0;
    }
  };
  const soak: SoakReport[] = [];
  const corruption: SweepReport[] = [];
  const forgery: ForgeryReport[] = [];
  const failover: FailoverReport[] = [];
  let fuzz: FuzzReport | undefined;

  if (phases.includes('soak')) {
    for (const backend of backends) {
      log(`crash soak on ${backend}: ${profile.soak.kills} kills, ${profile.soak.workers} workers`);
      soak.push(await timed(`soak ${backend}`, () => runSoak({ backend, ...profile.soak, seed, log })));
    }
  }
  if (phases.includes('fuzz')) {
    log(`bad input: ${profile.fuzz.cases} commands, ${profile.fuzz.recordCases} stored records (seed ${seed})`);
    fuzz = await timed('fuzz', () => runFuzz({ ...profile.fuzz, seed, backends, log }));
  }
  if (phases.includes('corruption')) {
    for (const backend of backends) {
      log(`corruption sweep on ${backend}`);
      corruption.push(await timed(`corruption ${backend}`, () => runSweep({ backend, ...profile.corruption, log })));
    }
  }
  if (phases.includes('forgery')) {
    for (const backend of backends) {
      log(`forgeries with the runtime's credentials on ${backend}`);
      forgery.push(await timed(`forgery ${backend}`, () => runForgery({ backend, log })));
    }
  }
  if (phases.includes('failover') && backends.includes('postgres')) {
    log(`PostgreSQL failover on Patroni: ${profile.failover.events.join(', ')}`);
    failover.push(await timed('failover', () => runFailover({ ...profile.failover, log })));
  }
  const adapters: AdapterPhaseReport[] = [];
  if (phases.includes('adapters')) {
    for (const backend of backends) {
      log(`adapters on ${backend}: ${profile.adapters.trials} trial(s) of each fault for each adapter`);
      adapters.push(await timed(`adapters ${backend}`, () => runAdapterPhase({ backend, trials: profile.adapters.trials, log })));
    }
  }
  const ok = soak.every((r) => r.ok) && (fuzz?.ok ?? true) && corruption.every((r) => r.ok) && forgery.every((r) => r.ok) && failover.every((r) => r.ok) && adapters.every((r) => r.ok);
  return { profile: profile.name, seed, soak, ...(fuzz ? { fuzz } : {}), corruption, forgery, failover, adapters, durationMs, ok };
};

// ------------------------------------------------------------------ the printed report

const table = (title: string, columns: readonly string[], rows: readonly (readonly [string, ...(string | number)[]])[]): string => {
  const width = Math.max(...rows.map((r) => r[0].length), title.length) + 2;
  const cols = columns.map((c, i) => Math.max(c.length, ...rows.map((r) => String(r[i + 1] ?? '').length)) + 2);
  const line = (label: string, cells: readonly (string | number)[]) => label.padEnd(width) + cells.map((c, i) => String(c).padStart(cols[i]!)).join('');
  return [line(title, columns), ...rows.map(([label, ...cells]) => line(`  ${label}`, cells))].join('\n');
};

/** One line per backend, adapter and fault: what the tool did and what the saga recorded. */
export const formatAdapterCounts = (counts: readonly AdapterPhaseReport['counts'][number][]): string => {
  const header = ['trials', 'effects', 'dup', 'outcomes', 'in doubt', 'listed', 'by inspect', 'by restart', 'left', 'held', 'unrecorded'];
  const rows = counts.map((c) => [`${c.backend} ${c.adapter} ${c.scenario}`, c.trials, c.sideEffects, c.duplicates, c.outcomesRecorded, c.inDoubtAfterFault, c.listedInDoubt, c.resolvedByInspect, c.resolvedByRestart, c.leftInDoubt, c.claimHeld, c.unrecorded] as const);
  const width = Math.max(...rows.map((r) => r[0].length)) + 2;
  const cols = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i + 1]).length)) + 2);
  const line = (label: string, cells: readonly (string | number)[]) => label.padEnd(width) + cells.map((c, i) => String(c).padStart(cols[i]!)).join('');
  return [
    'Adapters (R11.4): side effects counted by the tool; in doubt = no outcome right after the fault; listed = shown by in-doubt',
    line('  backend adapter fault', header),
    ...rows.map(([label, ...cells]) => line(`  ${label}`, cells)),
  ].join('\n');
};

const seconds = (ms: number): string => (ms / 1000).toFixed(1);

/** The Patroni table: one column per fault, then what each caused, then every error class callers saw. */
export const formatFailover = (f: FailoverReport): string => {
  const e = f.events;
  const lines = [
    `PostgreSQL failover on Patroni (${f.engine}; 3 PostgreSQL 15 nodes, synchronous_mode_strict, clients through HAProxy), ${seconds(f.durationMs)} s`,
    table('  per fault', e.map((x) => x.event), [
      ['leader before -> after', ...e.map((x) => `${x.leaderBefore} -> ${x.leaderAfter}`)],
      ['timeline', ...e.map((x) => `${x.timelines.before} -> ${x.timelines.after}`)],
      ['acknowledged starts', ...e.map((x) => x.acknowledged)],
      [`found on every node`, ...e.map((x) => `${x.foundOnEveryNode} (${x.nodes})`)],
      ['lost', ...e.map((x) => x.lost)],
      ['partial', ...e.map((x) => x.partial)],
      ['ambiguous', ...e.map((x) => x.ambiguous)],
      ['  replayed: created / existing', ...e.map((x) => `${x.settledCreated} / ${x.settledExisting}`)],
      ['  unsettled', ...e.map((x) => x.unsettled)],
      ['refused (a verdict) / contradicted by the leader', ...e.map((x) => `${x.refused} / ${x.staleVerdicts}`)],
      ['longest gap, no start acked (s)', ...e.map((x) => seconds(x.longestGapMs))],
      ['fault to whole again (s)', ...e.map((x) => seconds(x.recoveryMs))],
      ['errors callers saw', ...e.map((x) => Object.values(x.errors).reduce((s, n) => s + n, 0))],
      ['  untyped', ...e.map((x) => x.untyped)],
    ]),
    '  faults:',
    ...e.map((x) => `    ${x.event}: ${x.fault}`),
    '  error classes callers saw (code reason: count):',
    ...e.map((x) => `    ${x.event}: ${Object.entries(x.errors).map(([k, n]) => `${k}: ${n}`).join(', ') || 'none'}`),
  ];
  const untyped = e.flatMap((x) => Object.entries(x.samples).filter(([k]) => k.startsWith('untyped')).map(([k, m]) => `    ${x.event}: ${k}: ${m}`));
  if (untyped.length > 0) lines.push('  untyped, one message each:', ...[...new Set(untyped)]);
  return lines.join('\n');
};

/** One line per backend and promise (R12.3): what the tool managed that the adapter says it cannot; '-' where a count does not apply. */
export const formatAdapterPromises = (rows: readonly AdapterPhaseReport['promises'][number][]): string => {
  const LABELS = { setsid_past_timeout: 'setsid tool past its timeout', redirecting_http: 'redirecting HTTP tool (307)', environment_probe: 'environment probe (process, MCP stdio)' } as const;
  const header = ['trials', 'acted after timeout', 'cross-origin requests', 'env leaks', 'recorded success'];
  const cells = rows.map((p) => {
    const only = (n: number, applies: boolean) => (applies ? n : '-');
    return [`${p.backend} ${LABELS[p.promise]}`, p.trials, only(p.actedAfterTimeout, p.promise === 'setsid_past_timeout'), only(p.crossOriginRequests, p.promise === 'redirecting_http'), only(p.environmentLeaks, p.promise === 'environment_probe'), only(p.recordedSucceeded, p.promise === 'redirecting_http')] as const;
  });
  const width = Math.max(...cells.map((r) => r[0].length)) + 2;
  const cols = header.map((h, i) => Math.max(h.length, ...cells.map((r) => String(r[i + 1]).length)) + 2);
  const line = (label: string, values: readonly (string | number)[]) => label.padEnd(width) + values.map((c, i) => String(c).padStart(cols[i]!)).join('');
  return [
    'Adapters keep what they declare (R12.3): counted on the tool\'s side; every count must be 0',
    line('  backend tool', header),
    ...cells.map(([label, ...values]) => line(`  ${label}`, values)),
  ].join('\n');
};

/** One line per backend and adapter (R12.1): forged tickets handed to its start and inspect, refused, and what the tool did. */
export const formatForgedTickets = (rows: readonly AdapterPhaseReport['forgeries'][number][]): string =>
  [
    "Forged tickets (R12.1): a barrier-shaped object, a hand-made execution, a copied ticket, a ticket for another start, attempt or adapter, a ticket after close; side effects counted on the tool's side, must be 0",
    table('  backend adapter', ['tried', 'refused', 'side effects'], rows.map((f) => [`${f.backend} ${f.adapter}`, f.tried, f.refused, f.sideEffects] as const)),
  ].join('\n');

export const formatReport = (r: ReliabilityReport): string => {
  const out: string[] = [`Reliability (${r.profile}, seed ${r.seed})`, ''];
  if (r.soak.length > 0) {
    out.push(
      table('Crash soak (SIGKILL)', r.soak.map((s) => s.backend), [
        ['kills', ...r.soak.map((s) => s.kills)],
        ['worker processes killed', ...r.soak.map((s) => s.processesKilled)],
        ['kills inside prepare', ...r.soak.map((s) => s.killsInsidePrepare)],
        ['starts acknowledged', ...r.soak.map((s) => s.acknowledged)],
        ['starts found', ...r.soak.map((s) => s.found)],
        ['starts stored', ...r.soak.map((s) => s.stored)],
        ['partial starts', ...r.soak.map((s) => s.partial)],
        ['lost starts', ...r.soak.map((s) => s.lost)],
        ['ambiguous (ack lost to a kill)', ...r.soak.map((s) => s.ambiguous)],
        ['  replayed: existing / created', ...r.soak.map((s) => `${s.resolvedExisting} / ${s.resolvedCreated}`)],
      ]),
      '',
    );
  }
  if (r.fuzz) {
    const f = r.fuzz;
    const outcomes = Object.entries(f.storeOutcomes).map(([k, v]) => `${k} ${v}`).join(', ');
    out.push(
      'Bad input (fast-check)',
      `  commands generated              ${f.cases}`,
      `  rejected, typed with a path     ${f.rejectedTyped} of ${f.rejected}`,
      `  built invalid, caught at path   ${f.invalidAtPath} of ${f.invalidCases}`,
      `  accepted                        ${f.accepted}`,
      `  prepare outcomes                ${outcomes}`,
      `  rows gained                     ${f.rowsGained.length === 0 ? 0 : f.rowsGained.join('; ')}`,
      `  stored records fuzzed           ${f.records.cases} (changed ${f.records.changed}, detected ${f.records.detected}, one-pass verifier as its oracle ${f.records.sameAsOracle})`,
      `  crashes                         ${f.crashes}`,
      '',
    );
  }
  if (r.corruption.length > 0) {
    out.push(
      table('Corruption sweep', r.corruption.map((c) => c.backend), [
        ['starts in the store', ...r.corruption.map((c) => c.stored)],
        ['target starts', ...r.corruption.map((c) => c.targets)],
        ['tables (live schema)', ...r.corruption.map((c) => c.tables)],
        ['columns reached', ...r.corruption.map((c) => `${c.columnsReached} of ${c.columns}`)],
        ['cells tried', ...r.corruption.map((c) => c.cellsTried)],
        ['detected', ...r.corruption.map((c) => c.detected)],
        ['  repository failed closed', ...r.corruption.map((c) => c.detectedByRepository)],
        ['  recovery.verify reported', ...r.corruption.map((c) => c.detectedByVerify)],
        ['  CLI verify exit 5', ...r.corruption.map((c) => `${c.cliExit5} of ${c.cliRuns}`)],
        ['refused by the schema', ...r.corruption.map((c) => c.refusedBySchema)],
      ]),
      '',
    );
  }
  if (r.forgery.length > 0) {
    out.push(
      table('Forgeries (runtime credentials)', r.forgery.map((f) => f.backend), [
        ['attempts', ...r.forgery.map((f) => f.attempts)],
        ['refused by the database', ...r.forgery.map((f) => f.refused)],
        ['detected by verify', ...r.forgery.map((f) => f.detected)],
        ['accepted', ...r.forgery.map((f) => f.accepted)],
      ]),
      '',
    );
  }
  for (const f of r.failover) out.push(formatFailover(f), '');
  if (r.adapters.length > 0) out.push(formatAdapterCounts(r.adapters.flatMap((a) => a.counts)), '');
  if (r.adapters.some((a) => a.forgeries.length > 0)) out.push(formatForgedTickets(r.adapters.flatMap((a) => a.forgeries)), '');
  if (r.adapters.some((a) => a.promises.length > 0)) out.push(formatAdapterPromises(r.adapters.flatMap((a) => a.promises)), '');
  out.push(`Durations: ${Object.entries(r.durationMs).map(([k, v]) => `${k} ${(v / 1000).toFixed(1)} s`).join(', ')}`);
  const problems = [
    ...r.soak.flatMap((s) => [...s.failures, ...s.problems.map((p) => `${s.backend} ${p.kind} ${p.record}: ${p.detail}`)]),
    ...(r.fuzz?.failures ?? []),
    ...(r.fuzz?.rowsGained ?? []),
    ...r.corruption.flatMap((c) => [...c.failures, ...c.undetected]),
    ...r.forgery.flatMap((f) => f.failures),
    ...r.failover.flatMap((f) => [
      ...f.failures,
      ...f.problems.map((p) => `${p.kind} ${p.record}: ${p.detail}`),
      ...f.events.flatMap((e) => Object.entries(e.errors).filter(([k]) => k.startsWith('untyped')).map(([k, n]) => `failover ${e.event}: ${n} errors reached callers untyped (${k}: ${e.samples[k] ?? ''})`)),
    ]),
    ...r.adapters.flatMap((a) => a.failures),
  ];
  out.push(r.ok ? 'RESULT: ok' : `RESULT: FAILED\n${problems.slice(0, 40).map((p) => `  - ${p}`).join('\n')}`);
  return out.join('\n');
};
