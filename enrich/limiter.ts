import { AppError } from '../core/errors.ts';

/**
 * At most `max` enrichments at once in this process; the rest wait in arrival order, at most
 * `maxWaiting` of them (503 with Retry-After beyond: each waiter holds its image in memory). Each
 * holds an image (up to IMAGE_MAX_BYTES), its enriched copy and the base64 answer in memory, and
 * keeps an exiftool process busy, so the bound is on memory and on exiftool's queue.
 */
export class Limiter {
  #active = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(
    readonly max: number,
    readonly maxWaiting = Number.POSITIVE_INFINITY,
  ) {
    if (!Number.isSafeInteger(max) || max < 1) throw new Error('Limiter max must be a positive integer');
  }

  get active(): number {
    return this.#active;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#active >= this.max) {
      if (this.#waiting.length >= this.maxWaiting) {
        throw new AppError('SERVICE_UNAVAILABLE', 'Too many enrichments are waiting on this server; send the request again in a moment', {
          headers: { 'retry-after': '2' },
        });
      }
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
    else this.#active++;
    try {
      return await work();
    } finally {
      // Hand the slot straight to the next waiter, so a newcomer cannot overtake it.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#active--;
    }
  }
}
