// What the edge section's parent and its child processes share.

export type EdgeSubject = 'product' | 'bare';

/** A directory no one has: the child fails to open a file in it, and strace logs the attempt as a mark. */
export const EDGE_MARK = '/nonexistent-start-barrier-edge-mark';

/** The Run prefix of the i-th start: the parent seeds these Runs ready, the child starts them. */
export const edgePrefix = (i: number): string => `edge${i}-`;

export interface EdgeChildResult {
  readonly subject: EdgeSubject;
  readonly starts: number;
  readonly idleMs: number;
  readonly beforeOpen: { readonly rssMb: number; readonly threads: number; readonly handles: number; readonly timers: number };
  readonly afterOpen: { readonly rssMb: number; readonly threads: number; readonly handles: number; readonly timers: number; readonly files: number };
  readonly afterStarts: { readonly rssMb: number; readonly threads: number; readonly handles: number; readonly timers: number; readonly files: number };
  readonly afterIdle: { readonly rssMb: number; readonly threads: number };
  /** RSS sampled after each batch of starts. */
  readonly maxRssMb: number;
  /** process.cpuUsage, user + system, over the starts alone. */
  readonly cpuUsPerStart: number;
  /** /proc/self/io wchar over the starts: bytes handed to write calls (WAL frames and checkpoints). */
  readonly wcharPerStart: number;
  /** /proc/self/io write_bytes over the starts: bytes this process sent to storage. */
  readonly writeBytesPerStart: number;
  /** Growth of the database file plus its WAL file over the starts. */
  readonly fileBytesPerStart: number;
}
