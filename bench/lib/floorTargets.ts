import { cpus, loadavg } from 'node:os';
import type { BenchContext } from './context';
import type { Summary } from './measure';
import { target, type BytesFigure, type Target } from './report';
import type { CheckShare } from '../postgres/checkShare';
import type { WakeCost } from './wakeCost';

// How far a start stands from what it must write: the targets of "a start at the floor", each
// a ratio between figures of this same run. A missed target says by how much and why, with the
// measurement that shows it: round trips per start, or the CPU the figure's work took per start
// against the cores this machine has (a CPU-bound ratio is a ratio of CPU per start).

const CORES = cpus().length;

const cpuUsPerOp = (s: Summary): number => (s.clientCpuMsPerOp + (s.serverCpuMsPerOp ?? 0)) * 1000;
/** Cores kept busy by the figure's own client and server work. */
const coresBusy = (s: Summary): number => (cpuUsPerOp(s) * s.opsPerSec) / 1e6;
const us = (ms: number): string => `${(ms * 1000).toFixed(0)} µs`;
const roundTrips = (s: Summary): number | undefined => s.perOp.roundTrips;

/** Why a throughput ratio is what it is: CPU per start on both sides, and whether the cores were the limit. */
const cpuWhy = (product: Summary, baseline: Summary, name: string): string => {
  const busy = coresBusy(product);
  const bound = busy >= 0.8 * CORES ? `CPU-bound (${busy.toFixed(1)} of ${CORES} cores busy), so starts/s follows CPU per start: ` : `${busy.toFixed(1)} of ${CORES} cores busy; `;
  return `${bound}${cpuUsPerOp(product).toFixed(0)} µs of client + server CPU per start against ${cpuUsPerOp(baseline).toFixed(0)} µs for the ${name}`;
};

const kbOf = (n: number): string => `${(n / 1024).toFixed(1)} KB`;

/** Table growth allowed per start, as a multiple of the canonical bytes of the records it commits. */
const BYTES_ALLOWANCE = 1.8;

/** The objects of one group (a table with its indexes, TOAST and SQLite autoindexes). */
const groupOf = (name: string): string => {
  const base = name.replace(/^sqlite_autoindex_(.*)_\d+$/, '$1').replace(/ \(TOAST\)$/, '');
  for (const table of ['start_replay_identities', 'tool_execution_start_barriers', 'step_run_mutations', 'security_audit_events', 'trace_anchors', 'audit_receipts', 'step_runs', 'streams', 'runs', 'events']) {
    if (base === table || base.startsWith(`${table}_`)) return table;
  }
  return 'other';
};

/**
 * Where a start's table growth above the allowance is, from the per-object growth of the
 * same round (lib/bytes.ts): each group of tables with its indexes, largest first, and what in
 * the storage engine makes the largest ones what they are.
 */
const bytesWhy = (b: BytesFigure, backend: 'pg' | 'sqlite'): string => {
  const allowance = BYTES_ALLOWANCE * b.canonicalBytes;
  const objects = Object.entries(b.byObject ?? {});
  if (objects.length === 0) return `${kbOf(b.tableBytes - allowance)} per start above the ${kbOf(allowance)} the target allows (no per-object figures in this run)`;
  const size = (names: (n: string) => boolean) => objects.filter(([n]) => names(n)).reduce((sum, [, o]) => sum + o.bytes, 0);
  const groups = new Map<string, number>();
  for (const [name, o] of objects) groups.set(groupOf(name), (groups.get(groupOf(name)) ?? 0) + o.bytes);
  const largest = [...groups.entries()].sort(([, x], [, y]) => y - x).slice(0, 6).map(([g, n]) => `${g} ${kbOf(n)}`).join(', ');
  const events = b.byObject?.events;
  const eventIndexes = size((n) => groupOf(n) === 'events' && n !== 'events' && !n.endsWith('(TOAST)'));
  const heads = size((n) => ['step_runs', 'runs', 'streams'].includes(groupOf(n)));
  const replay = size((n) => groupOf(n) === 'start_replay_identities');
  const engine =
    backend === 'sqlite'
      ? `event pages ${kbOf(events?.bytes ?? 0)} (${((events?.bytes ?? 0) / 4096).toFixed(1)} pages of 4 KB) for ${kbOf(events?.payload ?? 0)} of cells${(events?.bytes ?? 0) > allowance ? `, alone above the allowance` : ''}: ` +
        `a B-tree keeps the rows in key order, here the log's position order (R9.1 fixes a start's five events in it), and appends a row that does not fit the last leaf page to a new page, leaving that one as it is; ` +
        `the barrier event's row (over half a page) leaves room in its page for little more than one neighbour, so a start's rows take two pages and ${kbOf((events?.bytes ?? 0) - (events?.payload ?? 0))} of them is free space. ` +
        `No layout of the one events table packs them tighter in 4 KB pages: a row's columns are one cell whatever their order, a table row spills to overflow pages only above 4061 bytes, and a row in a table of its own still takes a page to itself; ` +
        `a larger page size packs them, but every page a commit touches goes whole to the WAL: more WAL bytes and CPU per start, see RESULTS.md`
      : `event heap ${kbOf(events?.bytes ?? 0)}: PostgreSQL compresses a row only above TOAST_TUPLE_THRESHOLD (~2 KB, fixed at build time; toast_tuple_target only sets how far a row above it is squeezed), so event rows below it are stored uncompressed, and lz4 in place of pglz changes nothing for them; the heads a start rewrites (step_runs, runs and streams once each) grew ${kbOf(heads)}: most new versions go into the room fillfactor 50 leaves (HOT), the others extend the table`;
  return `${kbOf(b.tableBytes - allowance)} per start above the ${kbOf(allowance)} the target allows.${rowsFloor(b, allowance)} Largest growth: ${largest}. The five events' JSON is stored once; above it: ${engine}; the events' unique indexes ${kbOf(eventIndexes)}; ${backend === 'sqlite' ? 'the replay identities are the facts\' own keys (no index of their own)' : `the replay index (seven rows, one unique index) ${kbOf(replay)}`}`;
};

