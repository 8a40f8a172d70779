import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CorruptRecordError, commandOfBarrier, isStartBarrierError, type StartBarrierRecord } from '../../domain';
import { buildScenario } from '../../domain/scenario';
import type { BackendName } from '../../testkit/rawSql';
import { mutateCell, postgresDamageSession, reformatJson, sqliteDamageSession, type DamageSession } from '../../testkit/damage';
import { openAuthority, withStore, type AnyAuthority, type Store } from '../lib/stores';

// Corruption sweep (R5.3): a store holding many starts (ready, approval, retried at a new
// version, with outcomes, sibling StepRuns); for a few target starts, change one stored cell at
// a time past the database's own guards (damage.ts), read through every entry point, then put
// the cell back and check the start reads clean again. Every change must be detected: the
// repository fails closed (CorruptRecordError, never a wrong answer), `recovery.verify` reports
// damage, and for a sample of cells the CLI `qinglong-barrier verify` exits 5.

const ROOT = join(__dirname, '..', '..');
const CLI = join(ROOT, 'infrastructure', 'cli', 'main.ts');

export type DamageKind = 'flip' | 'swap' | 'reformat';

export interface SweepOptions {
  readonly backend: BackendName;
  /** Starts in the store. */
  readonly starts: number;
  /** How many of them get every cell damaged. */
  readonly targets: number;
  readonly kinds: readonly DamageKind[];
  /** Run the CLI `verify` on every n-th cell (0: never). */
  readonly cliEvery: number;
  readonly log?: (line: string) => void;
}

export interface SweepReport {
  readonly backend: BackendName;
  readonly stored: number;
  readonly targets: number;
  readonly cellsTried: number;
  readonly detected: number;
  /** Of the tried cells: the repository failed closed on at least one entry point, and none answered. */
  readonly detectedByRepository: number;
  readonly detectedByVerify: number;
  /** Changes a unique index or a column type refused before they reached storage. */
  readonly refusedBySchema: number;
  readonly cliRuns: number;
  readonly cliExit5: number;
  readonly undetected: readonly string[];
  readonly failures: readonly string[];
  readonly ok: boolean;
}

/** Build the store: `n` starts of every kind, some retried, some with outcomes, some siblings. */
const populate = async (a: AnyAuthority, n: number): Promise<{ ids: string[]; preferred: string[] }> => {
  const ids: string[] = [];
  const preferred: string[] = [];
  for (let i = 0; i < n; i++) {
    const s = buildScenario({ prefix: `sweep-${i}`, withApproval: i % 4 === 1 });
    for (const c of s.lifecycle) await a.runs.handle(c);
    const first = await a.barriers.prepare(s.startCommand());
    ids.push(first.barrier.record.startId);
    if (i === 1 || i === 3 || i === 4) preferred.push(first.barrier.record.startId); // approval, completed, plain ready
    const at = { runId: s.runId, stepRunId: s.stepRunId };
    if (i % 4 === 2) {
      // retried at a new version (R4.4): the first attempt lost, a second barrier at version 5
      await a.runs.handle({ type: 'MarkStepRunLost', data: { ...at, decidedBy: 'sweep', reason: 'no_trace_of_tool', requestedAtMs: 1 } });
      await a.runs.handle({ type: 'MarkStepRunReady', data: { ...at, requestedAtMs: 2 } });
      const retry = await a.barriers.prepare(s.startCommand((await a.runs.getStepRun(s.runId, s.stepRunId))!));
      ids.push(retry.barrier.record.startId);
      if (i === 2) preferred.push(first.barrier.record.startId, retry.barrier.record.startId); // lost attempt, and its retry
    } else if (i % 4 === 3) {
      await a.runs.handle({ type: 'CompleteStepRun', data: { ...at, decidedBy: 'sweep', reason: 'tool_succeeded', requestedAtMs: 3 } });
    } else if (i % 8 === 0) {
      const sibling = buildScenario({ prefix: `sweep-${i}`, runId: s.runId, projectId: s.projectId, stepRunId: `${s.stepRunId}-b` });
      for (const c of sibling.lifecycle.slice(1)) await a.runs.handle(c);
      ids.push((await a.barriers.prepare(sibling.startCommand(sibling.stepRun, 'b-v3'))).barrier.record.startId);
      if (i === 0) preferred.push(ids[ids.length - 1]!); // a second StepRun of one Run
    }
  }
  return { ids, preferred };
};

