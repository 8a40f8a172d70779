import { expect } from 'chai';
import fc from 'fast-check';
import { isRight } from 'fp-ts/lib/Either';
import { Identity } from '../../domain/codecs';
import {
  MAX_BARRIER_BYTES,
  MAX_COMMAND_BYTES,
  canonicalJson,
  decodeBarrierRecord,
  decodeStoredBarrierRecord,
  decodeLifecycleCommand,
  decodeStartCommand,
  parseJsonBytes,
  digestedBarrierOf,
  startToolExecution,
  utf8Length,
  type EventOf,
  type StartBarrierRecord,
  type ToolExecutionStartCommand,
} from '../../domain';
import { given } from '../../testkit/deciderSpec';
import {
  annotationsToReach,
  canonicalBytes,
  commandWithAnnotations,
  getPath,
  leafPaths,
  scenarioWithHistory,
  withPath,
  withoutPath,
} from '../../testkit/domainFixtures';
import { expectIssue, validationErrorOf } from '../support/validation';

const fixture = () => scenarioWithHistory({ prefix: 'codec', requestedAtMs: 1_780_000_000_000 });
const validCommand = (): ToolExecutionStartCommand => fixture().scenario.startCommand();

const decidedBarrier = (command: ToolExecutionStartCommand): StartBarrierRecord => {
  const { history } = fixture();
  const facts = given(...history).when(startToolExecution(command)).decided();
  return (facts[4] as EventOf<'ToolExecutionStartBarrierCommitted'>).data.barrier;
};

/** The exact command the byte-limit specs use: `bytes` of canonical JSON, padded with (refused) annotations. */
const commandOfBytes = (bytes: number): ToolExecutionStartCommand => {
  const base = validCommand();
  const command = commandWithAnnotations(base, annotationsToReach(bytes, (a) => canonicalBytes(commandWithAnnotations(base, a))));
  expect(utf8Length(canonicalJson(command))).to.equal(bytes);
  return command;
};

/** A legacy barrier (R10.2: stores from before may hold annotations) of exactly `bytes`. */
const legacyBarrierOfBytes = (bytes: number): StartBarrierRecord => {
  const bare = decidedBarrier(validCommand());
  // digests and ids have a fixed width, so the barrier grows exactly as its annotations do
  return { ...bare, annotations: annotationsToReach(bytes, (a) => canonicalBytes({ ...bare, annotations: a })) };
};

/** The legacy annotations codec, reached through the stored-barrier decoder (the only place it is still accepted). */
const decodeLegacyAnnotations = (annotations: unknown) => decodeStoredBarrierRecord({ ...decidedBarrier(validCommand()), annotations });

