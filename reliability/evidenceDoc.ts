import { readFileSync, writeFileSync } from 'node:fs';
import { formatAdapterCounts, type ReliabilityReport } from './index';

// `npm run reliability` writes what it counted into docs/evidence.md, between markers, so the
// figures a reader sees are the ones a run printed, never typed by hand. Each section is
// replaced only when the run measured it (an `--only adapters` run leaves the summary alone).

export const SUMMARY = 'summary';
export const ADAPTERS = 'adapters';

const begin = (name: string) => `<!-- reliability:${name}:begin (written by npm run reliability) -->`;
const end = (name: string) => `<!-- reliability:${name}:end -->`;

const byBackend = <T extends { readonly backend: string }>(rows: readonly T[], cell: (r: T) => string): [string, string] => {
  const of = (b: string) => {
    const r = rows.find((x) => x.backend === b);
    return r === undefined ? '(not run)' : cell(r);
  };
  return [of('sqlite'), of('postgres')];
};

/** The summary table of the soak, fuzz, corruption and forgery phases, or undefined when one of them did not run. */
export const summaryMarkdown = (r: ReliabilityReport): string | undefined => {
  const f = r.fuzz;
  if (f === undefined || r.soak.length === 0 || r.corruption.length === 0 || r.forgery.length === 0) return undefined;
  const row = (label: string, [sqlite, postgres]: [string, string]) => `| ${label} | ${sqlite} | ${postgres} |`;
  return [
    `From \`npm run reliability${r.profile === 'short' ? ' -- --short' : ''}\` (seed ${r.seed}):`,
    '',
    '| phase | SQLite | PostgreSQL |',
    '|---|---|---|',
    row(
      "forgeries with the runtime's own credentials (R9.1, R9.4): attempted / refused by the database / detected by keyed reads and `verify` / **accepted**",
      byBackend(r.forgery, (x) => `${x.attempts} / ${x.refused} / ${x.detected} / **${x.accepted}**`),
    ),
    row(
      'corruption sweep, every column of every table of the live schema (R9.2, R5.3): cells tried / detected, no gap allowed',
      byBackend(r.corruption, (x) => `${x.cellsTried} / ${x.detected}`),
    ),
    row('crash soak (R3.9): acknowledged starts / found / partial / lost', byBackend(r.soak, (x) => `${x.acknowledged} / ${x.found} / ${x.partial} / ${x.lost}`)),
    row(`bad input (R1, R10.1): ${f.cases.toLocaleString('en-US')} commands; rejections typed with a path / rows gained`, [
      `${f.rejectedTyped} of ${f.rejected} / ${f.rowsGained.length}`,
      '(same commands)',
    ]),
  ].join('\n');
};

/** The adapters under faults: totals in one sentence, then the table the run printed. */
export const adaptersMarkdown = (r: ReliabilityReport, trials: number): string | undefined => {
  const counts = r.adapters.flatMap((a) => a.counts);
  if (counts.length === 0) return undefined;
  const sum = (pick: (c: (typeof counts)[number]) => number) => counts.reduce((n, c) => n + pick(c), 0);
  const backends = [...new Set(counts.map((c) => c.backend))].join(' and ');
  return [
    `From \`npm run reliability${r.profile === 'short' ? ' -- --short' : ''}\` (${trials} trial(s) of each fault for each adapter, on ${backends}):`,
    `${sum((c) => c.trials)} attempts, ${sum((c) => c.sideEffects)} side effects counted by the tools, **${sum((c) => c.duplicates)} duplicate**,`,
    `**${sum((c) => c.unrecorded)} unrecorded**; ${sum((c) => c.inDoubtAfterFault)} attempts in doubt after their fault, ${sum((c) => c.listedInDoubt)} of them listed by \`in-doubt\`;`,
    `${sum((c) => c.resolvedByInspect)} resolved by inspect, ${sum((c) => c.resolvedByRestart)} by a restart after inspect said \`not_started\`; ${sum((c) => c.leftInDoubt)} left in doubt;`,
    `${sum((c) => c.outcomesRecorded)} outcomes recorded.`,
    '',
    '```',
    formatAdapterCounts(counts),
    '```',
  ].join('\n');
};

/** `doc` with the text between the section's markers replaced; the markers must be there once. */
export const replaceSection = (doc: string, name: string, body: string): string => {
  const from = doc.indexOf(begin(name));
  const to = doc.indexOf(end(name));
  if (from < 0 || to < from || doc.indexOf(begin(name), from + 1) >= 0) throw new Error(`docs/evidence.md: the markers of section ${name} are missing or repeated`);
  return `${doc.slice(0, from + begin(name).length)}\n${body}\n${doc.slice(to)}`;
};

/** Writes the sections this run measured into the evidence document; returns the ones written. */
export const writeEvidence = (path: string, r: ReliabilityReport, adapterTrials: number): string[] => {
  let doc = readFileSync(path, 'utf8');
  const written: string[] = [];
  const summary = summaryMarkdown(r);
  if (summary !== undefined) {
    doc = replaceSection(doc, SUMMARY, summary);
    written.push(SUMMARY);
  }
  const adapters = adaptersMarkdown(r, adapterTrials);
  if (adapters !== undefined) {
    doc = replaceSection(doc, ADAPTERS, adapters);
    written.push(ADAPTERS);
  }
  if (written.length > 0) writeFileSync(path, doc);
  return written;
};
