// `npm run reliability` (full sizes) or `npm run reliability -- --short`; options:
//   --only soak,fuzz,corruption,forgery,failover,adapters   --backends sqlite,postgres   --seed N   --json FILE
//   --no-docs (do not write the counts into docs/evidence.md)
// PostgreSQL phases use the server on 127.0.0.1:5432 (SB_PG_ADMIN_URL to change it); the
// failover phase makes and removes its own Patroni cluster (etcd, three PostgreSQL 15 nodes,
// HAProxy; see docs/ha.md). The whole run is bounded: it stops itself past its time limit.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeEvidence } from './evidenceDoc';
import { FULL, PHASES, SHORT, formatReport, runReliability, type Phase } from './index';
import type { BackendName } from '../testkit/rawSql';

const args = process.argv.slice(2);
const value = (flag: string): string | undefined => {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : args.find((a) => a.startsWith(`${flag}=`))?.slice(flag.length + 1);
};
const profile = args.includes('--short') ? SHORT : FULL;
const phases = (value('--only')?.split(',') ?? PHASES) as Phase[];
const backends = (value('--backends')?.split(',') ?? ['sqlite', 'postgres']) as BackendName[];
const seed = value('--seed') === undefined ? undefined : Number(value('--seed'));
// The short bound has room for the adapters phase's killed-after-seal children and forged tickets on a loaded machine.
const limitMs = (profile.name === 'full' ? 25 : 12) * 60_000;

for (const p of phases) if (!(PHASES as readonly string[]).includes(p)) throw new Error(`unknown phase ${p} (${PHASES.join(', ')})`);

const limit = setTimeout(() => {
  console.error(`reliability: over its ${limitMs / 60_000} minute limit, stopping (clusters are removed on exit)`);
  process.exit(2);
}, limitMs);
limit.unref();

runReliability(profile, { phases, backends, ...(seed === undefined ? {} : { seed }), log: (line) => console.log(line) })
  .then((report) => {
    console.log(`\n${formatReport(report)}`);
    const json = value('--json');
    // The profile's sizes travel with the report, so a reader can check the counts against them.
    if (json) writeFileSync(json, JSON.stringify({ ...report, sizes: profile }, null, 2));
    // What a reader of docs/evidence.md sees is what a passing run counted.
    if (report.ok && !args.includes('--no-docs')) {
      const written = writeEvidence(join(__dirname, '..', 'docs', 'evidence.md'), report, profile.adapters.trials);
      if (written.length > 0) console.log(`docs/evidence.md: wrote ${written.join(', ')}`);
    }
    process.exitCode = report.ok ? 0 : 1;
  })
  .catch((e: unknown) => {
    console.error('reliability: the harness itself failed:', e);
    process.exitCode = 1;
  })
  .finally(() => clearTimeout(limit));