describe('R1 command and barrier records', () => {
  it('R1.1 the size is checked first: a 65,536-byte command is judged on its content (annotations: unknown_field, R10.2), 65,537 is too_large', () => {
    expect(MAX_COMMAND_BYTES).to.equal(65_536);
    const atLimit = validationErrorOf(() => decodeStartCommand(commandOfBytes(65_536)));
    expect(atLimit.issues.map((i) => i.reason)).to.not.include('too_large');
    expectIssue(() => decodeStartCommand(commandOfBytes(65_536)), 'annotations', 'unknown_field');
    const error = expectIssue(() => decodeStartCommand(commandOfBytes(65_537)), '(root)', 'too_large');
    expect(error.record).to.equal('start command');
  });

  it('R1.1 counts UTF-8 bytes, not characters: two-byte text tips a 65,535-character command over', () => {
    const ascii = commandOfBytes(65_535) as ToolExecutionStartCommand & { annotations: Record<string, string> };
    const note = Object.keys(ascii.annotations).at(-1) as string;
    const text = ascii.annotations[note] as string;
    const oneE = commandWithAnnotations(ascii, { ...ascii.annotations, [note]: 'é' + text.slice(1) });
    const twoE = commandWithAnnotations(ascii, { ...ascii.annotations, [note]: 'éé' + text.slice(2) });
    expect(canonicalJson(twoE).length).to.equal(65_535);
    expect(utf8Length(canonicalJson(oneE))).to.equal(65_536);
    expect(utf8Length(canonicalJson(twoE))).to.equal(65_537);
    expectIssue(() => decodeStartCommand(oneE), 'annotations', 'unknown_field');
    expectIssue(() => decodeStartCommand(twoE), '(root)', 'too_large');
  });

  it('R1.2 a stored (legacy) barrier of exactly 16,384 bytes decodes and 16,385 is rejected (decodeStoredBarrierRecord and digestedBarrierOf)', () => {
    expect(MAX_BARRIER_BYTES).to.equal(16_384);
    const barrier = legacyBarrierOfBytes(16_384);
    expect(canonicalBytes(barrier)).to.equal(16_384);
    const sealed = decodeStoredBarrierRecord(JSON.parse(canonicalJson(barrier)));
    expect(utf8Length(sealed.canonical)).to.equal(16_384);
    // R10.2: the write-side codec refuses the legacy field outright
    expectIssue(() => decodeBarrierRecord(JSON.parse(canonicalJson(barrier))), 'annotations', 'unknown_field');

    const annotations = barrier.annotations ?? {};
    const last = Object.keys(annotations).at(-1) as string;
    const over: StartBarrierRecord = { ...barrier, annotations: { ...annotations, [last]: `${annotations[last] ?? ''}a` } };
    expect(canonicalBytes(over)).to.equal(16_385);
    const error = expectIssue(() => decodeStoredBarrierRecord(over), '(root)', 'too_large');
    expect(error.record).to.equal('start barrier');
    expectIssue(() => digestedBarrierOf(over), '(root)', 'too_large');
  });

  it('R1.2 with no free text left in the command (R10.2), the largest valid command (every id 128 characters) decides a barrier within 16 KiB', () => {
    const long = (prefix: string) => `${prefix}-${'x'.repeat(127 - prefix.length)}`;
    const base = validCommand();
    const command: ToolExecutionStartCommand = {
      ...base,
      startId: long('start'),
      toolDefinition: { ...base.toolDefinition },
      handlerBinding: { ...base.handlerBinding, id: long('handler') },
      admission: { ...base.admission, profile: long('profile'), policyFence: { ...base.admission.policyFence, policyId: long('policy') } },
      contracts: { adapter: { ...base.contracts.adapter, id: long('adapter') }, redaction: { ...base.contracts.redaction, id: long('redaction') }, audit: { ...base.contracts.audit, id: long('audit') } },
      evidence: { traceId: long('trace'), spanId: long('span'), auditEventId: long('audit-event'), auditReceiptId: long('receipt') },
      mutation: { ...base.mutation, mutationId: long('mutation'), runEventId: long('run-event') },
    };
    expect(canonicalBytes(decidedBarrier(command))).to.be.below(MAX_BARRIER_BYTES);
  });

  it('R1.4 the command binds exactly the R1.4 fields: removing any one of them is rejected with its path', () => {
    const command = validCommand();
    expect(Object.keys(command).sort()).to.deep.equal(
      ['admission', 'contracts', 'evidence', 'handlerBinding', 'mutation', 'project', 'requestedAtMs', 'schema', 'startId', 'stepRun', 'toolDefinition'].sort(),
    );
    const paths = [...leafPaths(command), ...Object.keys(command).map((k) => [k])];
    for (const path of paths) {
      const error = validationErrorOf(() => decodeStartCommand(withoutPath(command, path)));
      expect(error.issues.map((i) => i.path), path.join('.')).to.include(path.join('.'));
    }
  });

  it('R1.4.1-R1.4.7 each binding has its exact shape in the codec', () => {
    const command = validCommand();
    expect(Object.keys(command.project).sort()).to.deep.equal(['projectId', 'snapshotDigest', 'snapshotId']);
    expect(Object.keys(command.admission).sort()).to.deep.equal(
      ['actionDigest', 'admissionDigest', 'executionClass', 'planDigest', 'policyFence', 'profile', 'timeoutMs'],
    );
    expect(Object.keys(command.contracts).sort()).to.deep.equal(['adapter', 'audit', 'redaction']);
    expect(Object.keys(command.evidence).sort()).to.deep.equal(['auditEventId', 'auditReceiptId', 'spanId', 'traceId']);
    expect(Object.keys(command.mutation).sort()).to.deep.equal(['fromStatus', 'mutationId', 'runEventId', 'toStatus']);
    expect(Object.keys(command.stepRun).sort()).to.deep.equal(['expectedDigest', 'expectedVersion', 'kind', 'runId', 'stepRunId']);
    expectIssue(() => decodeStartCommand(withPath(command, ['admission', 'executionClass'], 'shell')), 'admission.executionClass', 'invalid_value');
    expectIssue(() => decodeStartCommand(withPath(command, ['admission', 'timeoutMs'], 0)), 'admission.timeoutMs', 'invalid_value');
    expectIssue(() => decodeStartCommand(withPath(command, ['admission', 'timeoutMs'], 86_400_001)), 'admission.timeoutMs', 'invalid_value');
    expectIssue(() => decodeStartCommand(withPath(command, ['toolDefinition', 'digest'], 'sha256:ABC')), 'toolDefinition.digest', 'invalid_value');
    expectIssue(() => decodeStartCommand(withPath(command, ['schema'], 'qinglong/tool-execution-start-command@v2')), 'schema', 'invalid_value');
    expectIssue(() => decodeStartCommand(withPath(command, ['stepRun', 'expectedVersion'], 0)), 'stepRun.expectedVersion', 'invalid_value');
    expectIssue(() => decodeStartCommand(withPath(command, ['stepRun', 'expectedVersion'], 1.5)), 'stepRun.expectedVersion', 'invalid_value');
    expectIssue(() => decodeStartCommand(withPath(command, ['requestedAtMs'], -1)), 'requestedAtMs', 'invalid_value');
  });

  it('R1.4.4 the approval is optional from ready and required (exact binding) from waiting_approval', () => {
    const { scenario } = scenarioWithHistory({ prefix: 'codec-approval', withApproval: true });
    const command = scenario.startCommand();
    expect(command.approval).to.deep.equal(scenario.approval);
    expect(() => decodeStartCommand(command)).not.to.throw();
    expectIssue(() => decodeStartCommand(withoutPath(command, ['approval'])), 'approval', 'invalid_value');
    expectIssue(() => decodeStartCommand(withoutPath(command, ['approval', 'dispatchId'])), 'approval.dispatchId', 'invalid_value');
    expectIssue(() => decodeStartCommand(withPath(command, ['approval', 'note'], 'x')), 'approval.note', 'unknown_field');
  });

  it('R1.4.5 the command names a Tool StepRun: any other kind is rejected', () => {
    expectIssue(() => decodeStartCommand(withPath(validCommand(), ['stepRun', 'kind'], 'llm')), 'stepRun.kind', 'invalid_value');
  });

  it('R1.4.7 the mutation moves ready or waiting_approval to running, nothing else', () => {
    const command = validCommand();
    for (const from of ['created', 'running', 'lost', 'completed', 'failed']) {
      expectIssue(() => decodeStartCommand(withPath(command, ['mutation', 'fromStatus'], from)), 'mutation.fromStatus', 'invalid_value');
    }
    for (const to of ['ready', 'completed', 'waiting_approval']) {
      expectIssue(() => decodeStartCommand(withPath(command, ['mutation', 'toStatus'], to)), 'mutation.toStatus', 'invalid_value');
    }
  });
});

