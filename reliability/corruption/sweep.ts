import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CorruptRecordError, commandOfBarrier, invocationPlanDigest, isStartBarrierError, type StartBarrierRecord } from '../../domain';
import { executionPortOf } from '../../application/execution';
import { buildScenario } from '../../domain/scenario';
import type { BackendName } from '../../testkit/rawSql';
import { mutateCell, postgresDamageSession, reformatJson, sqliteDamageSession, type DamageSession } from '../../testkit/damage';
import { openAuthority, withStore, type AnyAuthority, type Store } from '../lib/stores';
import { nodeArgsOf } from '../../testkit/workerProcess';
import { retentionOn } from '../../infrastructure/sqlite/sqliteRetention';
import type { SqliteStartBarrier } from '../../infrastructure/sqlite';
import { postgresRetentionOn } from '../../infrastructure/postgres/postgresRetention';
import type { PostgresStartBarrier } from '../../infrastructure/postgres';

// Corruption sweep (R5.3, R9.2): a store holding many starts (ready, approval, retried at a new
// version, with outcomes, sibling StepRuns); for a few target starts, change one stored cell at
// a time past the database's own guards (damage.ts), read through every entry point, then put
// the cell back and check the start reads clean again. Every change must be detected: for the
// start's own rows the repository fails closed (CorruptRecordError, never a wrong answer) and
// `recovery.verify` reports damage; for every other table of the Run (its lifecycle events,
// chain links, stream / Run / StepRun heads, outcome rows) `recovery.verify` reports it; and
// for a sample of cells the CLI `qinglong-barrier verify` exits 5.

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
  /** Tables and columns of the live schema, and how many of those columns a change reached. */
  readonly tables: number;
  readonly columns: number;
  readonly columnsReached: number;
  readonly failures: readonly string[];
  readonly ok: boolean;
}

/** The keyring every store of the sweep seals its starts with (R9.4), so the MAC rows are swept too. */
const SWEEP_KEY = { id: 'sweep-k1', secret: Buffer.alloc(32, 0x5a) };
const SWEEP_KEY_RING = { active: SWEEP_KEY };
/** R12.2: the rich Run's start has a sealed invocation plan; verify holds its key, so every cell of it is checked. */
const SWEEP_PLANS = { keyring: { current: 'sweep-p1', keys: { 'sweep-p1': Buffer.alloc(32, 0x3c) } } };
const SWEEP_INPUT = { input: { query: 'sealed by the sweep', secret: 'never in a preview' } };

/**
 * Build the store: `n` starts of every kind, some retried, some with outcomes, some siblings.
 * The first Run holds a row of every table a Run can own, so a single target start already
 * reaches every column: an approval start resolved with a note and driven through two claim
 * generations (one released), and a sibling StepRun resolved with a note that was then purged.
 */
