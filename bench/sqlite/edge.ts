import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { buildScenario } from '../../domain/scenario';
import { openSqliteRetention, openSqliteStartBarrier } from '../../infrastructure/sqlite';
import { benchScript } from '../lib/compiled';
import type { BenchContext } from '../lib/context';
import { SqliteWriter } from './bulk';
import { EDGE_MARK, edgePrefix, type EdgeChildResult, type EdgeSubject } from './edgeProfile';

// The embedded path under the profile of a small router (R14.3): one core, a 128 MB memory
// limit where this machine lets a process set one, synchronous=FULL. Each subject runs in a
// child process of its own: the product's authority, and a bare better-sqlite3 connection
// writing the same rows in the same transaction shape (the bench's bare transaction). Every
// figure is printed beside the bare one with a verdict.

export const EDGE_MEMORY_LIMIT_MB = 128;
/**
 * V8 sizes its heap from the machine's memory and collects lazily on a large one; on a 128 MB
 * device node runs with a heap to match. Both subjects get the same cap, whatever else applies.
 */
const EDGE_HEAP_MB = 64;
/** RSS counts as flat after the idle wait when it grew by at most this much. */
const IDLE_TOLERANCE_MB = 1;
/** CPU per start against bare: the SQLite FULL throughput target (≥ 0.7× the bare transaction), as CPU. */
const CPU_RATIO = 1 / 0.7;
/** The same rows in one transaction: the same fsyncs, and bytes within 10% (checkpoints fall where they fall). */
const FSYNC_RATIO = 1;
const BYTES_RATIO = 1.1;

/**
 * Compaction of the product's file after the starts, for "bytes per start after compaction"
 * (R14.2): the operator's retention path opens it, finishes every start still in doubt (an
 * outcome: compaction takes only Runs whose every StepRun is terminal), compacts every finished
 * Run and vacuums. The answer is the file + WAL bytes left per start (the schema's pages included).
 */
export const compactForEdge = async (path: string, starts: number): Promise<number | undefined> => {
  const retention = await openSqliteRetention({ path });
  try {
    const a = retention.authority;
    for (const s of await a.recovery.inDoubt()) await a.recovery.resolve(s.startId, 'completed', { decidedBy: 'edge-bench', reason: 'tool_succeeded' });
    await retention.compact({ before: Date.now() + 60_000 });
  } finally {
    await retention.close();
  }
  return [path, `${path}-wal`].reduce((n, p) => n + (statSync(p, { throwIfNoEntry: false })?.size ?? 0), 0) / starts;
};

interface Applied {
  readonly applied: boolean;
  readonly text: string;
}

export interface EdgeRow {
  readonly id: string;
  readonly figure: string;
  readonly product: string;
  readonly bare: string;
  /** product ÷ bare, where a ratio is the verdict's measure. */
  readonly ratio?: number;
  readonly target: string;
  readonly verdict: 'met' | 'missed' | 'n/a';
}

export interface EdgeReport {
  readonly profile: { readonly oneCore: Applied; readonly memoryLimit: Applied; readonly heap: string; readonly synchronous: 'FULL'; readonly fsyncCounts: Applied; readonly idle: string };
  readonly starts: number;
  readonly children: Record<EdgeSubject, EdgeChildResult & { readonly fsyncsPerStart: number | null }>;
  readonly rows: readonly EdgeRow[];
  readonly table: string;
}

const has = (cmd: string, args: readonly string[]): boolean => spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;

/**
 * A cgroup v2 child group of this process's own group with memory.max set. Only where the
 * memory controller is already delegated to child groups: the bench changes no setting of a
 * group it did not create. A cgroup v1 hierarchy is not touched.
 */
