import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { invocationPlanDigest } from '../domain';
import { KEY_ID, type Keyring } from './planKeys';

// The seal of one invocation plan (R12.2): AES-256-GCM under a keyring key, with the start id,
// the plan digest the barrier binds, the key id and the preview's digest as associated data,
// so a row moved to another start, re-keyed or given another preview does not open.

/** One stored plan, as every backend reads and writes it (`ciphertext` holds the GCM tag at its end). */
export interface InvocationPlanRow {
  readonly start_id: string;
  readonly plan_digest: string;
  /** null once shredded. */
  readonly key_id: string | null;
  readonly nonce: Uint8Array | null;
  readonly ciphertext: Uint8Array | null;
  /** The redacted preview (canonical JSON): the only view of the input operators get. */
  readonly preview_json: string;
}

const AAD_TAG = 'qinglong/invocation-plan-seal@v1';
const PREVIEW_TAG = 'qinglong/invocation-plan-preview@v1';

const aadOf = (startId: string, planDigest: string, keyId: string, previewJson: string): Buffer =>
  Buffer.from(`${AAD_TAG}\n${startId}\n${planDigest}\n${keyId}\n${createHash('sha256').update(PREVIEW_TAG).update('\u0000').update(previewJson, 'utf8').digest('hex')}`, 'utf8');

/** The row of a tool input (its canonical JSON `json`) sealed under the keyring's current key. */
export const sealedRow = (ring: Keyring, startId: string, planDigest: string, json: string, previewJson: string): InvocationPlanRow => {
  const nonce = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', ring.keys.get(ring.current)!, nonce);
  c.setAAD(aadOf(startId, planDigest, ring.current, previewJson));
  const ciphertext = Buffer.concat([c.update(json, 'utf8'), c.final(), c.getAuthTag()]);
  return { start_id: startId, plan_digest: planDigest, key_id: ring.current, nonce, ciphertext, preview_json: previewJson };
};

/** The plan's input, or the reason it does not open (never a key byte in the text). */
export const openedInput = (
  ring: Keyring | undefined,
  destroyed: ReadonlySet<string>,
  row: InvocationPlanRow,
  planDigest: string,
): { input: unknown } | { shredded: string } | { corrupt: string } => {
  if (row.ciphertext === null || row.key_id === null || row.nonce === null) return { shredded: 'the plan was shredded' };
  if (destroyed.has(row.key_id)) return { shredded: `its key ${row.key_id} was destroyed` };
  const key = ring?.keys.get(row.key_id);
  if (key === undefined) return ring === undefined ? { shredded: 'no plan key is configured' } : { corrupt: `sealed under key id ${KEY_ID.test(row.key_id) ? row.key_id : '(malformed)'}, which the keyring does not hold` };
  if (row.plan_digest !== planDigest) return { corrupt: 'its plan digest is not the one the barrier binds' };
  const bytes = Buffer.from(row.ciphertext);
  if (row.nonce.byteLength !== 12 || bytes.byteLength < 16) return { corrupt: 'its sealed bytes are malformed' };
  let text: string;
  try {
    const d = createDecipheriv('aes-256-gcm', key, Buffer.from(row.nonce));
    d.setAAD(aadOf(row.start_id, row.plan_digest, row.key_id, row.preview_json));
    d.setAuthTag(bytes.subarray(bytes.byteLength - 16));
    text = Buffer.concat([d.update(bytes.subarray(0, bytes.byteLength - 16)), d.final()]).toString('utf8');
  } catch {
    return { corrupt: 'it does not open under its key and binding (bytes, key id, start, digest or preview changed)' };
  }
  const input: unknown = JSON.parse(text);
  if (invocationPlanDigest({ input }) !== planDigest) return { corrupt: 'it opens to an input the barrier does not bind' };
  return { input };
};
