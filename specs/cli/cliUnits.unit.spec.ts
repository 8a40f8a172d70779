import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { CommanderError } from 'commander';
import {
  ConcurrencyExhaustedError,
  CorruptRecordError,
  PreconditionError,
  SemanticConflictError,
  TransactionTimeoutError,
  StoreUnavailableError,
  ValidationError,
  decodeLifecycleCommand,
  decodeStartCommand,
} from '../../domain';
import { formatDuration, parseDuration } from '../../infrastructure/cli/duration';
import { EXIT, exitCodeOf } from '../../infrastructure/cli/exitCodes';
import { openMemoryStartBarrier } from '../../infrastructure/memory/memoryAuthority';

// The CLI's small pure parts, and docs/cli.md's promise that its command JSON is valid.

describe('qinglong-barrier CLI parts', () => {
  it('issue 5: one exit code per error kind, exactly as documented', () => {
    expect(exitCodeOf(new ValidationError('x', [{ path: 'a', reason: 'invalid_value', message: 'm' }]))).to.equal(2);
    expect(exitCodeOf(new PreconditionError('run_not_found', 'm'))).to.equal(3);
    expect(exitCodeOf(new SemanticConflictError('startId', 'v', undefined))).to.equal(4);
    expect(exitCodeOf(new CorruptRecordError('k', 'id', 'p'))).to.equal(5);
    expect(exitCodeOf(new ConcurrencyExhaustedError(4, 'x'))).to.equal(6);
    expect(exitCodeOf(new TransactionTimeoutError('lock', 'x'))).to.equal(6);
    expect(exitCodeOf(new Error('boom'))).to.equal(1);
    expect(exitCodeOf(new CommanderError(1, 'commander.unknownCommand', 'x'))).to.equal(2);
    expect(exitCodeOf(new CommanderError(0, 'commander.helpDisplayed', 'x'))).to.equal(0);
    expect(exitCodeOf(new StoreUnavailableError('disk_full', 'x'))).to.equal(7);
    expect(EXIT).to.deep.equal({ ok: 0, other: 1, validation: 2, precondition: 3, conflict: 4, corrupt: 5, concurrency: 6, unavailable: 7 });
  });

  it('issue 5: --older-than durations: 30s, 5m, 2h, 1d, 1h30m, 500ms; anything else is a validation error', () => {
    expect(parseDuration('30s')).to.equal(30_000);
    expect(parseDuration('5m')).to.equal(300_000);
    expect(parseDuration('2h')).to.equal(7_200_000);
    expect(parseDuration('1d')).to.equal(86_400_000);
    expect(parseDuration('1h30m')).to.equal(5_400_000);
    expect(parseDuration('500ms')).to.equal(500);
    expect(parseDuration('0s')).to.equal(0);
    for (const bad of ['', '5', 'm', '-5m', '5 m', '1.5h', '5min', '5M', '99999999999999999d']) {
      expect(() => parseDuration(bad), bad).to.throw(ValidationError);
    }
    expect(formatDuration(0)).to.equal('0ms');
    expect(formatDuration(61_000)).to.equal('1m1s');
    expect(formatDuration(3_725_000)).to.equal('1h2m5s');
    expect(formatDuration(90_061_000)).to.equal('1d1h1m1s');
  });

  it('issue 5: docs/cli.md carries a complete, valid command JSON (lifecycle and start) that commits as written', async () => {
    const readme = readFileSync(join(__dirname, '..', '..', 'docs', 'cli.md'), 'utf8');
    const at = readme.indexOf('## A complete, valid command');
    expect(at).to.be.greaterThan(0);
    const block = /```json\n([\s\S]*?)\n```/.exec(readme.slice(at))?.[1];
    const example = JSON.parse(block ?? 'null') as { lifecycle: unknown[]; start: unknown };
    expect(example.lifecycle.map((c) => decodeLifecycleCommand(c).type)).to.deep.equal(['CreateRun', 'CreateStepRun', 'MarkStepRunReady']);
    expect(decodeStartCommand(example.start).command.schema).to.equal('qinglong/tool-execution-start-command@v1');
    const authority = await openMemoryStartBarrier();
    for (const c of example.lifecycle) await authority.runs.handle(c as never);
    expect((await authority.barriers.prepare(example.start as never)).outcome).to.equal('created');
  });
});
