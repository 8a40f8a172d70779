import { canonicalJson, utf8Length, type RunStreamEvent, type StepRunState, type ToolExecutionStartCommand } from '../domain';
import { buildScenario, type Scenario, type ScenarioOptions } from '../domain/scenario';
import { foldEvents, historyOf } from './deciderSpec';

export { buildScenario };
export type { Scenario };

/** A scenario and the real events its lifecycle commands decide (StepRun ready or waiting). */
export const scenarioWithHistory = (options: ScenarioOptions = {}) => {
  const scenario = buildScenario(options);
  const history = historyOf(scenario.lifecycle);
  return { scenario, history };
};

export const stepRunAfter = (events: readonly RunStreamEvent[], stepRunId: string): StepRunState => {
  const s = foldEvents(events).stepRuns[stepRunId];
  if (s === undefined) throw new Error(`no StepRun ${stepRunId} after the given events`);
  return s;
};

/** Deep copy with one value replaced at `path` (created if absent), for single-field drift. */
export const withPath = <T>(value: T, path: readonly (string | number)[], replacement: unknown): T => {
  const copy = structuredClone(value) as Record<string | number, unknown>;
  let target: Record<string | number, unknown> = copy;
  for (const key of path.slice(0, -1)) target = target[key] as Record<string | number, unknown>;
  const last = path[path.length - 1];
  if (last === undefined) return replacement as T;
  target[last] = replacement;
  return copy as T;
};

/** Deep copy with the value at `path` removed. */
export const withoutPath = <T>(value: T, path: readonly string[]): T => {
  const copy = structuredClone(value) as Record<string, unknown>;
  let target: Record<string, unknown> = copy;
  for (const key of path.slice(0, -1)) target = target[key] as Record<string, unknown>;
  delete target[path[path.length - 1] as string];
  return copy as T;
};

export const getPath = (value: unknown, path: readonly (string | number)[]): unknown =>
  path.reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], value);

/** Every leaf path of a JSON value (objects only; the records here have no arrays). */
export const leafPaths = (value: unknown, prefix: string[] = []): string[][] =>
  value !== null && typeof value === 'object'
    ? Object.entries(value as Record<string, unknown>).flatMap(([k, v]) => leafPaths(v, [...prefix, k]))
    : [prefix];

/** Every object key anywhere in a JSON value. */
export const allKeys = (value: unknown): string[] =>
  value !== null && typeof value === 'object'
    ? Object.entries(value as Record<string, unknown>).flatMap(([k, v]) => [k, ...allKeys(v)])
    : [];

const ANNOTATION_VALUE_MAX = 8192;
const ANNOTATION_ENTRIES_MAX = 64;

/**
 * Annotations (plain ASCII text, valid for the codec) that make `measure(annotations)` exactly
 * `target` bytes. `measure` is the canonical size of the record that carries them; ASCII keeps
 * one character = one byte, so each step is exact, and the caller re-asserts the size.
 */
export const annotationsToReach = (
  target: number,
  measure: (annotations: Record<string, string>) => number,
): Record<string, string> => {
  const annotations: Record<string, string> = { 'note.00': '' };
  let last = 'note.00';
  for (;;) {
    const delta = target - measure(annotations);
    if (delta === 0) return annotations;
    const current = annotations[last] ?? '';
    const wanted = current.length + delta;
    if (wanted >= 0 && wanted <= ANNOTATION_VALUE_MAX) {
      annotations[last] = 'a'.repeat(wanted);
      continue;
    }
    if (wanted < 0) throw new Error(`record is already larger than ${target} bytes`);
    annotations[last] = 'a'.repeat(ANNOTATION_VALUE_MAX);
    const next = Object.keys(annotations).length;
    if (next >= ANNOTATION_ENTRIES_MAX) throw new Error(`cannot reach ${target} bytes with ${ANNOTATION_ENTRIES_MAX} annotations`);
    last = `note.${String(next).padStart(2, '0')}`;
    annotations[last] = '';
  }
};

export const canonicalBytes = (value: unknown): number => utf8Length(canonicalJson(value));

/** A command padded with annotations: refused since R10.2, still the filler of the byte-limit specs. */
export const commandWithAnnotations = (
  command: ToolExecutionStartCommand,
  annotations: Record<string, string>,
): ToolExecutionStartCommand => ({ ...command, annotations }) as ToolExecutionStartCommand;
