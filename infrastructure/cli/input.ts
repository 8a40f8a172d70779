import { closeSync, openSync, readSync } from 'node:fs';
import { ValidationError, parseJsonBytes } from '../../domain';

// JSON input is read as bytes and decoded strictly (R10.1: invalid UTF-8, a BOM, duplicate keys
// and lossy numbers are validation errors), from a file or from stdin (`-`). At most
// MAX_INPUT_BYTES + 1 bytes are ever read from any source: `/dev/zero`, a FIFO or a 100 MB file
// is refused after the first mebibyte, with the memory that one buffer takes.

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
    if (size > MAX_INPUT_BYTES) {
      // stop the producer now instead of draining it
      process.stdin.destroy();
      throw tooLarge(record);
    }
    chunks.push(b);
  }
  return Buffer.concat(chunks);
};

/**
 * Reads at most MAX_INPUT_BYTES + 1 bytes of a file (regular, device or FIFO alike). `field`
 * names where the path came from; `inspect` sees the open descriptor first (the keyring's
 * permission check looks at the file it reads, not at a name that may have moved since).
 */
export const readBoundedFile = (source: string, record: string, field = '--command', inspect?: (fd: number) => void): Buffer => {
  const cannotRead = (e: unknown) =>
    new ValidationError(record, [{ path: field, reason: 'invalid_value', message: `cannot read ${source}: ${(e as NodeJS.ErrnoException).code ?? String(e)}` }]);
  let fd: number;
  try {
    fd = openSync(source, 'r');
  } catch (e) {
    throw cannotRead(e);
  }
  try {
    inspect?.(fd);
    const buffer = Buffer.allocUnsafe(MAX_INPUT_BYTES + 1);
    let size = 0;
    for (;;) {
      let n: number;
      try {
        n = readSync(fd, buffer, size, buffer.length - size, null);
      } catch (e) {
        throw cannotRead(e);
      }
      if (n === 0) return buffer.subarray(0, size);
      size += n;
      if (size > MAX_INPUT_BYTES) throw tooLarge(record);
    }
  } finally {
    closeSync(fd);
  }
};

export const readJsonInput = async (source: string, record: string): Promise<unknown> =>
  parseJsonBytes(record, source === '-' ? await readStdin(record) : readBoundedFile(source, record));
