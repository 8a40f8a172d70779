import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { ExecutionRefusedError, ValidationError } from '../../domain';
import { defineAdapters, loadAdapters, type AdapterRegistryDeclaration } from '../../infrastructure/adapters';
import { freshDir } from '../support/tmp';

// R11.1 One registry: the adapters a runtime uses are declared once (`defineAdapters`, from
// `@qinglong/start-barrier/adapters`), the runtime makes its adapters from the declaration and
// the operator CLI loads the same file (`--adapters adapters.mjs|json`; the CLI side is in
// specs/adapters/adapterConformance.ts). Nothing here starts a tool or opens a connection.

const DIGEST = `sha256:${'a'.repeat(64)}`;
const OTHER = `sha256:${'b'.repeat(64)}`;

const declaration = {
  'adapter.http.v1': { kind: 'http', digest: DIGEST, url: 'http://127.0.0.1:8080/orders', statusUrl: 'http://127.0.0.1:8080/status', honoursIdempotencyKey: false },
  'adapter.mcp.v1': { kind: 'mcp', transport: { kind: 'http', url: 'http://127.0.0.1:8081/mcp' }, tool: 'orders', statusTool: 'status' },
  'adapter.process.v3': { kind: 'process', journalDir: '/var/lib/tool/journal' },
} as const satisfies AdapterRegistryDeclaration;

const refusal = (f: () => unknown): ValidationError => {
  try {
    f();
  } catch (e) {
    if (e instanceof ValidationError) return e;
    throw e;
  }
  throw new Error('expected VALIDATION_FAILED');
};

describe('R11.1 one adapter registry for the runtime and the CLI', () => {
  it('R11.1 the runtime makes each adapter from its entry, with the reviewed ref the plan names', () => {
    const adapters = defineAdapters(declaration);
    expect(adapters.ids).to.deep.equal(Object.keys(declaration));
    const http = adapters.adapter({ id: 'adapter.http.v1', digest: DIGEST });
    expect(http.declaration).to.deep.include({ kind: 'http', ref: { id: 'adapter.http.v1', digest: DIGEST } });
    // the entry's options reach the factory: this tool does not honour the key
    expect(http.declaration.guarantees.idempotentStart).to.equal(false);
    expect(typeof http.inspect).to.equal('function');
    const mcp = adapters.adapter({ id: 'adapter.mcp.v1', digest: OTHER });
    expect(mcp.declaration).to.deep.include({ kind: 'mcp', ref: { id: 'adapter.mcp.v1', digest: OTHER } });
  });

  it('R11.1 an id not declared, or a digest other than the one declared, is EXECUTION_REFUSED adapter_mismatch; an inspect-only entry names what a start needs', () => {
    const adapters = defineAdapters(declaration);
    for (const ref of [{ id: 'adapter.ftp.v1', digest: DIGEST }, { id: 'adapter.http.v1', digest: OTHER }]) {
      expect(() => adapters.adapter(ref)).to.throw(ExecutionRefusedError).with.property('reason', 'adapter_mismatch');
    }
    const e = refusal(() => adapters.adapter({ id: 'adapter.process.v3', digest: DIGEST }));
    expect(e.issues[0]?.path).to.equal('adapter.process.v3.command');
  });

  it('R10.1 every bad entry is VALIDATION_FAILED naming `<adapter id>.<field>`: unknown field, wrong kind, bad URL, nothing to start or inspect, the runtime environment', () => {
    const cases: [unknown, string][] = [
      [{ a: { kind: 'http', url: 'http://x', honorsIdempotencyKey: false } }, 'a.honorsIdempotencyKey'],
      [{ a: { kind: 'ftp', host: 'h' } }, 'a.kind'],
      [{ a: { kind: 'http', url: 'file:///etc/passwd' } }, 'a.url'],
      [{ a: { kind: 'http' } }, 'a'],
      [{ a: { kind: 'mcp', transport: { kind: 'http', url: 'http://x' } } }, 'a'],
      [{ a: { kind: 'mcp', transport: { kind: 'pipe' }, tool: 't' } }, 'a.transport'],
      [{ a: { kind: 'process', journalDir: '/j', digest: 'md5:1' } }, 'a.digest'],
      [{ a: { kind: 'process', journalDir: '/j', command: 'tool', env: process.env } }, 'a.env'],
      [[], '(root)'],
    ];
    for (const [input, path] of cases) {
      const e = refusal(() => defineAdapters(input as AdapterRegistryDeclaration));
      expect(e.issues.map((i) => i.path), JSON.stringify(input)).to.include(path);
    }
  });

  it('R12.3 the registry is a map: `constructor`, `toString` and a JSON `__proto__` key are names like any other', () => {
    const parsed = JSON.parse('{"__proto__": {"kind": "process", "journalDir": "/j"}, "constructor": {"kind": "http", "statusUrl": "http://127.0.0.1:1/s"}}') as AdapterRegistryDeclaration;
    const adapters = defineAdapters(parsed);
    expect(adapters.ids).to.deep.equal(['__proto__', 'constructor']);
    expect(adapters.entry('__proto__')).to.deep.equal({ kind: 'process', journalDir: '/j' });
    expect(adapters.entry('toString')).to.equal(undefined);
    expect(Object.getPrototypeOf(adapters.declaration)).to.equal(null);
    expect(() => adapters.adapter({ id: 'hasOwnProperty', digest: DIGEST })).to.throw(ExecutionRefusedError);
  });

  it('R11.1 loadAdapters reads the same declaration from a module (its default export, made by defineAdapters or plain) and from JSON', async () => {
    const dir = freshDir('adapter-registry');
    const registryModule = require.resolve('../../infrastructure/adapters/registry');
    const files = {
      cjs: join(dir, 'adapters.cjs'),
      mjs: join(dir, 'adapters.mjs'),
      json: join(dir, 'adapters.json'),
    };
    writeFileSync(files.cjs, `const { defineAdapters } = require(${JSON.stringify(registryModule)});\nmodule.exports = defineAdapters(${JSON.stringify(declaration)});\n`);
    writeFileSync(files.mjs, `export default ${JSON.stringify(declaration)};\n`);
    writeFileSync(files.json, JSON.stringify(declaration));
    for (const file of Object.values(files)) {
      const loaded = await loadAdapters(file);
      expect({ ...loaded.declaration }, file).to.deep.equal(declaration);
    }
    writeFileSync(files.json, '{"a": {"kind": "http", "url": "http://x"}, "a": {"kind": "http", "url": "http://y"}}');
    const duplicate = await loadAdapters(files.json).then(() => undefined, (e: unknown) => e);
    expect(duplicate).to.be.instanceOf(ValidationError);
    const empty = join(dir, 'empty.mjs'); // a new file: a module is loaded once per process
    writeFileSync(empty, 'export const other = 1;\n');
    const none = await loadAdapters(empty).then(() => undefined, (e: unknown) => e);
    expect((none as ValidationError).issues[0]?.message).to.match(/exports no adapters/);
  });
});
