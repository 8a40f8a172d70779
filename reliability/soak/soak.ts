import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isStartBarrierError, type ToolExecutionStartCommand } from '../../domain';
import { checkStore, describeProblems, type StoreProblem } from '../../testkit/invariants';
import type { BackendName } from '../../testkit/rawSql';
import { seededRng, sleep } from '../lib/random';
import { withRaw, withStore, type Store } from '../lib/stores';
import { spawnTsxWorker, type Worker } from '../../testkit/workerProcess';

// Crash soak: worker processes run starts in a loop (new Runs, exact replays, retries at new
// versions after lost, approvals, sibling StepRuns, outcomes) against one real store; the
// harness SIGKILLs every worker at a random moment, then checks the store (invariants.ts).
// Starts in flight at a kill are ambiguous to their client; the next round's worker replays
// them exactly (R4.2), and the harness records how each resolved.

const WORKER = join(__dirname, 'worker.ts');

export interface SoakOptions {
  readonly backend: BackendName;
  /** Kill rounds: every worker of the round is SIGKILLed, then the store is checked. */
  readonly kills: number;
  readonly workers: number;
  readonly seed: number;
  /** Longest a round runs after every worker is READY before its kill. */
  readonly maxWindowMs: number;
  readonly log?: (line: string) => void;
}

export interface SoakReport {
  readonly backend: BackendName;
  readonly kills: number;
  readonly processesKilled: number;
  /** Kills that hit a worker between BEGIN and ACK (inside prepare, or just after its commit). */
  readonly killsInsidePrepare: number;
  /** Distinct starts some client saw acknowledged. */
  readonly acknowledged: number;
  /** Of those, present and verified at the last check. */
  readonly found: number;
  readonly stored: number;
  readonly created: number;
  readonly existing: number;
  /** Starts whose client was killed before it saw the outcome, and how the replay resolved. */
  readonly ambiguous: number;
  readonly resolvedExisting: number;
  readonly resolvedCreated: number;
  readonly partial: number;
  readonly lost: number;
  readonly problems: readonly StoreProblem[];
  readonly failures: readonly string[];
  readonly ok: boolean;
}

export const runSoak = (options: SoakOptions): Promise<SoakReport> => withStore(options.backend, 'soak', (store) => soakOn(store, options));

