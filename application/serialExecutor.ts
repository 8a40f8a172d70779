/**
 * One operation at a time on a single connection: the "single operation authority" of R5.1.
 * A promise chain, not a queue with workers: no timers, no threads (R6.3).
 */
export class SerialExecutor {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(op: () => Promise<T>): Promise<T> {
    const result = this.tail.then(op, op);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}