/**
 * The growth with every page full: the bytes of the rows and index entries a start adds
 * (dbstat payload; pgstattuple on PostgreSQL), the events' own beside the rest. Above the
 * allowance it is a floor no page layout gets under.
 */
const rowsFloor = (b: BytesFigure, allowance: number): string => {
  const objects = Object.entries(b.byObject ?? {});
  if (objects.length === 0 || objects.some(([, o]) => o.payload === undefined)) return '';
  const rows = objects.reduce((sum, [, o]) => sum + (o.payload ?? 0), 0);
  const events = objects.filter(([n]) => n === 'events' || n === 'events (TOAST)').reduce((sum, [, o]) => sum + (o.payload ?? 0), 0);
  const ratio = rows / b.canonicalBytes;
  return (
    ` With every page full, the rows and index entries a start adds are ${kbOf(rows)}, ${ratio.toFixed(2)}× the records: the five event rows ${kbOf(events)} (the records' JSON once, with each event's envelope), ` +
    `everything else ${kbOf(rows - events)} (the mirror columns and references the verified read compares the JSON with, and the one unique index per identity)` +
    (rows > allowance
      ? `; so no page layout meets ${BYTES_ALLOWANCE}×: only storing fewer bytes than the records' own text would (compressing the JSON, which the database's own checks of R9.1 read as JSON).`
      : `; the rest (${kbOf(b.tableBytes - rows)}) is free space in pages.`)
  );
};

const roundTripWhy = (s: Summary, required: number): string | undefined => {
  const rt = roundTrips(s);
  return rt !== undefined && rt > required + 0.01 ? `${rt.toFixed(1)} round trips per start where the target is ${required}: each is a wait for the server and a wake-up on both sides` : undefined;
};

/** The server CPU of the database's own checks per start, counted by the server (postgres/checkShare.ts). */
const checksWhy = (ctx: BenchContext): string | undefined => {
  const c = ctx.extra.pgCheckShare as CheckShare | undefined;
  if (c === undefined) return undefined;
  const top = Object.entries(c.byFunction)
    .slice(0, 4)
    .map(([name, v]) => `${name} ${v.toFixed(0)}`)
    .join(', ');
  return `${c.usPerStart.toFixed(0)} µs of a start's server CPU (at one client) is the database's own checks of R9.1 (its PL/pgSQL functions, by pg_stat_user_functions, µs per start: ${top}), which the bare transaction, written with the triggers off, does not run`;
};

/** A new start's first round trip, measured alone (postgres/sections.ts): what the bare transaction never does. */
const readWhy = (read: Summary | undefined): string | undefined =>
  read === undefined ? undefined : `a new start's first round trip alone (the unlocked read of R3.1 and R3.2, which the bare transaction does not make) is ${cpuUsPerOp(read).toFixed(0)} µs of client + server CPU`;

/**
 * A start runs its client code after each of its waits; the bare transaction's rows are built
 * before it is timed. What this machine charges for code right after a wait (lib/wakeCost.ts).
 */
