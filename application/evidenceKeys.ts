import { createHmac, timingSafeEqual } from 'node:crypto';
import { CorruptRecordError } from '../domain';
import type { StoredBarrier } from '../domain/records';

// Keyed evidence (R9.4). With a deployment keyring, every new barrier is sealed with
// HMAC-SHA-256 over its digests under the active key, and the key id is stored beside the
// MAC; every verified read recomputes it under the key that id names (the active key or a
// verify-only one kept after a rotation). Whoever can INSERT rows but does not hold the key
// cannot mint a barrier that reads. Without a keyring nothing is sealed or checked.
//
// The secret bytes live only in this closure: never in a row, an error message, a log line,
// or the keyring object's enumerable properties (JSON.stringify and util.inspect see ids only).

export interface EvidenceKey {
  /** Stored with each MAC; letters, digits, '.', '_' and '-', at most 64. Not secret. */
  readonly id: string;
  /** At least 32 bytes of key material. Secret. */
  readonly secret: Uint8Array;
}

export interface EvidenceKeyringOptions {
  /** The key that seals new barriers (and verifies them). */
  readonly active: EvidenceKey;
  /** Older keys, accepted for reading only (a rotation keeps them until no record needs them). */
  readonly verifyOnly?: readonly EvidenceKey[];
}

/** One stored MAC row, as the backends read it. */
export interface EvidenceMacRow {
  readonly key_id: string;
  readonly mac: string;
}

/** What a stored MAC is, checked against what it should bind: the key id alone decides `unknown_key`. */
export type MacCheck = 'valid' | 'unknown_key' | 'mismatch';

export interface EvidenceKeyring {
  readonly activeKeyId: string;
  readonly keyIds: readonly string[];
  /** A MAC under the active key over a tagged input string (the Run stream's seals, eventSeals.ts). */
  macOf(input: string): EvidenceMacRow;
  /** Checks a stored MAC over the same input under the key its id names, in constant time. */
  check(row: EvidenceMacRow, input: string): MacCheck;
  /** The MAC row of a new barrier, under the active key. */
  seal(barrier: StoredBarrier): EvidenceMacRow;
  /** The MAC check of the read paths: the barrier, or CorruptRecordError naming only key ids. */
  verify(barrier: StoredBarrier, rows: readonly EvidenceMacRow[]): StoredBarrier;
}

const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
/** Whether `id` is a key id: letters, digits, '.', '_' and '-', at most 64. */
export const isKeyId = (id: string): boolean => KEY_ID.test(id);
/** A stored key id as an error may quote it: a stored value of any other form is not echoed. */
export const printableKeyId = (id: string): string => (KEY_ID.test(id) ? id : 'malformed');
export const MIN_KEY_BYTES = 32;
const MAC_TAG = 'qinglong/start-barrier-evidence-mac@v1';

/** What the MAC binds: the record kind and version, the start, and the barrier digest (which binds every fact). */
const macInput = (b: StoredBarrier): string => `${MAC_TAG}\n${b.record.startId}\n${b.barrierDigest}`;

export const createEvidenceKeyring = (options: EvidenceKeyringOptions): EvidenceKeyring => {
  const secrets = new Map<string, Buffer>();
  for (const key of [options.active, ...(options.verifyOnly ?? [])]) {
    if (typeof key?.id !== 'string' || !KEY_ID.test(key.id)) throw new RangeError('evidence key id must be 1..64 letters, digits, ".", "_" or "-"');
    if (secrets.has(key.id)) throw new RangeError(`evidence key id ${key.id} is given twice`);
    if (!(key.secret instanceof Uint8Array) || key.secret.byteLength < MIN_KEY_BYTES) {
      throw new RangeError(`evidence key ${key.id} must be at least ${MIN_KEY_BYTES} bytes`);
    }
    secrets.set(key.id, Buffer.from(key.secret)); // a copy: the caller may wipe theirs
  }
  const activeKeyId = options.active.id;
  const macUnder = (keyId: string, input: string): Buffer => createHmac('sha256', secrets.get(keyId)!).update(input, 'utf8').digest();
  const check = (row: EvidenceMacRow, input: string): MacCheck => {
    if (!secrets.has(row.key_id)) return 'unknown_key';
    const stored = /^[0-9a-f]{64}$/.test(row.mac) ? Buffer.from(row.mac, 'hex') : Buffer.alloc(0);
    const expected = macUnder(row.key_id, input);
    return stored.length === expected.length && timingSafeEqual(stored, expected) ? 'valid' : 'mismatch';
  };
  const keyring: EvidenceKeyring = {
    activeKeyId,
    keyIds: [...secrets.keys()],
    macOf: (input) => ({ key_id: activeKeyId, mac: macUnder(activeKeyId, input).toString('hex') }),
    check,
    seal: (b) => ({ key_id: activeKeyId, mac: macUnder(activeKeyId, macInput(b)).toString('hex') }),
    verify: (b, rows) => {
      const startId = b.record.startId;
      if (rows.length === 0) throw new CorruptRecordError('start barrier', startId, 'it carries no evidence MAC, and this store requires keyed evidence (R9.4)');
      if (rows.length > 1) throw new CorruptRecordError('start barrier', startId, `${rows.length} evidence MACs for one barrier`);
      const row = rows[0]!;
      const result = check(row, macInput(b));
      if (result === 'unknown_key') throw new CorruptRecordError('start barrier', startId, `its evidence MAC names a key id this keyring does not hold (${printableKeyId(row.key_id)})`);
      if (result === 'mismatch') throw new CorruptRecordError('start barrier', startId, `its evidence MAC does not verify under key ${row.key_id} (R9.4)`);
      return b;
    },
  };
  Object.defineProperty(keyring, 'toJSON', { value: () => ({ activeKeyId, keyIds: keyring.keyIds }), enumerable: false });
  Object.defineProperty(keyring, Symbol.for('nodejs.util.inspect.custom'), { value: () => `EvidenceKeyring { active: ${activeKeyId}, keys: ${keyring.keyIds.join(', ')} }`, enumerable: false });
  return keyring;
};