describe('R1.5 nothing forbidden can enter a command or a barrier', () => {
  it('R1.5 unknown fields are rejected with their path, never stripped', () => {
    const command = validCommand();
    expectIssue(() => decodeStartCommand({ ...command, colour: 'blue' }), 'colour', 'unknown_field');
    expectIssue(() => decodeStartCommand(withPath(command, ['admission', 'colour'], 'blue')), 'admission.colour', 'unknown_field');
    expectIssue(() => decodeStartCommand(withPath(command, ['contracts', 'adapter', 'version'], 3)), 'contracts.adapter.version', 'unknown_field');
    expectIssue(
      () => decodeStartCommand(withPath(command, ['admission', 'policyFence', 'extra'], true)),
      'admission.policyFence.extra',
      'unknown_field',
    );
    // every unknown field is named, not only the first
    const error = validationErrorOf(() => decodeStartCommand({ ...command, colour: 'blue', shade: 'dark' }));
    expect(error.issues.map((i) => i.path)).to.include.members(['colour', 'shade']);
    // `__proto__` from parsed JSON is an own key like any other: rejected, not merged
    expectIssue(() => decodeStartCommand(JSON.parse(`{"__proto__":{"x":1},${canonicalJson(command).slice(1)}`)), '__proto__', 'unknown_field');
  });

  it('R1.5 fields that would carry input, secrets, handlers, module paths, URLs, an execute seam, output or exceptions are forbidden_field', () => {
    const command = validCommand();
    const names = [
      'input', 'toolInput', 'args', 'params', 'payload', 'secret', 'clientSecret', 'password', 'token', 'credentials', 'apiKey',
      'handler', 'handlerFn', 'function', 'callback', 'execute', 'exec', 'seam', 'module', 'modulePath', 'path', 'url',
      'callbackUrl', 'uri', 'endpoint', 'href', 'output', 'result', 'error', 'exception', 'stack',
    ];
    for (const name of names) {
      expectIssue(() => decodeStartCommand({ ...command, [name]: 'x' }), name, 'forbidden_field');
      expectIssue(() => decodeStartCommand(withPath(command, ['admission', name], 'x')), `admission.${name}`, 'forbidden_field');
      expectIssue(() => decodeStartCommand(withPath(command, ['contracts', 'adapter', name], 'x')), `contracts.adapter.${name}`, 'forbidden_field');
    }
  });

  it('R1.5 annotation keys that name forbidden content are forbidden_field', () => {
    for (const key of ['secret', 'input', 'output', 'error', 'handler', 'url', 'module.path']) {
      expectIssue(() => decodeLegacyAnnotations({ [key]: 'x' }), `annotations.${key}`, 'forbidden_field');
    }
    expectIssue(() => decodeLegacyAnnotations({ 'Bad Key': 'x' }), 'annotations.Bad Key', 'invalid_value');
  });

  it('R1.5 functions, raw exceptions and class instances are rejected wherever they appear', () => {
    const command = validCommand();
    class Handler {
      run(): void {}
    }
    const values: [string, unknown][] = [
      ['function', () => 1],
      ['async function', async () => 1],
      ['Error', new Error('boom')],
      ['TypeError', new TypeError('boom')],
      ['class instance', new Handler()],
      ['Date', new Date(0)],
      ['Map', new Map()],
      ['RegExp', /x/],
      ['Buffer', Buffer.from('x')],
      ['boxed string', Object('x')],
    ];
    for (const [what, value] of values) {
      const asAnnotation = validationErrorOf(() => decodeLegacyAnnotations({ note: value }));
      expect(asAnnotation.issues[0]?.path, what).to.equal('annotations.note');
      expect(asAnnotation.issues[0]?.reason, what).to.equal('forbidden_value');
      const asField = validationErrorOf(() => decodeStartCommand(withPath(command, ['startId'], value)));
      expect(asField.issues[0]?.path, what).to.equal('startId');
      expect(asField.issues[0]?.reason, what).to.equal('forbidden_value');
      expectIssue(() => decodeStartCommand({ ...command, execute: value }), 'execute', 'forbidden_value');
    }
    expectIssue(() => decodeStartCommand(Object.assign(Object.create({ inherited: 1 }), command)), '(root)', 'forbidden_value');
  });

  it('R1.5 non-JSON values are rejected: lone surrogates, NaN, infinities, undefined, bigint, symbol', () => {
    const command = validCommand();
    expectIssue(() => decodeLegacyAnnotations({ note: 'a\uD800b' }), 'annotations.note', 'invalid_value');
    expectIssue(() => decodeLegacyAnnotations({ note: '\uDC00' }), 'annotations.note', 'invalid_value');
    expectIssue(() => decodeLegacyAnnotations({ ['n\uD800']: 'x' }), 'annotations.n\uD800', 'invalid_value');
    expect(() => decodeLegacyAnnotations({ note: 'ok \u{1F600}' })).not.to.throw();
    for (const n of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expectIssue(() => decodeStartCommand({ ...command, requestedAtMs: n }), 'requestedAtMs', 'invalid_value');
    }
    expectIssue(() => decodeStartCommand({ ...command, requestedAtMs: undefined }), 'requestedAtMs', 'invalid_value');
    expectIssue(() => decodeStartCommand({ ...command, requestedAtMs: 1n }), 'requestedAtMs', 'invalid_value');
    expectIssue(() => decodeStartCommand({ ...command, requestedAtMs: Symbol('t') }), 'requestedAtMs', 'invalid_value');
  });

  it('R1.5 nesting deeper than 16 levels is rejected as too_deep', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 20; i += 1) deep = { d: deep };
    const error = validationErrorOf(() => decodeStartCommand({ ...validCommand(), extra: deep }));
    expect(error.issues.map((i) => i.reason)).to.include('too_deep');
    let deepArray: unknown = 1;
    for (let i = 0; i < 40; i += 1) deepArray = [deepArray];
    expect(validationErrorOf(() => decodeStartCommand(deepArray)).reason).to.equal('too_deep');
  });

  const IDENTITY_PATHS = [
    ['startId'],
    ['project', 'projectId'],
    ['toolDefinition', 'id'],
    ['handlerBinding', 'id'],
    ['contracts', 'adapter', 'id'],
    ['stepRun', 'runId'],
    ['evidence', 'traceId'],
    ['mutation', 'mutationId'],
  ];

  it('R1.5 identity fields reject URL-like values', () => {
    const command = validCommand();
    for (const value of ['https://evil.example/x', 'http:x', 'file:handler', 'javascript:alert', 'data:x', 'urn:tool', 'mailto:a', 'www.example.com', 'a://b']) {
      for (const path of IDENTITY_PATHS) expectIssue(() => decodeStartCommand(withPath(command, path, value)), path.join('.'), 'forbidden_value');
    }
  });

  it('R1.5 identity fields reject path-like values and module file names', () => {
    const command = validCommand();
    const values = [
      '../handler', 'a/b', 'a\\b', '/usr/bin/tool', '~root', 'C:\\tools', '.', '..',
      'handler.js', 'index.ts', 'plugin.mjs', 'lib.cjs', 'types.mts', 'addon.node', 'run.sh', 'tool.py', 'tool.rb',
      'config.json', 'x.wasm', 'tool.exe', 'lib.dll', 'lib.so', 'lib.dylib', 'HANDLER.JS',
    ];
    for (const value of values) {
      for (const path of IDENTITY_PATHS) expectIssue(() => decodeStartCommand(withPath(command, path, value)), path.join('.'), 'forbidden_value');
    }
  });

  it('R1.5 identity fields reject secret-like values and anything outside [A-Za-z0-9._-]{1,128}', () => {
    const command = validCommand();
    expectIssue(() => decodeStartCommand(withPath(command, ['startId'], 'AKIAIOSFODNN7EXAMPLE')), 'startId', 'forbidden_value');
    expectIssue(() => decodeStartCommand(withPath(command, ['startId'], 'sk-abcdefghijklmnop1234')), 'startId', 'forbidden_value');
    for (const value of ['', 'a'.repeat(129), 'has space', '-leading', '_leading', 'ümlaut', 'semi;colon']) {
      expectIssue(() => decodeStartCommand(withPath(command, ['startId'], value)), 'startId', 'invalid_value');
    }
    for (const value of ['adapter.process.v3', 'tool-def_1', 'A', 'a'.repeat(128), 'v1.2.3']) {
      expect(() => decodeStartCommand(withPath(command, ['startId'], value)), value).not.to.throw();
    }
  });

  it('R1.5 annotation text never carries URLs, paths, secrets, code or raw exceptions', () => {
    const forbidden = [
      'see https://example.com',
      'open file:x',
      'read /etc/passwd/',
      'at ./handler',
      'in ~/secrets',
      'C:\\tools\\x',
      'password=hunter2',
      '-----BEGIN PRIVATE KEY-----',
      'ghp_abcdefghijklmnopqrstuvwx',
      'x => x',
      'function run() {}',
      'require("fs")',
      'TypeError: boom',
      'oops\n    at run (h.js:1:2)',
    ];
    for (const text of forbidden) expectIssue(() => decodeLegacyAnnotations({ note: text }), 'annotations.note', 'forbidden_value');
    expectIssue(() => decodeLegacyAnnotations({ note: 'bell\u0007' }), 'annotations.note', 'invalid_value');
    expectIssue(() => decodeLegacyAnnotations({ note: 'a'.repeat(8193) }), 'annotations.note', 'invalid_value');
    expect(() => decodeLegacyAnnotations({ note: 'a'.repeat(8192) })).not.to.throw();
    const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`note.${i}`, 'x']));
    expectIssue(() => decodeLegacyAnnotations(many), 'annotations', 'invalid_value');
    expect(() => decodeLegacyAnnotations(Object.fromEntries(Object.entries(many).slice(0, 64)))).not.to.throw();
    expect(() => decodeLegacyAnnotations({ note: 'Operator approved after review; ticket OPS-1234.' })).not.to.throw();
  });

  it('R1.5 the barrier record rejects unknown and forbidden fields with their path', () => {
    const barrier = decidedBarrier(validCommand());
    expect(() => decodeBarrierRecord(barrier)).not.to.throw();
    expectIssue(() => decodeBarrierRecord({ ...barrier, committedAtMs: 1 }), 'committedAtMs', 'unknown_field');
    expectIssue(() => decodeBarrierRecord({ ...barrier, output: 'x' }), 'output', 'forbidden_field');
    expectIssue(() => decodeBarrierRecord(withPath(barrier, ['attempt', 'input'], 'x')), 'attempt.input', 'forbidden_field');
    expectIssue(() => decodeBarrierRecord(withPath(barrier, ['trace', 'url'], 'x')), 'trace.url', 'forbidden_field');
    expectIssue(() => decodeBarrierRecord(withPath(barrier, ['handlerBinding', 'id'], 'handler.js')), 'handlerBinding.id', 'forbidden_value');
    expectIssue(() => decodeBarrierRecord(withPath(barrier, ['schema'], 'qinglong/tool-execution-start-command@v1')), 'schema', 'invalid_value');
    for (const path of leafPaths(barrier)) {
      const error = validationErrorOf(() => decodeBarrierRecord(withoutPath(barrier, path)));
      expect(error.issues.map((i) => i.path), path.join('.')).to.include(path.join('.'));
    }
    expect(getPath(barrier, ['schema'])).to.equal('qinglong/tool-execution-start-barrier@v1');
  });

  it('R1.5 the JSON boundary rejects invalid UTF-8 and non-JSON text as invalid_json', () => {
    expectIssue(() => parseJsonBytes('start command', new Uint8Array([0x7b, 0xff, 0x7d])), '(root)', 'invalid_json');
    expectIssue(() => parseJsonBytes('start command', '{"a":'), '(root)', 'invalid_json');
    const command = validCommand();
    expect(decodeStartCommand(parseJsonBytes('start command', Buffer.from(canonicalJson(command), 'utf8'))).command).to.deep.equal(command);
  });

  it('R1.5 lifecycle commands are decoded as strictly: unknown and forbidden fields rejected', () => {
    const ok = { type: 'MarkStepRunReady', data: { runId: 'run-1', stepRunId: 'step-1', requestedAtMs: 1 } };
    expect(decodeLifecycleCommand(ok)).to.deep.equal(ok);
    expectIssue(() => decodeLifecycleCommand({ ...ok, data: { ...ok.data, colour: 'x' } }), 'colour', 'unknown_field');
    expectIssue(() => decodeLifecycleCommand({ ...ok, data: { ...ok.data, handler: 'x' } }), 'handler', 'forbidden_field');
    expectIssue(() => decodeLifecycleCommand({ ...ok, meta: 1 }), 'meta', 'unknown_field');
    expectIssue(() => decodeLifecycleCommand({ ...ok, type: 'DeleteRun' }), 'type', 'invalid_value');
  });
});

describe('R1.5 Identity.is gives the verdict of its full check', () => {
  it('R1.5 on identity-like text, URLs, paths, module files and secret shapes, the short is() and validate agree', () => {
    const piece = fc.constantFrom('a', 'Z', '0', '9', '.', '_', '-', ':', '/', '\\', '~', ' ', 'www.', 'WWW.', '.js', '.JSON', '.wasm', '.so', 'AKIA', 'ABCDEFGHIJKLMNOP', 'sk-', 'ghp_', 'xoxb-', 'eyJ', '.eyJ', '-----BEGIN', 'password', '=', 'http', '//', 'é');
    const text = fc.array(piece, { maxLength: 12 }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(fc.oneof(text, fc.string({ maxLength: 140 }), fc.constant('a'.repeat(128)), fc.constant('a'.repeat(129))), (s) => {
        expect(Identity.is(s), s).to.equal(isRight(Identity.validate(s, [])));
      }),
      { numRuns: 20_000 },
    );
  });
});
