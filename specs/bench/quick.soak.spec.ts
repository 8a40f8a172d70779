import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';

// `npm run bench -- --quick` is a smoke test of the bench harness (issue 6): it compiles the
// bench with tsc as `npm run bench` does (scripts/bench.mjs), runs every section at tiny sizes
// against SQLite and the PostgreSQL server, prints the markdown tables and writes the JSON
// figures. Nothing here looks at how fast anything was: no timed
// assertions in the suite, ever. The figures only have to exist and be numbers.

interface Figure {
  id: string;
  clients: number;
  summary: { opsPerSec: number; p50Ms: number; p99Ms: number; rounds: number };
}
interface EdgeChild {
  afterOpen: { rssMb: number };
  afterStarts: { rssMb: number };
  afterIdle: { rssMb: number };
  cpuUsPerStart: number;
  wcharPerStart: number;
  fileBytesPerStart: number;
}
interface Target {
  id: string;
  ratio: number;
  met: boolean;
  why?: string;
}

describe('bench --quick (issue 6): the harness runs end to end', function () {
  this.timeout(600_000);
  const dir = mkdtempSync(join(tmpdir(), 'bench-quick-'));
  const out = join(dir, 'quick.json');
  let stdout = '';
  let status: number | null = null;
  let stderr = '';

  before(() => {
    const root = join(__dirname, '..', '..');
    const r = spawnSync(process.execPath, [join(root, 'scripts', 'bench.mjs'), '--quick', '--out', out, '--cache', join(dir, 'cache')], {
      cwd: root,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    stdout = r.stdout;
    stderr = r.stderr;
    status = r.status;
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  it('exits 0', () => {
    expect(status, stderr.slice(-3000)).to.equal(0);
  });

  it('prints the figure table and the target table in markdown', () => {
    expect(stdout).to.include('| figure | clients | ops/s | p50 ms | p99 ms |');
    expect(stdout).to.include('| target | measured | ratio | required | met |');
    expect(stdout).to.include('| bytes per start | starts | tables + indexes | WAL | canonical records | tables × canonical |');
    for (const label of ['SQLite FULL: prepare', 'SQLite NORMAL: bare transaction', 'PostgreSQL: prepare', 'pgbench tpcb-like', 'emmett-postgresql', 'exact replay', 'Verification per barrier', 'recovery.verify()']) {
      expect(stdout).to.include(label);
    }
  });

  it('writes valid JSON with every figure and every target of the issue', () => {
    const json = JSON.parse(readFileSync(out, 'utf8')) as { quick: boolean; figures: Figure[]; bytes: { id: string; tableBytes: number; walBytes: number; canonicalBytes: number }[]; targets: Target[]; markdown: string };
    expect(json.quick).to.equal(true);
    const ids = json.figures.map((f) => f.id);
    for (const id of ['sqlite.prepare.FULL', 'sqlite.bare.NORMAL', 'sqlite.replay.FULL', 'sqlite.get.FULL', 'sqlite.scale.large', 'sqlite.stream.long', 'pg.contention', 'pg.replay', 'pg.select', 'verify.check', 'verify.oracle', 'sqlite.verify.large']) {
      expect(ids).to.include(id);
    }
    for (const c of [1, 4, 8, 16]) {
      for (const kind of ['prepare', 'pgbench', 'bare', 'emmett', 'floor']) expect(ids).to.include(`pg.${kind}.${c}`);
    }
    for (const f of json.figures) {
      expect(f.summary.opsPerSec, f.id).to.be.a('number').and.satisfy(Number.isFinite);
      expect(f.summary.p50Ms, f.id).to.be.a('number').and.satisfy(Number.isFinite);
    }
    const targets = json.targets.map((t) => t.id);
    // The targets a start is held to, in this order; each met, or missed with the reason measured.
    const held = ['floor.pg.start.8', 'floor.pg.start.1', 'floor.pg.replay', 'floor.sqlite.replay', 'floor.sqlite.full', 'floor.verify', 'floor.bytes.pg', 'floor.bytes.sqlite', 'scale.barriers', 'scale.stream', 'scale.stream.pg', 'rss.max', 'rss.growth'];
    expect(targets.slice(0, held.length)).to.deep.equal(held);
    for (const t of json.targets.filter((x) => held.includes(x.id) && !x.met)) expect(t.why, t.id).to.be.a('string').and.not.equal('');
    // Ratios measured unreachable by construction are figures, not targets.
    for (const id of ['pg.pgbench', 'pg.replay', 'sqlite.replay', 'sqlite.full', 'sqlite.normal', 'pg.emmett.1', 'pg.emmett.8']) expect(targets).not.to.include(id);
    for (const id of ['pg.bytes.prepare', 'pg.bytes.bare', 'sqlite.bytes.prepare', 'sqlite.bytes.bare']) {
      const b = json.bytes.find((x) => x.id === id);
      expect(b, id).not.to.equal(undefined);
      for (const v of [b!.tableBytes, b!.walBytes, b!.canonicalBytes]) expect(v, id).to.be.a('number').and.satisfy(Number.isFinite);
    }
    for (const t of json.targets) expect(t.met, t.id).to.be.a('boolean');
    expect(json.markdown).to.equal(stdout.slice(0, json.markdown.length));
  });

  it('R14.3 prints the edge table and writes it to the JSON: each figure beside the bare connection, with a verdict', () => {
    expect(stdout).to.include("### Edge: the embedded SQLite path under a small device's profile");
    expect(stdout).to.include('| edge figure | product | bare better-sqlite3 | product ÷ bare | target | verdict |');
    const json = JSON.parse(readFileSync(out, 'utf8')) as { edge: { table: string; rows: { id: string; verdict: string }[]; children: Record<'product' | 'bare', EdgeChild> } };
    expect(json.edge.table).to.include('| edge figure |');
    const edgeIds = json.edge.rows.map((r) => r.id);
    for (const id of ['edge.rss.open', 'edge.rss.starts', 'edge.rss.idle', 'edge.handles.open', 'edge.timers.open', 'edge.threads.open', 'edge.cpu', 'edge.fsyncs', 'edge.wchar', 'edge.file', 'edge.file.compacted']) {
      expect(edgeIds).to.include(id);
    }
    for (const r of json.edge.rows) expect(['met', 'missed', 'n/a'], r.id).to.include(r.verdict);
    for (const subject of ['product', 'bare'] as const) {
      const c = json.edge.children[subject];
      for (const v of [c.afterOpen.rssMb, c.afterStarts.rssMb, c.afterIdle.rssMb, c.cpuUsPerStart, c.wcharPerStart, c.fileBytesPerStart]) expect(v, subject).to.be.a('number').and.satisfy(Number.isFinite);
    }
  });
});
