import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { ValidationError } from '../../domain';
import { httpAdapter, mcpAdapter, processAdapter } from '../../infrastructure/adapters';
import { freshDir } from '../support/tmp';
import { throwsError } from '../../testkit/rejects';

// R10.1 / R11.1: an adapter's options are a deployment's configuration, checked when the adapter
// is made. A misspelt option must not leave a default in place: `honorsIdempotencyKey: false`
// kept the default (true), and the adapter declared idempotent starts the tool does not have.

const ref = { id: 'adapter.spec.v1', digest: `sha256:${'0'.repeat(64)}` };

const refusal = (make: () => unknown): ValidationError => {
  const e = throwsError(make);
  expect(e).to.be.instanceOf(ValidationError);
  return e as ValidationError;
};

describe('R10.1/R11.1 adapter options have one meaning', () => {
  it('R11.1 a valid configuration of each adapter is accepted', () => {
    const dir = freshDir('adapter-options-ok');
    expect(processAdapter({ ref, command: 'true', args: ['-v'], journalDir: join(dir, 'journal'), env: { A: '1' }, inheritPath: true, maxOutputBytes: 1024 }).declaration.kind).to.equal('process');
    expect(processAdapter({ ref, command: 'true', journalDir: join(dir, 'journal'), containment: 'none' }).declaration.guarantees.enforcesTimeout).to.equal(false);
    expect(httpAdapter({ ref, url: 'https://tools.example/act', statusUrl: 'https://tools.example/status', honoursIdempotencyKey: false, maxResponseBytes: 4096, headers: { authorization: 'Bearer x' } }).declaration.guarantees.idempotentStart).to.equal(false);
    expect(mcpAdapter({ ref, transport: { kind: 'stdio', command: 'node', args: ['server.js'], env: { A: '1' }, cwd: dir }, tool: 'act', statusTool: 'status', dedupesOnStartId: true }).declaration.kind).to.equal('mcp');
    expect(mcpAdapter({ ref, transport: { kind: 'http', url: 'http://127.0.0.1:9/mcp' }, tool: 'act' }).declaration.guarantees.idempotentStart).to.equal(false);
  });

  it('R10.1 an unknown option, a wrong type, a URL that is not http(s) or a missing option is VALIDATION_FAILED naming it; nothing is created', () => {
    const dir = freshDir('adapter-options-bad');
    const journalDir = join(dir, 'journal');
    const cases: [() => unknown, string][] = [
      [() => httpAdapter({ ref, url: 'https://tools.example/act', honorsIdempotencyKey: false } as never), 'honorsIdempotencyKey: unknown field'],
      [() => httpAdapter({ ref, url: 'https://tools.example/act', honoursIdempotencyKey: 'no' } as never), 'honoursIdempotencyKey'],
      [() => httpAdapter({ ref, url: 'file:///etc/passwd' }), 'url: expected an http: or https: URL'],
      [() => httpAdapter({ ref, url: 'https://tools.example/act', maxResponseBytes: 0 }), 'maxResponseBytes'],
      [() => httpAdapter({ ref, url: 'https://tools.example/act', headers: { 'x-n': 1 } } as never), 'headers'],
      [() => httpAdapter({ url: 'https://tools.example/act' } as never), 'ref: required field is missing'],
      [() => processAdapter({ ref, command: 'true', journalDir, maxOutputByte: 10 } as never), 'maxOutputByte: unknown field'],
      [() => processAdapter({ ref, command: '', journalDir }), 'command'],
      [() => processAdapter({ ref, command: 'true', journalDir, args: 'a b' } as never), 'args'],
      [() => processAdapter({ ref, command: 'true' } as never), 'journalDir: required field is missing'],
      [() => processAdapter({ ref, command: 'true', journalDir, env: process.env as Record<string, string> }), "env: the runtime's whole environment is never passed"],
      [() => processAdapter({ ref, command: 'true', journalDir, containment: 'cgroup' } as never), 'containment'],
      [() => processAdapter({ ref, command: 'true', journalDir, inheritPath: 'yes' } as never), 'inheritPath'],
      [() => mcpAdapter({ ref, transport: { kind: 'http', url: 'https://tools.example/mcp' }, tool: 'act', dedupeOnStartId: true } as never), 'dedupeOnStartId: unknown field'],
      [() => mcpAdapter({ ref, transport: { kind: 'sse', url: 'https://tools.example/mcp' } as never, tool: 'act' }), 'transport: expected'],
      [() => mcpAdapter({ ref, transport: { kind: 'stdio', command: 'node', url: 'x' } as never, tool: 'act' }), 'transport.url: unknown field'],
      [() => mcpAdapter({ ref, transport: { kind: 'http', url: 'https://tools.example/mcp' } } as never), 'tool: required field is missing'],
      [() => httpAdapter(null as never), 'expected an object'],
    ];
    for (const [make, message] of cases) expect(refusal(make).message, message).to.contain(message);
    expect(existsSync(journalDir)).to.equal(false);
  });
});
