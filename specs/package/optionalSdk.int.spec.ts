import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'chai';

// Only what a user needs is loaded: the MCP SDK is an optional peer, loaded by the MCP adapter
// alone. A child process runs with the SDK made unresolvable (as on an install without it).

const ROOT = join(__dirname, '..', '..');
const HIDE_SDK = `
const Module = require('module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request.startsWith('@modelcontextprotocol/sdk')) {
    const e = new Error("Cannot find module '" + request + "'");
    e.code = 'MODULE_NOT_FOUND';
    throw e;
  }
  return resolve.call(this, request, ...rest);
};`;

const run = (body: string) =>
  spawnSync(process.execPath, ['--require', 'tsx/cjs', '-e', `${HIDE_SDK}\n${body}`], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });

describe('the MCP SDK is an optional peer, loaded by the MCP adapter alone', function () {
  this.timeout(120_000);

  it('the adapters subpath, the process and HTTP adapters and the CLI load without it', () => {
    const r = run(`
      const adapters = require('./infrastructure/adapters');
      require('./infrastructure/cli/adapterRegistry');
      const loaded = Object.keys(require.cache).filter((k) => k.includes('@modelcontextprotocol'));
      console.log(JSON.stringify({ process: typeof adapters.processAdapter, http: typeof adapters.httpAdapter, loaded }));
    `);
    expect(r.status, r.stderr).to.equal(0);
    expect(JSON.parse(r.stdout.trim())).to.deep.equal({ process: 'function', http: 'function', loaded: [] });
  });

  it('making an MCP adapter without it is DRIVER_MISSING naming the package to install', () => {
    const r = run(`
      const { mcpAdapter } = require('./infrastructure/adapters');
      try {
        mcpAdapter({ ref: { id: 'mcp-tool', digest: 'sha256:' + '0'.repeat(64) }, transport: { kind: 'http', url: 'http://127.0.0.1:1/mcp' }, tool: 'act' });
        console.log('made');
      } catch (e) {
        console.log(JSON.stringify({ code: e.code, driver: e.driver, subpath: e.subpath, message: e.message }));
      }
    `);
    expect(r.status, r.stderr).to.equal(0);
    const e = JSON.parse(r.stdout.trim()) as { code: string; driver: string; subpath: string; message: string };
    expect(e).to.include({ code: 'DRIVER_MISSING', driver: '@modelcontextprotocol/sdk', subpath: '/adapters' });
    expect(e.message).to.include('npm install @modelcontextprotocol/sdk');
  });
});
