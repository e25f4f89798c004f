/**
 * Serializes use of the one loaded engine: completions batches and evaluation-job chunks take turns, first come
 * first served, so neither starves the other and the engine never runs two forward passes at once.
 */
export class EngineGate {
  private tail: Promise<unknown> = Promise.resolve();
  private waiting = 0;

  /** Calls waiting for (or holding) the engine. */
  get queued(): number {
    return this.waiting;
  }

  run<T>(task: () => Promise<T>): Promise<T> {
    this.waiting++;
    const result = this.tail.then(task);
    const settle = () => {
      this.waiting--;
    };
    this.tail = result.then(settle, settle);
    return result;
  }
}
