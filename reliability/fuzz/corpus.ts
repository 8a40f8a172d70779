// Values R1.5 forbids, as they turn up in real integrations, and an independent detector the
// fuzz uses to check that no accepted command carries one (it does not reuse the codec's own
// regular expressions: a second opinion, not the same one twice).

export const URLS = [
  'https://api.example.com/v1/run',
  'http://127.0.0.1:8080/',
  'file:///etc/passwd',
  'javascript:alert(1)',
  'data:text/plain;base64,aGk=',
  'mailto:ops@example.com',
  'ftp://files.example.com/x',
  'wss://ws.example.com/socket',
  'www.example.com',
  '//cdn.example.com/lib.js',
  's3://bucket/key',
];
export const MODULE_PATHS = [
  './handler.js',
  '../lib/tool.mjs',
  '/usr/lib/node_modules/tool/index.js',
  'node_modules/tool/dist/index.cjs',
  'C:\\tools\\run.exe',
  '~/tool.sh',
  'tool.ts',
  'plugin.node',
  'lib/x.wasm',
  '.',
  '..',
];
export const SECRETS = [
  'AKIAIOSFODNN7EXAMPLE',
  'sk-proj-abcdefghijklmnop1234567890',
  'ghp_abcdefghijklmnopqrstuvwxyz0123456789',
  'xoxb-123456789012-abcdef',
  'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig',
  '-----BEGIN PRIVATE KEY-----',
  'password=hunter2',
  'api_key: 0123456789abcdef',
  'token=abc123',
];
export const CODE = ['function () { return 1 }', '() => process.exit(1)', 'require("child_process")', 'import("fs")', 'eval("1")', 'function*gen(){}'];
export const RAW_ERRORS = [
  'TypeError: Cannot read properties of undefined\n    at run (/srv/app/tool.js:10:5)',
  'Error: ECONNREFUSED\n    at TCPConnectWrap.afterConnect (node:net:1555:16)',
  '    at Object.<anonymous> (/app/index.js:1:1)',
  'RangeError: Maximum call stack size exceeded',
];

export const FORBIDDEN_TEXT: readonly string[] = [...URLS, ...MODULE_PATHS, ...SECRETS, ...CODE, ...RAW_ERRORS];
/** Forbidden as an identity, but free text cannot tell them from prose (a file name, a dot). */
export const IDENTITY_ONLY: ReadonlySet<string> = new Set(['tool.ts', 'plugin.node', '.', '..']);
export const FORBIDDEN_IN_TEXT: readonly string[] = FORBIDDEN_TEXT.filter((s) => !IDENTITY_ONLY.has(s));

class Handler {
  run(): void {}
}

/** JavaScript values that are not JSON data at all: each must be refused wherever it appears. */
export const NOT_JSON: readonly (() => unknown)[] = [
  () => () => 1,
  () => async function handler() {},
  () => new Error('raw exception'),
  () => new TypeError('raw'),
  () => new Date(0),
  () => new Map([['a', 1]]),
  () => new Set([1]),
  () => new Handler(),
  () => Symbol('s'),
  () => 10n,
  () => undefined,
  () => Number.NaN,
  () => Number.POSITIVE_INFINITY,
  () => Number.NEGATIVE_INFINITY,
  () => new Uint8Array([1, 2]),
  () => Buffer.from('x'),
  () => new String('boxed'),
  () => new Number(1),
  () => /regex/,
  () => Promise.resolve(1),
  () => new Proxy({}, {}),
  () => Object.defineProperty({}, 'x', { enumerable: true, get: () => 'getter' }),
];

/**
 * The harness's own view of "looks like something R1.5 forbids" (not the codec's regexes). For
 * free text (`text`), a bare file name or a slash in prose is not a path; a separator next to a
 * code file name, or node_modules, is.
 */
export const looksForbidden = (s: string, text = false): string | undefined => {
  if (s.includes('://') || /(?:^|\s)(?:https?|file|data|javascript|mailto|ftp|wss?|s3):/i.test(s) || /(?:^|\s)www\./i.test(s) || /(?:^|\s)\/\/\w/.test(s)) return 'url';
  if (text) {
    if (/node_modules|\S[/\\]\S*\.(?:m?js|cjs|ts|mts|cts|node|sh|py|exe|dll|so|dylib|wasm)\b|(?:^|\s)(?:\.{1,2}|~)?[/\\]\w/.test(s)) return 'path';
  } else if (/[/\\]/.test(s) || /^~/.test(s) || /^\.\.?$/.test(s) || /\.(?:m?js|cjs|ts|mts|cts|node|sh|py|exe|dll|so|dylib|wasm)$/i.test(s)) return 'path';
  if (/AKIA[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-|-----BEGIN|eyJ[A-Za-z0-9_-]+\.eyJ/.test(s)) return 'secret';
  if (/(?:password|passwd|secret|token|api[_-]?key)\s*[:=]/i.test(s)) return 'secret';
  if (/=>|\bfunction\b\s*\*?\s*\w*\s*\(|\brequire\s*\(|\bimport\s*\(|\beval\s*\(/.test(s)) return 'code';
  if (/\n\s+at |^\s*at .+:\d+:\d+\)|\b[A-Z][A-Za-z]*Error: /.test(s)) return 'exception';
  return undefined;
};