const wakeWhy = (ctx: BenchContext, waits: string): string | undefined => {
  const w = ctx.extra.wakeCost as WakeCost | undefined;
  if (w === undefined || w.ratio < 1.2) return undefined;
  return `the product's client code (decode, decide, verify) runs after ${waits}, which this machine charges ${w.ratio.toFixed(1)}× what the same code costs back to back (decoding one command: ${w.hotUs.toFixed(0)} µs hot, ${w.afterIdleUs.toFixed(0)} µs after a ${w.idleMs} ms wait), while the bare transaction's rows are built before it is timed`;
};

const verifyCpu = (check: Summary | undefined): string =>
  check === undefined ? 'the verification alone is measured by the verify section, not run here' : `${us(check.clientCpuMsPerOp)} of CPU alone, see "Verification"`;

const join = (...parts: (string | undefined)[]): string => parts.filter((p) => p !== undefined).join('; ');

export const floorTargets = (ctx: BenchContext): Target[] => {
  const s = (id: string): Summary | undefined => ctx.figures.find((f) => f.id === id)?.summary;
  const out: Target[] = [];

  const prepare1 = s('pg.prepare.1');
  const bare1 = s('pg.bare.1');
  if (prepare1 && bare1) {
    const rt = roundTrips(prepare1);
    const ratio = prepare1.p50Ms / bare1.p50Ms;
    const t = target({
      id: 'floor.pg.start.1',
      text: 'PostgreSQL new start, 1 client: p50 ≤ 1.4× the bare same-rows transaction; 2 round trips',
      ratio,
      required: 1.4,
      lowerIsBetter: true,
      detail: `p50 ${prepare1.p50Ms.toFixed(2)} vs ${bare1.p50Ms.toFixed(2)} ms; ${rt?.toFixed(1) ?? '–'} round trips/start`,
      why: join(roundTripWhy(prepare1, 2), cpuWhy(prepare1, bare1, 'bare transaction'), readWhy(s('pg.read-start')), checksWhy(ctx), wakeWhy(ctx, 'each of its round trips')),
    });
    out.push(rt !== undefined && rt > 2.01 ? { ...t, met: false } : t);
  }
  const prepare8 = s('pg.prepare.8');
  const bare8 = s('pg.bare.8');
  if (prepare8 && bare8) {
    out.push(
      target({
        id: 'floor.pg.start.8',
        text: 'PostgreSQL new start, 8 clients: ≥ 0.65× the bare same-rows transaction',
        ratio: prepare8.opsPerSec / bare8.opsPerSec,
        required: 0.65,
        detail: `${prepare8.opsPerSec.toFixed(0)} vs ${bare8.opsPerSec.toFixed(0)} starts/s`,
        why: join(roundTripWhy(prepare8, 2), cpuWhy(prepare8, bare8, 'bare transaction'), readWhy(s('pg.read-start')), checksWhy(ctx), wakeWhy(ctx, 'each of its round trips')),
      }),
    );
  }
  const replay = s('pg.replay');
  const select = s('pg.select');
  if (replay && select) {
    const rt = roundTrips(replay);
    const t = target({
      id: 'floor.pg.replay',
      text: 'PostgreSQL exact replay: 1 round trip, p50 ≤ 5× one indexed SELECT',
      ratio: replay.p50Ms / select.p50Ms,
      required: 5,
      lowerIsBetter: true,
      detail: `p50 ${us(replay.p50Ms)} vs ${us(select.p50Ms)}; ${rt?.toFixed(1) ?? '–'} round trips`,
      why: join(
        roundTripWhy(replay, 1),
        `${us(replay.clientCpuMsPerOp)} of client CPU per replay (verification included) against ${us(select.clientCpuMsPerOp)} per SELECT` +
          (replay.serverCpuMsPerOp !== null && select.serverCpuMsPerOp !== null ? `, ${us(replay.serverCpuMsPerOp)} of server CPU against ${us(select.serverCpuMsPerOp)}` : ''),
        replay.perOp.bytesIn !== undefined && select.perOp.bytesIn !== undefined
          ? `the reply carries the stored evidence the read verifies: ${kbOf(replay.perOp.bytesIn)} per replay against ${kbOf(select.perOp.bytesIn)} per SELECT`
          : undefined,
      ),
    });
    out.push(rt !== undefined && rt > 1.01 ? { ...t, met: false } : t);
  }
  const sqliteReplay = s('sqlite.replay.FULL');
  const get = s('sqlite.get.FULL');
  if (sqliteReplay && get) {
    out.push(
      target({
        id: 'floor.sqlite.replay',
        text: 'SQLite exact replay p50 ≤ 12× one prepared get',
        ratio: sqliteReplay.p50Ms / get.p50Ms,
        required: 12,
        lowerIsBetter: true,
        detail: `${us(sqliteReplay.p50Ms)} vs ${us(get.p50Ms)}`,
        why: `a replay decodes the command, looks up its seven identities and verifies the barrier with its five facts (${verifyCpu(s('verify.check'))}); a get returns one row unchecked`,
      }),
    );
  }
  const full = s('sqlite.prepare.FULL');
  const bareFull = s('sqlite.bare.FULL');
  const untriggered = s('sqlite.bare-untriggered.FULL');
  if (full && bareFull) {
    // The bare transaction writes into the same schema, so the triggers (R9.1) are paid on both
    // sides: cutting them would lower both times alike and so lower this ratio, not raise it.
    const triggers = untriggered
      ? `; the database's triggers take ${us(bareFull.clientCpuMsPerOp - untriggered.clientCpuMsPerOp)} of both (the bare transaction with every trigger dropped: ${us(untriggered.clientCpuMsPerOp)}), so they are not the difference`
      : '';
    out.push(
      target({
        id: 'floor.sqlite.full',
        text: 'SQLite FULL new start ≥ 0.9× the bare same-rows transaction',
        ratio: full.opsPerSec / bareFull.opsPerSec,
        required: 0.9,
        detail: `${full.opsPerSec.toFixed(0)} vs ${bareFull.opsPerSec.toFixed(0)} starts/s`,
        why: join(`${us(full.clientCpuMsPerOp)} of CPU per start against ${us(bareFull.clientCpuMsPerOp)} for the bare transaction (decode, decide, read back the heads, and the same fsync)${triggers}`, wakeWhy(ctx, 'the fsync of the start before it')),
      }),
    );
  }
  const check = s('verify.check');
  if (check) {
    const oracle = s('verify.oracle');
    const store = ctx.figures.find((f) => f.id === 'sqlite.verify.large');
    out.push(
      target({
        id: 'floor.verify',
        text: 'Verification ≤ 100 µs of CPU per barrier with its five facts',
        ratio: check.clientCpuMsPerOp * 1000,
        required: 100,
        lowerIsBetter: true,
        unit: ' µs',
        detail: join(
          `one pass ${us(check.clientCpuMsPerOp)}`,
          oracle ? `previous verifier ${us(oracle.clientCpuMsPerOp)} (${(check.clientCpuMsPerOp / oracle.clientCpuMsPerOp).toFixed(2)}×)` : undefined,
          store ? `${store.label}: ${store.summary.opsPerSec.toFixed(0)} barriers/s` : undefined,
        ),
        why: `CPU time on ${CORES} shared cores at load ${loadavg()[0]!.toFixed(1)}: other work on the machine slows the same instructions (the previous verifier, measured interleaved in the same run, shows by how much)`,
      }),
    );
  }
  for (const [id, label, bytesId, beforeId] of [
    ['floor.bytes.pg', 'PostgreSQL', 'pg.bytes.prepare', 'pg.bytes.bare-before'],
    ['floor.bytes.sqlite', 'SQLite', 'sqlite.bytes.prepare', 'sqlite.bytes.bare-before'],
  ] as const) {
    const b = ctx.bytes.find((x) => x.id === bytesId);
    if (b === undefined) continue;
    const before = ctx.bytes.find((x) => x.id === beforeId);
    out.push(
      target({
        id,
        text: `Table growth per start ≤ ${BYTES_ALLOWANCE}× the canonical bytes of the records it commits (${label})`,
        ratio: b.tableBytes / b.canonicalBytes,
        required: BYTES_ALLOWANCE,
        lowerIsBetter: true,
        detail: join(
          `${(b.tableBytes / 1024).toFixed(1)} KB of tables and indexes per start for ${(b.canonicalBytes / 1024).toFixed(1)} KB of records; ${(b.walBytes / 1024).toFixed(1)} KB of WAL`,
          before ? `the same rows on the schema before each fact was stored once: ${(before.tableBytes / 1024).toFixed(1)} KB, ${(before.walBytes / 1024).toFixed(1)} KB of WAL` : undefined,
        ),
        why: bytesWhy(b, id === 'floor.bytes.pg' ? 'pg' : 'sqlite'),
      }),
    );
  }
  return out;
};
