import * as t from 'io-ts';
import { digestOf, RECORD_TAGS } from './canonical';
import { Digest, Identity, SafeText, oneOf, strictObject } from './codecs';

// R10.2: durable evidence holds no free text. Events are append-only and hash-chained (R9.2),
// so anything written into one is kept forever; a deny-list of secret shapes cannot make free
// text safe there. An outcome therefore carries a reason from a closed set of codes and, when
// a person needs to say more, a ticket reference of a strict shape and the digest of a note.
// The note itself lives in a redactable side record: purging it later leaves every digest,
// and so `verify`, intact.

/** Why an outcome was decided: by an adapter that knows (R11.1) or by an operator (recovery). */
export const OUTCOME_REASON_CODES = [
  'tool_succeeded',
  'tool_failed',
  'tool_timed_out',
  'tool_rejected_input',
  'adapter_error',
  'checked_tool_log',
  'no_trace_of_tool',
  'worker_lost',
  'lease_expired',
  'cancelled_by_operator',
  'duplicate_attempt',
  'other_see_note',
  'tool_killed',
  'inspected_succeeded',
  'inspected_failed',
] as const;
export type OutcomeReasonCode = (typeof OUTCOME_REASON_CODES)[number];
export const OutcomeReasonCode = oneOf(OUTCOME_REASON_CODES);

/** A ticket in the operator's tracker: `OPS-1234`, never a URL or prose. */
export const TICKET_PATTERN = /^[A-Z][A-Z0-9]{1,9}-[1-9][0-9]{0,8}$/;
export const TicketRef = new t.Type<string, string, unknown>(
  'TicketRef',
  (u): u is string => typeof u === 'string' && TICKET_PATTERN.test(u),
  (u, c) =>
    typeof u === 'string' && TICKET_PATTERN.test(u)
      ? t.success(u)
      : t.failure(u, c, `invalid_value|a ticket reference is PROJECT-NUMBER (${TICKET_PATTERN.source}), nothing else`),
  t.identity,
);

export const MAX_NOTE_CHARS = 4096;
/**
 * A person's note: any well-formed text up to MAX_NOTE_CHARS (it may hold what the evidence must
 * not, which is why it lives apart and can be purged). Control characters other than newline
 * and tab are refused so a terminal showing it cannot be driven by it.
 */
export const NoteText = new t.Type<string, string, unknown>(
  'NoteText',
  (u): u is string => typeof u === 'string' && noteProblem(u) === undefined,
  (u, c) => {
    const problem = typeof u === 'string' ? noteProblem(u) : 'expected a string';
    return problem === undefined ? t.success(u as string) : t.failure(u, c, `invalid_value|${problem}`);
  },
  t.identity,
);
const noteProblem = (s: string): string | undefined => {
  if (s.trim().length === 0) return 'a note must say something (omit it instead)';
  if (s.length > MAX_NOTE_CHARS) return `a note is at most ${MAX_NOTE_CHARS} characters`;
  if (/[\u0000-\u0008\u000B-\u001F\u007F]/.test(s)) return 'control characters are not allowed in a note';
  if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s)) return 'note is not well-formed Unicode';
  return undefined;
};

/** The digest an outcome event binds; the note's text never enters the event. */
export const noteDigestOf = (text: string): string => digestOf(RECORD_TAGS.resolutionNote, { note: text });

/** What a new outcome fact says about why: codes and references only (the write path). */
export const resolutionFields = { decidedBy: Identity, reason: OutcomeReasonCode };
export const optionalResolutionFields = { ticket: TicketRef, noteDigest: Digest };
export const Resolution = strictObject('Resolution', resolutionFields, optionalResolutionFields);
export type Resolution = t.TypeOf<typeof Resolution>;

/**
 * Outcome facts as stored: stores written before reason codes hold a free-text `reason`
 * (checked as SafeText when it was written). Read and verified as legacy records, never
 * accepted on the write path (see `assertCodedResolution`).
 */
export const StoredResolution = strictObject('Resolution', { decidedBy: Identity, reason: SafeText }, optionalResolutionFields);
export type StoredResolution = t.TypeOf<typeof StoredResolution>;

export const isCodedReason = (reason: string): reason is OutcomeReasonCode => OutcomeReasonCode.is(reason);