export const runSweep = (options: SweepOptions): Promise<SweepReport> => withStore(options.backend, 'sweep', (store) => sweepOn(store, options));

const sweepOn = async (store: Store, options: SweepOptions): Promise<SweepReport> => {
  const log = options.log ?? (() => undefined);
  const scratch = mkdtempSync(join(tmpdir(), 'reliability-sweep-'));
  const failures: string[] = [];
  const undetected: string[] = [];
  let cellsTried = 0;
  let detected = 0;
  let detectedByRepository = 0;
  let detectedByVerify = 0;
  let refusedBySchema = 0;
  let cliRuns = 0;
  let cliExit5 = 0;

  let ids: string[];
  let preferred: string[];
  {
    const a = await store.open();
    try {
      ({ ids, preferred } = await populate(a, Math.max(options.starts, 5)));
    } finally {
      await a.close();
    }
  }
  // Targets: one start of each kind first (approval, retried, lost, completed, sibling, ready).
  const order = [1, 3, 2, 4, 0, 5].map((i) => preferred[i]).concat(ids).filter((id): id is string => id !== undefined);
  const targets = [...new Set(order)].slice(0, options.targets);

  let session: DamageSession;
  let target: string;
  if (store.backend === 'sqlite') {
    const settle = await store.open();
    (settle as unknown as { db: { pragma(s: string): unknown } }).db.pragma('wal_checkpoint(TRUNCATE)');
    await settle.close();
    target = join(scratch, 'damaged.db');
    session = sqliteDamageSession(store.target, target);
  } else {
    target = store.target;
    session = await postgresDamageSession(store.target);
  }
  const authority = await openAuthority(store.backend, target);
  const cli = (): number => {
    const args = store.backend === 'sqlite' ? ['--db', target] : ['--postgres', target];
    const r = spawnSync(process.execPath, ['--require', 'tsx/cjs', CLI, 'verify', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000, env: { ...process.env, NO_COLOR: '1' } });
    return r.status ?? -1;
  };

  try {
    const clean = await authority.recovery.verify();
    if (!clean.ok) failures.push(`the undamaged store does not verify: ${JSON.stringify(clean.problems.slice(0, 3))}`);

    /** Every entry point, after one change: must fail closed, never answer from damaged rows. */
    const probe = async (record: StartBarrierRecord, what: string): Promise<boolean> => {
      const results: { via: string; value: unknown }[] = [];
      const settle = async (via: string, p: Promise<unknown>) => results.push({ via, value: await p.then((v) => v, (e: unknown) => e) });
      await settle('getByStartId', authority.barriers.getByStartId(record.startId));
      await settle('getByStepRunAttempt', authority.barriers.getByStepRunAttempt(record.runId, record.stepRunId, record.attempt.startedStepRunVersion));
      await settle('prepare (exact replay)', authority.barriers.prepare(commandOfBarrier(record)));
      const corrupt = results.filter((r) => r.value instanceof CorruptRecordError);
      const answered = results.filter((r) => r.value !== null && !isStartBarrierError(r.value));
      const untyped = results.filter((r) => r.value instanceof Error && !isStartBarrierError(r.value));
      for (const r of untyped) failures.push(`${what}: ${r.via} threw untyped ${String(r.value)}`);
      const byRepository = corrupt.length > 0 && answered.length === 0;
      const report = await authority.recovery.verify().catch((e: unknown) => {
        failures.push(`${what}: verify threw ${String(e)}`);
        return { ok: true, problems: [] };
      });
      const byVerify = !report.ok;
      cellsTried++;
      if (byRepository) detectedByRepository++;
      if (byVerify) detectedByVerify++;
      if (byRepository && byVerify) detected++;
      else undetected.push(`${what}: ${results.map((r) => `${r.via} -> ${r.value instanceof Error ? (r.value as { code?: string }).code ?? 'untyped' : r.value === null ? 'null' : 'ANSWERED'}`).join(', ')}; verify ${report.ok ? 'ok' : 'damage'}`);
      if (options.cliEvery > 0 && cellsTried % options.cliEvery === 0) {
        cliRuns++;
        const code = cli();
        if (code === 5) cliExit5++;
        else undetected.push(`${what}: qinglong-barrier verify exited ${code}, expected 5`);
      }
      return byRepository && byVerify;
    };

    /** After the cell is put back the start must read clean again (the sweep restores exactly). */
    const expectRestored = async (startId: string, digest: string, what: string) => {
      const back = await authority.barriers.getByStartId(startId).catch((e: unknown) => e);
      if (!(back !== null && typeof back === 'object' && 'barrierDigest' in back && back.barrierDigest === digest)) failures.push(`${what}: the start does not read clean after restoring (${String(back)})`);
    };

    const swapSource = (startId: string) => ids.find((id) => id !== startId && !targets.includes(id)) ?? ids.find((id) => id !== startId)!;

    for (const startId of targets) {
      const b = (await authority.barriers.getByStartId(startId))!;
      const other = (await authority.barriers.getByStartId(swapSource(startId)))!;
      const rowsOf = async (record: StartBarrierRecord) => {
        const sequence = record.runEvent.runEventSequence;
        return {
          tool_execution_start_barriers: await session.rows('tool_execution_start_barriers', 'start_id = ?', [record.startId]),
          security_audit_events: await session.rows('security_audit_events', 'audit_event_id = ?', [record.audit.auditEventId]),
          trace_anchors: await session.rows('trace_anchors', 'trace_id = ?', [record.trace.traceId]),
          audit_receipts: await session.rows('audit_receipts', 'audit_receipt_id = ?', [record.audit.auditReceiptId]),
          step_run_mutations: await session.rows('step_run_mutations', 'mutation_id = ?', [record.mutation.mutationId]),
          events: await session.rows('events', 'stream_id = ? AND stream_position >= ? AND stream_position <= ? ORDER BY stream_position', [`run-${record.runId}`, sequence - 3, sequence + 1]),
          start_replay_identities: await session.rows('start_replay_identities', 'start_id = ? ORDER BY identity', [record.startId]),
        } as Record<string, Record<string, unknown>[]>;
      };
      const mine = await rowsOf(b.record);
      const theirs = await rowsOf(other.record);

      for (const [table, rows] of Object.entries(mine)) {
        for (const [index, row] of rows.entries()) {
          for (const [column, value] of Object.entries(row)) {
            if (column === '_key' || column === 'global_position') continue; // the log's own ordinal, not part of a start
            for (const kind of options.kinds) {
              let next: unknown;
              if (kind === 'flip') next = mutateCell(value);
              else if (kind === 'swap') next = theirs[table]?.[index]?.[column];
              else if (column.endsWith('_json')) next = reformatJson(value);
              if (next === undefined || next === null || String(next) === String(value)) continue;
              const what = `${store.backend} ${startId} ${table}[${index}].${column} (${kind})`;
              const change = await session.set(table, String(row._key), column, next);
              if (!change.applied) {
                refusedBySchema++;
                continue;
              }
              await probe(b.record, what);
              const restore = await session.set(table, change.key, column, value);
              if (!restore.applied) failures.push(`${what}: could not restore (${restore.reason})`);
              else row._key = restore.key;
              await expectRestored(startId, b.barrierDigest, what);
            }
          }
        }
      }
      // A duplicated identity row (its unique index dropped first): the index names two rows.
      for (const row of mine.start_replay_identities!) {
        const what = `${store.backend} ${startId} start_replay_identities duplicate ${String(row.identity)}`;
        const dup = await session.duplicateIdentity(String(row._key));
        await probe(b.record, what);
        await dup.undo();
        await expectRestored(startId, b.barrierDigest, what);
      }
      log(`  ${store.backend} sweep: start ${startId}: ${cellsTried} cells tried so far, ${detected} detected`);
    }
    const after = await authority.recovery.verify();
    if (!after.ok) failures.push(`the store does not verify after the sweep put every cell back: ${JSON.stringify(after.problems.slice(0, 3))}`);
  } finally {
    await authority.close().catch(() => undefined);
    await session.close().catch(() => undefined);
    rmSync(scratch, { recursive: true, force: true });
  }
  const report = {
    backend: store.backend,
    stored: ids.length,
    targets: targets.length,
    cellsTried,
    detected,
    detectedByRepository,
    detectedByVerify,
    refusedBySchema,
    cliRuns,
    cliExit5,
    undetected,
    failures,
  };
  return { ...report, ok: failures.length === 0 && undetected.length === 0 && cellsTried === detected && cliRuns === cliExit5 };
};
