import type { Readable } from 'node:stream';

/**
 * A tool's stream drained to its end, keeping its first `max` bytes and counting the rest, so a
 * tool that prints without end costs bounded memory and never blocks on a full pipe.
 */
export const boundedCapture = (stream: Readable, max: number): { kept(): Buffer; total(): number } => {
  const chunks: Buffer[] = [];
  let kept = 0;
  let total = 0;
  stream.on('data', (b: Buffer) => {
    total += b.byteLength;
    if (kept < max) {
      const part = b.subarray(0, max - kept);
      chunks.push(part);
      kept += part.byteLength;
    }
  });
  return { kept: () => Buffer.concat(chunks), total: () => total };
};
