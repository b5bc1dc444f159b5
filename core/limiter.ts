/**
 * At most `max` tasks at once; the rest wait in arrival order, at most `maxWaiting` of them (beyond
 * that `run` throws what `full` makes). A waiter whose signal aborts leaves the queue and rejects
 * with the signal's reason; a task that started runs to its end and holds its slot until then.
 * Serves the enrichment queue (each waiter holds an image) and the DNS lookups in flight.
 */
export class Limiter {
  #active = 0;
  readonly #waiting: Array<() => void> = [];
  readonly #maxWaiting: number;
  readonly #full: () => Error;

  constructor(
    readonly max: number,
    opts: { maxWaiting?: number; full?: () => Error } = {},
  ) {
    if (!Number.isSafeInteger(max) || max < 1) throw new Error('Limiter max must be a positive integer');
    this.#maxWaiting = opts.maxWaiting ?? Number.POSITIVE_INFINITY;
    this.#full = opts.full ?? (() => new Error('Limiter queue is full'));
  }

  get active(): number {
    return this.#active;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  async run<T>(work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (this.#active >= this.max) {
      if (this.#waiting.length >= this.#maxWaiting) throw this.#full();
      await this.#wait(signal);
    } else this.#active++;
    try {
      return await work();
    } finally {
      // Hand the slot straight to the next waiter, so a newcomer cannot overtake it.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#active--;
    }
  }

  /** Resolves when a finishing task hands this waiter its slot. */
  #wait(signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const grant = () => {
        signal?.removeEventListener('abort', leave);
        resolve();
      };
      const leave = () => {
        const i = this.#waiting.indexOf(grant);
        if (i >= 0) this.#waiting.splice(i, 1);
        reject(signal!.reason);
      };
      this.#waiting.push(grant);
      signal?.addEventListener('abort', leave, { once: true });
    });
  }
}