const populate = async (a: AnyAuthority, n: number): Promise<{ ids: string[]; preferred: string[] }> => {
  const ids: string[] = [];
  const preferred: string[] = [];
  {
    // R14.2: a Run compacted before every other was written, so its record and kept identities are swept too
    const s = buildScenario({ prefix: 'sweep-compacted' });
    for (const c of s.lifecycle) await a.runs.handle(c);
    const command = s.startCommand();
    await a.barriers.prepare(command);
    await a.recovery.resolve(command.startId, 'completed', { decidedBy: 'sweep', reason: 'tool_succeeded' });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const retention = a.backend === 'sqlite' ? retentionOn(a as SqliteStartBarrier) : postgresRetentionOn(a as PostgresStartBarrier);
    await retention.compact({ before: Date.now() });
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  {
    const s = buildScenario({ prefix: 'sweep-rich', withApproval: true });
    for (const c of s.lifecycle) await a.runs.handle(c);
    const command = s.startCommand();
    const sealable = { ...command, admission: { ...command.admission, planDigest: invocationPlanDigest(SWEEP_INPUT) } };
    const first = (await a.barriers.prepare(sealable)).barrier.record.startId;
    await executionPortOf(a)!.plans.seal(first, sealable.admission.planDigest, sealable.contracts.redaction, SWEEP_INPUT, { fields: ['query'] });
    const sibling = buildScenario({ prefix: 'sweep-rich', runId: s.runId, projectId: s.projectId, stepRunId: `${s.stepRunId}-b` });
    for (const c of sibling.lifecycle.slice(1)) await a.runs.handle(c);
    const second = (await a.barriers.prepare(sibling.startCommand(sibling.stepRun, 'b-v3'))).barrier.record.startId;
    const claims = a.driverClaims();
    try {
      const one = await claims.claim(first, 'sweep-driver-1', 60_000);
      if (one.status === 'claimed') await claims.release(one.claim);
      await claims.claim(first, 'sweep-driver-2', 60_000);
    } finally {
      await claims.close();
    }
    await a.recovery.resolve(first, 'completed', { decidedBy: 'sweep', reason: 'tool_succeeded', note: 'checked by the sweep', outcomeDigest: `sha256:${'5a'.repeat(32)}` });
    await a.recovery.resolve(second, 'failed', { decidedBy: 'sweep', reason: 'tool_failed', note: 'to be purged' });
    await a.recovery.purgeNote(second);
    ids.push(first, second);
    preferred.push(first);
  }
  for (let i = 0; i < n; i++) {
    const s = buildScenario({ prefix: `sweep-${i}`, withApproval: i % 4 === 1 });
    for (const c of s.lifecycle) await a.runs.handle(c);
    const first = await a.barriers.prepare(s.startCommand());
    ids.push(first.barrier.record.startId);
    if (i === 3 || i === 4) preferred.push(first.barrier.record.startId); // completed, plain ready
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
  const missed: string[] = [];
  let tableCount = 0;
  let columnCount = 0;
  let columnsReached = 0;
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
    const a = await store.open({ evidenceKeys: SWEEP_KEY_RING, plans: SWEEP_PLANS });
    try {
      ({ ids, preferred } = await populate(a, Math.max(options.starts, 5)));
    } finally {
      await a.close();
    }
  }
  // Targets: one start of each kind first (the rich Run's approval start, completed, lost, retried, ready, sibling).
  const order = [0, 1, 2, 3, 4, 5].map((i) => preferred[i]).concat(ids).filter((id): id is string => id !== undefined);
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
  const authority = await openAuthority(store.backend, target, { evidenceKeys: SWEEP_KEY_RING, plans: SWEEP_PLANS });
  const keyFile = join(scratch, 'keys.json');
  writeFileSync(keyFile, JSON.stringify({ active: SWEEP_KEY.id, keys: { [SWEEP_KEY.id]: SWEEP_KEY.secret.toString('base64') } }), { mode: 0o600 });
  const cli = (): number => {
    const args = store.backend === 'sqlite' ? ['--db', target] : ['--postgres', target];
    const r = spawnSync(process.execPath, [...nodeArgsOf(CLI), 'verify', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000, env: { ...process.env, NO_COLOR: '1', QINGLONG_BARRIER_KEYRING_FILE: keyFile } });
    return r.status ?? -1;
  };

  try {
    const clean = await authority.recovery.verify();
    if (!clean.ok) failures.push(`the undamaged store does not verify: ${JSON.stringify(clean.problems.slice(0, 3))}`);

    /** Every entry point, after one change: must fail closed, never answer from damaged rows. */
    /**
     * `start`: a cell the start's reads use, so they must fail closed and verify report it.
     * `log`: a cell of the Run's log or heads outside the start's reads (lifecycle events, the
     * chain link, the stream / Run / StepRun heads, outcome rows): verify must report it (R9.2).
     */
    const probe = async (record: StartBarrierRecord, what: string, mode: 'start' | 'log' = 'start'): Promise<boolean> => {
      const results: { via: string; value: unknown }[] = [];
      const settle = async (via: string, p: Promise<unknown>) => results.push({ via, value: await p.then((v) => v, (e: unknown) => e) });
      await settle('getByStartId', authority.barriers.getByStartId(record.startId));
      await settle('getByStepRunAttempt', authority.barriers.getByStepRunAttempt(record.runId, record.stepRunId, record.attempt.startedStepRunVersion));
      await settle('prepare (exact replay)', authority.barriers.prepare(commandOfBarrier(record)));
      const corrupt = results.filter((r) => r.value instanceof CorruptRecordError);
      const answered = mode === 'log' ? [] : results.filter((r) => r.value !== null && !isStartBarrierError(r.value));
      const untyped = results.filter((r) => r.value instanceof Error && !isStartBarrierError(r.value));
      for (const r of untyped) failures.push(`${what}: ${r.via} threw untyped ${String(r.value)}`);
      const byRepository = mode === 'start' ? corrupt.length > 0 && answered.length === 0 : corrupt.length > 0;
      const report = await authority.recovery.verify().catch((e: unknown) => {
        failures.push(`${what}: verify threw ${String(e)}`);
        return { ok: true, problems: [] };
      });
      const byVerify = !report.ok;
      cellsTried++;
      if (byRepository) detectedByRepository++;
      if (byVerify) detectedByVerify++;
      const caught = mode === 'start' ? byRepository && byVerify : byVerify;
      if (caught) detected++;
      if (!caught) missed.push(`${what}: ${results.map((r) => `${r.via} -> ${r.value instanceof Error ? (r.value as { code?: string }).code ?? 'untyped' : r.value === null ? 'null' : 'ANSWERED'}`).join(', ')}; verify ${report.ok ? 'ok' : 'damage'}`);
      // The CLI holds no plan key: a sealed plan's bytes are checked by verify with the key only.
      if (caught && options.cliEvery > 0 && cellsTried % options.cliEvery === 0 && !what.includes(' invocation_plans[')) {
        cliRuns++;
        const code = cli();
        if (code === 5) cliExit5++;
        else missed.push(`${what}: qinglong-barrier verify exited ${code}, expected 5`);
      }
      return caught;
    };

    /** After the cell is put back the start must read clean again (the sweep restores exactly). */
    const expectRestored = async (startId: string, digest: string, what: string) => {
      const back = await authority.barriers.getByStartId(startId).catch((e: unknown) => e);
      if (!(back !== null && typeof back === 'object' && 'barrierDigest' in back && back.barrierDigest === digest)) failures.push(`${what}: the start does not read clean after restoring (${String(back)})`);
    };

    const swapSource = (startId: string) => ids.find((id) => id !== startId && !targets.includes(id)) ?? ids.find((id) => id !== startId)!;

    /**
     * Where a start's damage targets are, table by table (R9.2: every column of every table).
     * `start`: the start's own rows, which its reads use (they must fail closed, and verify
     * report it); `log`: every other row of its Run or of the store (the Run's lifecycle
     * events and heads, outcome rows, notes, driver claims, the SQLite commit guard, the
     * migration ledger and capabilities): verify must report it. A table of the live schema
     * that no group names fails the sweep, so a table added later cannot go unswept.
     */
    interface Group {
      readonly table: string;
      readonly where: string;
      readonly params: readonly unknown[];
      readonly mode: (column: string) => 'start' | 'log';
      /** Once per sweep (store-wide rows), not once per target. */
      readonly once?: boolean;
    }
    const groupsOf = (record: StartBarrierRecord): Group[] => {
      const sequence = record.runEvent.runEventSequence;
      const stream = `run-${record.runId}`;
      const start = (table: string, where: string, params: readonly unknown[]): Group => ({ table, where, params, mode: (c) => (c === 'chain_digest' || c === 'global_position' ? 'log' : 'start') });
      const byVerify = (table: string, where: string, params: readonly unknown[], once = false): Group => ({ table, where, params, mode: () => 'log', once });
      const ofRun = 'start_id IN (SELECT start_id FROM ' + session.raw.t('tool_execution_start_barriers') + ' WHERE run_id = ?) ORDER BY start_id';
      return [
        start('tool_execution_start_barriers', 'start_id = ?', [record.startId]),
        start('security_audit_events', 'audit_event_id = ?', [record.audit.auditEventId]),
        start('trace_anchors', 'trace_id = ?', [record.trace.traceId]),
        start('audit_receipts', 'audit_receipt_id = ?', [record.audit.auditReceiptId]),
        start('step_run_mutations', 'mutation_id = ?', [record.mutation.mutationId]),
        start('events', 'stream_id = ? AND stream_position >= ? AND stream_position <= ? ORDER BY stream_position', [stream, sequence - 3, sequence + 1]),
        // SQLite keeps no replay index: its identities are the keys of the rows above
        ...(store.backend === 'sqlite' ? [] : [start('start_replay_identities', 'start_id = ? ORDER BY identity', [record.startId])]),
        start('start_evidence_macs', 'start_id = ?', [record.startId]),
        byVerify('events', 'stream_id = ? AND (stream_position < ? OR stream_position > ?) ORDER BY stream_position', [stream, sequence - 3, sequence + 1]),
        byVerify('streams', 'stream_id = ?', [stream]),
        byVerify('runs', 'run_id = ?', [record.runId]),
        byVerify('step_runs', 'run_id = ? ORDER BY step_run_id', [record.runId]),
        byVerify('start_outcomes', 'run_id = ? ORDER BY start_id', [record.runId]),
        // the store's starts in doubt, wherever they are (a target's own Run may have none)
        byVerify('in_doubt_starts', '1 = 1 ORDER BY start_id', [], true),
        byVerify('resolution_notes', ofRun, [record.runId]),
        byVerify('adapter_driver_claims', ofRun.replace('ORDER BY start_id', 'ORDER BY start_id, generation, kind'), [record.runId]),
        byVerify('invocation_plans', ofRun, [record.runId]),
        byVerify('start_whole_at_commit', 'start_id = ?', [record.startId]),
        byVerify('run_event_macs', 'stream_id = ? ORDER BY from_position', [stream]),
        byVerify('run_event_seal_origins', '1 = 1 ORDER BY key_id', [], true),
        byVerify('schema_migrations', '1 = 1 ORDER BY name', [], true),
        byVerify('capabilities', '1 = 1 ORDER BY name', [], true),
        byVerify('run_compactions', '1 = 1 ORDER BY run_id', [], true),
        byVerify('compacted_identities', '1 = 1 ORDER BY identity, value', [], true),
      ];
    };
    const schema = await session.schema();
    const named = new Set(groupsOf((await authority.barriers.getByStartId(targets[0]!))!.record).map((g) => g.table));
    for (const table of Object.keys(schema)) if (!named.has(table)) failures.push(`table ${table} has no damage target: name its rows in the sweep's groups`);
    /** Which columns a change reached (applied, or refused by a unique index or type): every one must be. */
    const reached = new Map<string, Set<string>>();
    const reach = (table: string, column: string) => (reached.get(table) ?? reached.set(table, new Set()).get(table)!).add(column);

    for (const [n, startId] of targets.entries()) {
      const b = (await authority.barriers.getByStartId(startId))!;
      const other = (await authority.barriers.getByStartId(swapSource(startId)))!;
      const theirs = groupsOf(other.record);
      for (const [g, group] of groupsOf(b.record).entries()) {
        // a table of another schema version (a PostgreSQL-only or SQLite-only one) is not there
        if ((group.once === true && n > 0) || schema[group.table] === undefined) continue;
        const all = await session.rows(group.table, group.where, group.params);
        // Cost: the Run's other rows (verify's net) are swept one row per event type, the
        // store-wide ledger at its first, middle and last row, and by flips only; the start's
        // own rows are swept whole, by every kind. Every column is still reached.
        const rows = group.mode('data_json') === 'start' ? all : group.once === true ? [...new Set([all[0], all[Math.floor(all.length / 2)], all[all.length - 1]])].filter((r) => r !== undefined) : group.table === 'events' ? all.filter((r, i) => all.findIndex((x) => x.event_type === r.event_type) === i) : all;
        // swap: the same cell of another start's row; store-wide rows swap with their neighbour
        const source = group.once === true ? [...rows.slice(1), ...rows.slice(0, 1)] : await session.rows(group.table, theirs[g]!.where, theirs[g]!.params);
        for (const [index, row] of rows.entries()) {
          for (const [column, value] of Object.entries(row)) {
            if (column === '_key') continue;
            for (const kind of options.kinds) {
              if (kind === 'swap' && group.mode(column) === 'log' && group.mode('data_json') === 'log') continue;
              let next: unknown;
              if (kind === 'flip') next = mutateCell(value);
              else if (kind === 'swap') next = source[index]?.[column];
              else if (column.endsWith('_json')) next = reformatJson(value);
              if (next === undefined || next === null || value === null || String(next) === String(value)) continue;
              const what = `${store.backend} ${startId} ${group.table}[${index}].${column} (${kind}, ${group.mode(column)})`;
              const change = await session.set(group.table, String(row._key), column, next);
              reach(group.table, column);
              if (!change.applied) {
                refusedBySchema++;
                continue;
              }
              await probe(b.record, what, group.mode(column));
              const restore = await session.set(group.table, change.key, column, value);
              if (!restore.applied) failures.push(`${what}: could not restore (${restore.reason})`);
              else row._key = restore.key;
              await expectRestored(startId, b.barrierDigest, what);
            }
          }
        }
      }
      log(`  ${store.backend} sweep: start ${startId}: ${cellsTried} cells tried so far, ${detected} detected`);
    }
    tableCount = Object.keys(schema).length;
    for (const [table, columns] of Object.entries(schema)) {
      columnCount += columns.length;
      for (const column of columns) {
        if (reached.get(table)?.has(column)) columnsReached++;
        if (!named.has(table) || reached.get(table)?.has(column)) continue;
        failures.push(`no change reached ${table}.${column}: the store holds no value there for the sweep to damage`);
      }
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
    undetected: missed,
    tables: tableCount,
    columns: columnCount,
    columnsReached,
    failures,
  };
  return { ...report, ok: failures.length === 0 && missed.length === 0 && cellsTried === detected && cliRuns === cliExit5 };
};
