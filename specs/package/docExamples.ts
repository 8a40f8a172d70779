import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

// The examples of the user documents (README.md and docs/*.md), as the packed-package spec
// (consumer.soak.spec.ts) type-checks and runs them.

/**
 * The fenced blocks marked ```ts example=NAME (or ```js example=NAME.mjs, run as written by
 * Node, or ```sql example=NAME), as NAME -> source.
 * `check=types` after the name marks an example that needs a live tool or secret: it is
 * type-checked, never run. Every other TypeScript example is run too.
 */
export interface Example {
  readonly source: string;
  readonly run: boolean;
  readonly from: string;
}

export const readmeExamples = (text: string, from = 'README.md'): Map<string, Example> => {
  const blocks = new Map<string, Example>();
  for (const m of text.matchAll(/^```(?:ts|js|sql) example=(\S+)( check=types)?\n([\s\S]*?)^```$/gm)) {
    blocks.set(m[1]!, { source: m[3]!, run: m[2] === undefined, from });
  }
  return blocks;
};

/** The TypeScript fences that are not checked examples (every one must be). */
export const uncheckedSnippets = (text: string): number => [...text.matchAll(/^```(?:ts|typescript|js|javascript|mts|cts)\s*$/gm)].length;

/** The user documents: README.md and docs/*.md. */
export const userDocs = (root: string): { readonly name: string; readonly text: string }[] => [
  { name: 'README.md', text: readFileSync(join(root, 'README.md'), 'utf8') },
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => ({ name: `docs/${f}`, text: readFileSync(join(root, 'docs', f), 'utf8') })),
];

/** Every example of the user documents; a name used twice is an error (each is one file). */
export const allExamples = (root: string): Map<string, Example> => {
  const all = new Map<string, Example>();
  for (const doc of userDocs(root)) {
    for (const [name, example] of readmeExamples(doc.text, doc.name)) {
      const seen = all.get(name);
      if (seen !== undefined) throw new Error(`example ${name} is in both ${seen.from} and ${doc.name}`);
      all.set(name, example);
    }
  }
  return all;
};

