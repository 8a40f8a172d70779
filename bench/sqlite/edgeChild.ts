import { openSync, readFileSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { buildScenario } from '../../domain/scenario';
import { openSqliteStartBarrier, type SqliteStartBarrier } from '../../infrastructure/sqlite';
import { PRAGMAS } from '../../infrastructure/sqlite/sql';
import { lifecycleOf, startWriteOf, trustedDecoded } from '../lib/startRows';
import { SqliteWriter } from './bulk';
import { EDGE_MARK, type EdgeChildResult, type EdgeSubject, edgePrefix } from './edgeProfile';

// Child process of the edge section: one subject (the product's authority, or a bare
// better-sqlite3 connection writing the same rows in the same transaction shape) on a file the
// parent migrated and filled with ready Runs. The parent starts it pinned to one core, under a
// memory limit where one can be set, and under strace where strace exists. Prints one JSON line.
// argv: <product|bare> <database path> <starts> <batch> <idle ms>

const rssMb = (): number => process.memoryUsage().rss / 2 ** 20;
const threads = (): number => readdirSync('/proc/self/task').length;
const TIMER_KINDS = new Set(['Timeout', 'Immediate']);
const resources = (): { handles: number; timers: number } => {
  const all = process.getActiveResourcesInfo();
  const timers = all.filter((r) => TIMER_KINDS.has(r)).length;
  return { handles: all.length - timers, timers };
};
const io = (): { wchar: number; writeBytes: number } => {
  const fields = new Map(
    readFileSync('/proc/self/io', 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split(':').map((x) => x.trim()) as [string, string]),
  );
  return { wchar: Number(fields.get('wchar')), writeBytes: Number(fields.get('write_bytes')) };
};
/** Descriptors open on the database's files (the file, its WAL and its shared memory): one connection holds three. */
const filesOpenOn = (path: string): number =>
  readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`).startsWith(path);
    } catch {
      return false; // closed while listed
    }
  }).length;
const sizeOf = (p: string): number => {
  try {
    return statSync(p).size;
  } catch {
    return 0;
  }
};
const fileAndWal = (path: string): number => sizeOf(path) + sizeOf(`${path}-wal`);
/** A failing open of a path no one has: strace logs it, and the parent counts fsyncs between two marks. */
const mark = (tag: 'on' | 'off'): void => {
  try {
    openSync(`${EDGE_MARK}/${tag}`, 'r');
  } catch {
    // it never exists
  }
};

const main = async (): Promise<void> => {
  const [subjectArg, path, startsArg, batchArg, idleArg] = process.argv.slice(2);
  const subject = subjectArg as EdgeSubject;
  if (subject !== 'product' && subject !== 'bare') throw new Error(`subject must be product or bare, got ${String(subjectArg)}`);
  const starts = Number(startsArg);
  const batchSize = Number(batchArg);
  const idleMs = Number(idleArg);

  const beforeOpen = { rssMb: rssMb(), threads: threads(), ...resources() };
  let product: SqliteStartBarrier | undefined;
  let bare: SqliteWriter | undefined;
  if (subject === 'product') product = await openSqliteStartBarrier({ path: path!, synchronous: 'FULL' });
  else {
    const db = new Database(path!);
    for (const p of PRAGMAS('FULL', 5000)) db.pragma(p);
    bare = new SqliteWriter(db);
  }
  const afterOpen = { rssMb: rssMb(), threads: threads(), ...resources(), files: filesOpenOn(path!) };

  const bytesBefore = fileAndWal(path!);
  let cpuUs = 0;
  let wchar = 0;
  let writeBytes = 0;
  let maxRssMb = afterOpen.rssMb;
  for (let done = 0; done < starts; ) {
    const n = Math.min(batchSize, starts - done);
    const scenarios = Array.from({ length: n }, (_, i) => buildScenario({ prefix: edgePrefix(done + i) }));
    // What each subject is handed is built before it is measured: the command for the
    // product, the rows the domain derives for the bare transaction (as the bench's bare figure).
    const commands = scenarios.map((s) => s.startCommand());
    const now = Date.now();
    const writes = bare === undefined ? [] : scenarios.map((s) => startWriteOf(trustedDecoded(s.startCommand()), lifecycleOf(s).state, now));
    const io0 = io();
    mark('on');
    const cpu0 = process.cpuUsage();
    if (product !== undefined) {
      for (const c of commands) {
        const r = await product.barriers.prepare(c);
        if (r.outcome !== 'created') throw new Error(`start ${c.startId} answered ${r.outcome}, not created`);
      }
    } else for (const w of writes) bare!.bareStart(w);
    const cpu = process.cpuUsage(cpu0);
    mark('off');
    const io1 = io();
    cpuUs += cpu.user + cpu.system;
    wchar += io1.wchar - io0.wchar;
    writeBytes += io1.writeBytes - io0.writeBytes;
    done += n;
    maxRssMb = Math.max(maxRssMb, rssMb());
  }
  const afterStarts = { rssMb: rssMb(), threads: threads(), ...resources(), files: filesOpenOn(path!) };
  const bytesAfter = fileAndWal(path!);

  // No work at all: the authority (or the bare connection) is open and untouched.
  await new Promise((resolve) => setTimeout(resolve, idleMs));
  const afterIdle = { rssMb: rssMb(), threads: threads() };

  if (product !== undefined) await product.close();
  else bare!.db.close();
  const result: EdgeChildResult = {
    subject,
    starts,
    idleMs,
    beforeOpen,
    afterOpen,
    afterStarts,
    afterIdle,
    maxRssMb,
    cpuUsPerStart: cpuUs / starts,
    wcharPerStart: wchar / starts,
    writeBytesPerStart: writeBytes / starts,
    fileBytesPerStart: (bytesAfter - bytesBefore) / starts,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
};

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