const soakOn = async (store: Store, options: SoakOptions): Promise<SoakReport> => {
  const log = options.log ?? (() => undefined);
  const rng = seededRng(options.seed);
  const scratch = mkdtempSync(join(tmpdir(), 'reliability-soak-'));
  const acknowledged = new Map<string, string>();
  const verified = new Set<string>();
  /** Commands in flight when their worker died, not yet replayed to an outcome. */
  const inflight = new Map<string, ToolExecutionStartCommand>();
  const ambiguous = new Set<string>();
  const failures: string[] = [];
  const problems: StoreProblem[] = [];
  let processesKilled = 0;
  let killsInsidePrepare = 0;
  let created = 0;
  let existing = 0;
  let resolvedExisting = 0;
  let resolvedCreated = 0;
  let partial = 0;
  let lost = 0;
  let stored = 0;
  let found = 0;

  const record = (w: Worker, handed: readonly ToolExecutionStartCommand[]): void => {
    const begun = new Map<string, ToolExecutionStartCommand>();
    const acked = new Set<string>();
    let open: string | undefined;
    for (const line of w.lines) {
      const [kind, a, b, c] = line.split(' ');
      if (kind === 'BEGIN') {
        begun.set(a!, JSON.parse(Buffer.from(b!, 'base64').toString('utf8')) as ToolExecutionStartCommand);
        open = a;
      } else if (kind === 'ACK') {
        if (a === 'created') created++;
        else existing++;
        const before = acknowledged.get(b!);
        if (before !== undefined && before !== c) failures.push(`${b}: acknowledged with ${before}, later with ${c}`);
        acknowledged.set(b!, c!);
        acked.add(b!);
        open = undefined;
      } else if (kind === 'RESOLVED') {
        if (b === 'existing') resolvedExisting++;
        else resolvedCreated++;
      } else if (kind === 'FAIL') {
        failures.push(`worker: ${line.slice(5, 2000)}`);
      }
    }
    if (open !== undefined) {
      // Killed between BEGIN and ACK: inside prepare, or after its commit but before the ACK.
      killsInsidePrepare++;
      ambiguous.add(open);
      inflight.set(open, begun.get(open)!);
    }
    // Inherited commands the worker died before resolving stay in flight for the next round.
    for (const c of handed) if (!acked.has(c.startId)) inflight.set(c.startId, c);
  };

  try {
    for (let round = 1; round <= options.kills; round++) {
      const handed = [...inflight.values()];
      inflight.clear();
      const file = join(scratch, `inflight-${round}.json`);
      writeFileSync(file, JSON.stringify(handed));
      const workers = Array.from({ length: options.workers }, (_, i) =>
        spawnTsxWorker(WORKER, [store.backend, store.target], {
          SOAK_SEED: String(Math.floor(rng() * 2 ** 31)),
          ...(i === 0 && handed.length > 0 ? { SOAK_INFLIGHT: file } : {}),
        }),
      );
      try {
        await Promise.all(workers.map((w) => w.waitFor('READY')));
        for (const w of workers) w.send('GO');
        const window = Math.floor(rng() * options.maxWindowMs);
        await Promise.all(workers.map(async (w) => {
          await sleep(window + Math.floor(rng() * 25));
          w.kill();
        }));
      } finally {
        for (const w of workers) w.kill();
      }
      const exits = await Promise.all(workers.map((w) => w.exited));
      exits.forEach((exit, i) => {
        if (exit.signal === 'SIGKILL') processesKilled++;
        else failures.push(`round ${round}: worker ${i} exited by itself (${exit.code}): ${workers[i]!.stderr().slice(0, 2000)}`);
      });
      workers.forEach((w, i) => record(w, i === 0 ? handed : []));

      const check = await checkAfterKill(store, acknowledged, verified, false);
      stored = check.stored;
      found = check.found;
      partial = Math.max(partial, check.partial);
      lost = Math.max(lost, check.acknowledged - check.found);
      if (check.problems.length > 0) {
        problems.push(...check.problems);
        log(`  round ${round}: ${check.problems.length} problems\n${describeProblems(check.problems)}`);
      }
      if (round % 10 === 0 || round === options.kills) {
        log(`  ${store.backend} kill ${round}/${options.kills}: acknowledged ${acknowledged.size}, stored ${check.stored}, in flight ${inflight.size}, partial ${check.partial}`);
      }
    }

    // The last round's ambiguous starts: the harness itself replays them, with no kill.
    const authority = await store.open();
    try {
      for (const command of inflight.values()) {
        try {
          const r = await authority.barriers.prepare(command);
          acknowledged.set(command.startId, r.barrier.barrierDigest);
          if (r.outcome === 'existing') resolvedExisting++;
          else resolvedCreated++;
        } catch (e) {
          failures.push(`replay of in-flight ${command.startId}: ${isStartBarrierError(e) ? e.code : 'untyped'} ${String(e)}`);
        }
      }
      inflight.clear();
    } finally {
      await authority.close();
    }
    const final = await checkAfterKill(store, acknowledged, verified, true);
    stored = final.stored;
    found = final.found;
    partial = Math.max(partial, final.partial);
    lost = Math.max(lost, final.acknowledged - final.found);
    problems.push(...final.problems);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }

  const report = {
    backend: store.backend,
    kills: options.kills,
    processesKilled,
    killsInsidePrepare,
    acknowledged: acknowledged.size,
    found,
    stored,
    created,
    existing,
    ambiguous: ambiguous.size,
    resolvedExisting,
    resolvedCreated,
    partial,
    lost,
    problems,
    failures,
  };
  return { ...report, ok: failures.length === 0 && problems.length === 0 && partial === 0 && lost === 0 && found === acknowledged.size };
};

const checkAfterKill = async (store: Store, acknowledged: ReadonlyMap<string, string>, verified: Set<string>, full: boolean) => {
  const authority = await store.open();
  try {
    return await withRaw(store, async (raw) => {
      // One snapshot for the table checks, so a commit racing the check cannot look partial.
      await raw.exec(raw.dialect === 'sqlite' ? 'BEGIN' : 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      try {
        return await checkStore(raw, authority.barriers, { acknowledged, verified, full });
      } finally {
        await raw.exec('COMMIT');
      }
    });
  } finally {
    await authority.close();
  }
};