const memoryGroup = (): Applied & { dir?: string } => {
  const notApplied = (why: string) => ({ applied: false, text: `not applied: ${why}; RSS is checked against ${EDGE_MEMORY_LIMIT_MB} MB instead` });
  const line = readFileSync('/proc/self/cgroup', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('0::'));
  const mount = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' - '))
    .find(([, right]) => right?.startsWith('cgroup2 '))?.[0]
    ?.split(' ');
  if (line === undefined || mount === undefined) return notApplied('no cgroup v2 hierarchy');
  // mountinfo: the mounted root (field 4) and the mount point (field 5)
  const root = mount[3]!;
  const rel = line.slice(3);
  const group = join(mount[4]!, rel.startsWith(root) ? rel.slice(root.length) : rel);
  const read = (f: string) => (existsSync(join(group, f)) ? readFileSync(join(group, f), 'utf8').trim() : '');
  const v1Memory = readFileSync('/proc/self/cgroup', 'utf8').split('\n').some((l) => /^\d+:memory:/.test(l));
  if (!read('cgroup.controllers').split(' ').includes('memory')) return notApplied(`the cgroup v2 hierarchy (${group}) has no memory controller${v1Memory ? ' (memory is a cgroup v1 hierarchy here, which the bench leaves alone)' : ''}`);
  if (!read('cgroup.subtree_control').split(' ').includes('memory')) return notApplied(`${group} does not delegate the memory controller to child groups (cgroup.subtree_control)`);
  const dir = join(group, `start-barrier-edge-${process.pid}`);
  try {
    mkdirSync(dir);
  } catch (e) {
    return notApplied(`cannot create a child group under ${group} (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  try {
    writeFileSync(join(dir, 'memory.max'), String(EDGE_MEMORY_LIMIT_MB * 2 ** 20));
    if (existsSync(join(dir, 'memory.swap.max'))) writeFileSync(join(dir, 'memory.swap.max'), '0');
  } catch (e) {
    rmdirSync(dir);
    return notApplied(`cannot set memory.max in ${dir} (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  return { applied: true, text: `applied: cgroup v2 group ${dir}, memory.max ${EDGE_MEMORY_LIMIT_MB} MB${existsSync(join(dir, 'memory.swap.max')) ? ', no swap' : ''}`, dir };
};

/** A migrated file holding `starts` ready Runs, checkpointed: the child only opens it and starts them. */
const seed = async (path: string, starts: number): Promise<void> => {
  const a = await openSqliteStartBarrier({ path, synchronous: 'FULL' });
  try {
    const w = new SqliteWriter(a.db as Database.Database);
    for (let done = 0; done < starts; done += 1000) {
      w.readyRuns(Array.from({ length: Math.min(1000, starts - done) }, (_, i) => buildScenario({ prefix: edgePrefix(done + i) })));
    }
    (a.db as Database.Database).pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    await a.close();
  }
};

const run = (argv: readonly string[]): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => (code === 0 ? resolve(out) : reject(new Error(`edge child exited ${code ?? signal}: ${err.slice(-2000)}`))));
  });

