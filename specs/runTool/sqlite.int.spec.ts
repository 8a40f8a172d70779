import { openKeyedSqlite } from '../support/freshStores';
import { runToolCrashConformance } from './crashTool';
import { runToolRedactionConformance } from './redactionConformance';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { freshDir } from '../support/tmp';
import { openExecution, runTool } from '../../application/saga';
import { processAdapter } from '../../infrastructure/adapters';
import { outputDigestOf } from '../../domain';

runToolCrashConformance({
  name: 'SQLite (a real file shared with the killed runtime)',
  open: async () => {
    const fresh = await openKeyedSqlite('run-tool');
    return { ...fresh, kind: 'sqlite', location: fresh.path };
  },
});

runToolRedactionConformance({
  name: 'SQLite, the CLI on the same file',
  open: async () => {
    const { authority, cliArgs, close } = await openKeyedSqlite('run-tool-redaction');
    return { authority, cli: cliArgs, close };
  },
});

describe('R11.4 runTool with the process adapter returns stdout and stderr, bounded, never recorded (SQLite)', function () {
  this.timeout(60_000);
  it('R11.4 given a tool that prints to stdout and stderr, when runTool runs it, then both come back and the store holds only their digest', async () => {
    const { authority, path } = await openKeyedSqlite('run-tool-process');
    const execution = openExecution(authority, { execution: 'enabled' });
    try {
      const adapter = processAdapter({ ref: { id: 'adapter.process.cat.v1', digest: `sha256:${'c'.repeat(64)}` }, command: '/bin/sh', args: ['-c', 'cat; echo the-warning >&2'], journalDir: join(freshDir('journal'), 'j') });
      const result = await runTool(execution, { runId: 'run-p', callId: 'call-1', tool: { name: 'cat', adapter, timeoutMs: 10_000 }, input: { secretish: 'the-output' } });
      expect(result.status).to.equal('completed');
      expect(JSON.parse(result.output!.text)).to.deep.equal({ secretish: 'the-output' });
      expect(result.output).to.include({ stderr: 'the-warning\n', truncated: false, stderrTruncated: false });
      expect(result.outcome?.outcomeDigest).to.equal(outputDigestOf(result.output!.text).outputDigest);
      const raw = new Database(path, { readonly: true });
      try {
        const dump = (raw.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[])
          .map((t) => JSON.stringify(raw.prepare(`SELECT * FROM "${t.name}"`).all()))
          .join('\n');
        expect(dump).to.not.include('the-output').and.not.include('the-warning');
      } finally {
        raw.close();
      }
    } finally {
      await execution.close();
      await authority.close();
    }
  });
});
