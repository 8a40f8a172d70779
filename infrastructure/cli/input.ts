import { readFileSync } from 'node:fs';
import { ValidationError, parseJsonBytes } from '../../domain';

// JSON input is read as bytes and decoded strictly (invalid UTF-8 is a validation error, never
// replaced with U+FFFD), from a file or from stdin (`-`).

/** Far above any valid command (64 KiB canonical, R1.1) even pretty-printed; a bound on what we buffer. */
export const MAX_INPUT_BYTES = 1024 * 1024;

const tooLarge = (record: string) =>
  new ValidationError(record, [{ path: '(root)', reason: 'too_large', message: `input is larger than ${MAX_INPUT_BYTES} bytes` }]);

const readStdin = async (record: string): Promise<Buffer> => {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    const b = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : (chunk as Buffer);
    size += b.length;
    if (size > MAX_INPUT_BYTES) throw tooLarge(record);
    chunks.push(b);
  }
  return Buffer.concat(chunks);
};

export const readJsonInput = async (source: string, record: string): Promise<unknown> => {
  let bytes: Buffer;
  if (source === '-') {
    bytes = await readStdin(record);
  } else {
    try {
      bytes = readFileSync(source);
    } catch (e) {
      throw new ValidationError(record, [{ path: '--command', reason: 'invalid_value', message: `cannot read ${source}: ${(e as NodeJS.ErrnoException).code ?? String(e)}` }]);
    }
    if (bytes.length > MAX_INPUT_BYTES) throw tooLarge(record);
  }
  return parseJsonBytes(record, bytes);
};