/** fsync and fdatasync calls between the child's "on" and "off" marks, from `strace -f -o`. */
export const fsyncsBetweenMarks = (trace: string): number => {
  let on = false;
  let n = 0;
  for (const line of trace.split('\n')) {
    if (line.includes(`${EDGE_MARK}/on`)) on = true;
    else if (line.includes(`${EDGE_MARK}/off`)) on = false;
    else if (on && /\b(fsync|fdatasync)\(/.test(line)) n++;
  }
  return n;
};

const fmt = (v: number, digits = 0): string => v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const mb = (v: number): string => `${fmt(v, 1)} MB`;
const kb = (v: number): string => `${fmt(v / 1024, 1)} KB`;
const signed = (v: number): string => (v > 0 ? `+${v}` : String(v));

const rows = (p: EdgeReport['children']['product'], b: EdgeReport['children']['bare'], profile: EdgeReport['profile']): EdgeRow[] => {
  const limit = `< ${EDGE_MEMORY_LIMIT_MB} MB`;
  const under = (v: number): EdgeRow['verdict'] => (v < EDGE_MEMORY_LIMIT_MB ? 'met' : 'missed');
  const idleS = fmt(p.idleMs / 1000);
  const n = fmt(p.starts);
  const added = (r: EdgeChildResult, k: 'handles' | 'timers' | 'threads', at: 'afterOpen' | 'afterStarts') => r[at][k] - r.beforeOpen[k];
  const addedRow = (k: 'handles' | 'timers' | 'threads', what: string): EdgeRow => ({
    id: `edge.${k}.open`,
    figure: `${what} added by opening`,
    product: signed(added(p, k, 'afterOpen')),
    bare: signed(added(b, k, 'afterOpen')),
    target: '0 added',
    verdict: added(p, k, 'afterOpen') === 0 ? 'met' : 'missed',
  });
  const all = (r: EdgeChildResult) => added(r, 'handles', 'afterStarts') + added(r, 'timers', 'afterStarts') + added(r, 'threads', 'afterStarts');
  const ratioRow = (id: string, figure: string, pv: number, bv: number, show: (v: number) => string, required: number, why: string): EdgeRow => {
    const ratio = pv / bv;
    return { id, figure, product: show(pv), bare: show(bv), ratio, target: `≤ ${fmt(required, 2)}× bare (${why})`, verdict: Number.isFinite(ratio) && ratio <= required ? 'met' : 'missed' };
  };
  const fsyncs: EdgeRow =
    p.fsyncsPerStart === null || b.fsyncsPerStart === null
      ? { id: 'edge.fsyncs', figure: 'fsync + fdatasync per start', product: profile.fsyncCounts.text, bare: profile.fsyncCounts.text, target: `≤ ${fmt(FSYNC_RATIO, 2)}× bare`, verdict: 'n/a' }
      : ratioRow('edge.fsyncs', 'fsync + fdatasync per start (strace)', p.fsyncsPerStart, b.fsyncsPerStart, (v) => fmt(v, 2), FSYNC_RATIO, 'one transaction per start, R6.3');
  return [
    { id: 'edge.rss.before', figure: 'RSS before opening (the process with its code loaded)', product: mb(p.beforeOpen.rssMb), bare: mb(b.beforeOpen.rssMb), target: '–', verdict: 'n/a' },
    { id: 'edge.rss.open', figure: 'RSS after opening', product: mb(p.afterOpen.rssMb), bare: mb(b.afterOpen.rssMb), target: limit, verdict: under(p.afterOpen.rssMb) },
    { id: 'edge.rss.starts', figure: `RSS after ${n} starts`, product: mb(p.afterStarts.rssMb), bare: mb(b.afterStarts.rssMb), target: limit, verdict: under(p.afterStarts.rssMb) },
    { id: 'edge.rss.max', figure: `RSS at most, sampled after each batch of starts`, product: mb(p.maxRssMb), bare: mb(b.maxRssMb), target: limit, verdict: under(p.maxRssMb) },
    {
      id: 'edge.rss.idle',
      figure: `RSS after ${idleS} s of idle (an hour of idle simulated: nothing of either runs unasked, so an hour does what ${idleS} s does)`,
      product: `${mb(p.afterIdle.rssMb)} (${signed(Number((p.afterIdle.rssMb - p.afterStarts.rssMb).toFixed(1)))} MB)`,
      bare: `${mb(b.afterIdle.rssMb)} (${signed(Number((b.afterIdle.rssMb - b.afterStarts.rssMb).toFixed(1)))} MB)`,
      target: `flat (≤ +${IDLE_TOLERANCE_MB} MB) and ${limit}`,
      verdict: p.afterIdle.rssMb <= p.afterStarts.rssMb + IDLE_TOLERANCE_MB && p.afterIdle.rssMb < EDGE_MEMORY_LIMIT_MB ? 'met' : 'missed',
    },
    addedRow('handles', 'active handles (process.getActiveResourcesInfo)'),
    addedRow('timers', 'active timers (Timeout, Immediate)'),
    addedRow('threads', 'threads (/proc/self/task)'),
    {
      id: 'edge.added.starts',
      figure: `handles + timers + threads added after ${n} starts`,
      product: signed(all(p)),
      bare: signed(all(b)),
      target: '0 added',
      verdict: all(p) === 0 ? 'met' : 'missed',
    },
    {
      id: 'edge.files',
      figure: "descriptors open on the database's files (file, WAL, shm): one connection",
      product: String(p.afterStarts.files),
      bare: String(b.afterStarts.files),
      target: '≤ bare',
      verdict: p.afterStarts.files <= b.afterStarts.files ? 'met' : 'missed',
    },
    ratioRow('edge.cpu', 'CPU per start (process.cpuUsage, user + system)', p.cpuUsPerStart, b.cpuUsPerStart, (v) => `${fmt(v)} µs`, CPU_RATIO, 'the SQLite FULL target ≥ 0.7× bare, as CPU'),
    fsyncs,
    ratioRow('edge.wchar', 'bytes written per start, WAL and checkpoints included (/proc/self/io wchar)', p.wcharPerStart, b.wcharPerStart, kb, BYTES_RATIO, 'the same rows'),
    ratioRow('edge.write_bytes', 'bytes sent to storage per start (/proc/self/io write_bytes)', p.writeBytesPerStart, b.writeBytesPerStart, kb, BYTES_RATIO, 'the same rows'),
    ratioRow('edge.file', 'file + WAL growth per start, before compaction', p.fileBytesPerStart, b.fileBytesPerStart, kb, BYTES_RATIO, 'the same rows'),
  ];
};

export const edgeTable = (r: EdgeReport): string => {
  const head = '| edge figure | product | bare better-sqlite3 | product ÷ bare | target | verdict |\n|---|---:|---:|---:|---|:---:|';
  const lines = r.rows.map((x) => `| ${x.figure} | ${x.product} | ${x.bare} | ${x.ratio === undefined ? '–' : `${fmt(x.ratio, 2)}×`} | ${x.target} | ${x.verdict === 'missed' ? '**missed**' : x.verdict} |`);
  const p = r.profile;
  return [
    `### Edge: the embedded SQLite path under a small device's profile (${fmt(r.starts)} starts per subject)`,
    '',
    `One core: ${p.oneCore.text}. Memory limit ${EDGE_MEMORY_LIMIT_MB} MB: ${p.memoryLimit.text}. V8 heap: ${p.heap}. synchronous=FULL (WAL). fsync counts: ${p.fsyncCounts.text}. Idle: ${p.idle}. ` +
      "Each subject runs alone in a child process on a file the bench migrated and filled with ready Runs; the bare subject is a better-sqlite3 connection writing a start's rows in one BEGIN IMMEDIATE (the bench's bare transaction), its rows built before it is measured.",
    '',
    head,
    ...lines,
  ].join('\n');
};

export const sqliteEdge = async (ctx: BenchContext): Promise<EdgeReport> => {
  const starts = ctx.sizes.edgeStarts;
  const idleMs = ctx.sizes.edgeIdleMs;
  const taskset = has('taskset', ['-c', '0', 'true']);
  // tried as it will be used: a container may forbid ptrace, an old strace lack --seccomp-bpf
  const strace = has('strace', ['-f', '--seccomp-bpf', '-e', 'trace=fsync', '-o', '/dev/null', 'true']);
  const group = memoryGroup();
  const profile: EdgeReport['profile'] = {
    oneCore: taskset ? { applied: true, text: 'applied (taskset -c 0 on the measured process)' } : { applied: false, text: 'not applied (taskset missing)' },
    memoryLimit: { applied: group.applied, text: group.text },
    heap: `--max-old-space-size=${EDGE_HEAP_MB} on both children (V8 sizes its heap from the machine's memory otherwise)`,
    synchronous: 'FULL',
    fsyncCounts: strace ? { applied: true, text: 'strace -f on the child, counted between marks around the starts' } : { applied: false, text: 'n/a (strace missing or not allowed to trace)' },
    idle: `${fmt(idleMs / 1000)} s with no work stands in for an hour: neither subject has a timer, a thread or a handle of its own, so nothing runs while idle`,
  };
  ctx.log(`edge: ${starts} starts per subject; one core ${taskset ? 'on' : 'off'}, memory limit ${group.applied ? 'on' : 'off'}, strace ${strace ? 'on' : 'off'}`);
  const children = {} as Record<EdgeSubject, EdgeChildResult & { fsyncsPerStart: number | null }>;
  try {
    for (const subject of ['product', 'bare'] as const) {
      const path = join(ctx.tmp, `edge-${subject}.db`);
      await seed(path, starts);
      const trace = join(ctx.tmp, `edge-${subject}.strace`);
      const node = [process.execPath, ...process.execArgv, `--max-old-space-size=${EDGE_HEAP_MB}`, benchScript(__dirname, 'edgeChild'), subject, path, String(starts), String(ctx.sizes.quick ? 50 : 100), String(idleMs)];
      const pinned = taskset ? ['taskset', '-c', '0', ...node] : node;
      const limited = group.dir !== undefined ? ['sh', '-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', group.dir, ...pinned] : pinned;
      const argv = strace ? ['strace', '-f', '--seccomp-bpf', '-e', 'trace=fsync,fdatasync,openat', '-o', trace, ...limited] : limited;
      ctx.log(`edge: ${subject}`);
      const out = await run(argv);
      const result = JSON.parse(out.trim().split('\n').pop() ?? 'null') as EdgeChildResult;
      children[subject] = { ...result, fsyncsPerStart: strace ? fsyncsBetweenMarks(readFileSync(trace, 'utf8')) / starts : null };
      if (strace) rmSync(trace, { force: true });
    }
  } finally {
    if (group.dir !== undefined) rmdirSync(group.dir);
  }
  const measured = rows(children.product, children.bare, profile);
  const compacted = await compactForEdge(join(ctx.tmp, 'edge-product.db'), starts);
  measured.push({
    id: 'edge.file.compacted',
    figure: 'file + WAL bytes per start, after compaction',
    product: compacted === undefined ? 'n/a: compaction not built' : kb(compacted),
    bare: 'n/a: a bare connection has no compaction',
    target: '< before compaction',
    verdict: compacted === undefined ? 'n/a' : compacted < children.product.fileBytesPerStart ? 'met' : 'missed',
  });
  const report = { profile, starts, children, rows: measured, table: '' };
  return { ...report, table: edgeTable(report) };
};
