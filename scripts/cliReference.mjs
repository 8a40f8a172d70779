#!/usr/bin/env node
// `npm run docs:cli` (after `npm run build`): writes the CLI reference into docs/cli.md, between
// its markers, from the built CLI's own `--help` (the program's and each command's), so the
// reference says what the CLI says. `--check` writes nothing and exits 1 when docs/cli.md is not
// what it would write (specs/cli/cliReference.int.spec.ts runs it).
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'dist', 'infrastructure', 'cli', 'main.js');
const DOC = join(ROOT, 'docs', 'cli.md');
const BEGIN = '<!-- cli-reference:begin (written by npm run docs:cli from --help; do not edit) -->';
const END = '<!-- cli-reference:end -->';

const help = (args) => {
  // Not a terminal: commander lays the help out for 80 columns, the same on every machine.
  const r = spawnSync(process.execPath, [CLI, ...args, '--help'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`qinglong-barrier ${[...args, '--help'].join(' ')} exited ${r.status}: ${r.stderr} (run npm run build first)`);
  return r.stdout.trimEnd();
};

/** The command names the program's help lists, in its order. */
const commandsOf = (programHelp) => {
  const section = programHelp.split('\nCommands:\n')[1] ?? '';
  return section
    .split('\n')
    .map((line) => /^ {2}([a-z][a-z-]*)\b/.exec(line)?.[1])
    .filter((name) => name !== undefined && name !== 'help');
};

const fence = (text) => ['```text', text, '```'];

export const reference = () => {
  const top = help([]);
  return [
    '### qinglong-barrier --help',
    '',
    ...fence(top),
    ...commandsOf(top).flatMap((name) => ['', `### qinglong-barrier ${name} --help`, '', ...fence(help([name]))]),
  ].join('\n');
};

export const withReference = (doc, body) => {
  const from = doc.indexOf(BEGIN);
  const to = doc.indexOf(END);
  if (from < 0 || to < from) throw new Error(`docs/cli.md: the markers ${BEGIN} ... ${END} are missing`);
  return `${doc.slice(0, from + BEGIN.length)}\n${body}\n${doc.slice(to)}`;
};

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const doc = readFileSync(DOC, 'utf8');
  const next = withReference(doc, reference());
  if (process.argv.includes('--check')) {
    if (next !== doc) {
      console.error('docs/cli.md is not what the CLI says: run npm run build && npm run docs:cli, and commit docs/cli.md');
      process.exitCode = 1;
    }
  } else if (next !== doc) {
    writeFileSync(DOC, next);
    console.log('docs/cli.md: reference written');
  } else {
    console.log('docs/cli.md: reference already current');
  }
}
