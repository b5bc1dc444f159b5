import { setMaxListeners } from 'node:events';

/**
 * Graceful shutdown state of one API process. `begin()` when shutdown starts: responses then
 * close their connection and requests that still arrive on a kept-alive connection get 503.
 * `abandonWaits()` when the grace time is over: requests still awaiting a workflow stop waiting
 * and answer 503 (the workflow itself goes on; the same x-request-id later gets its result).
 */
export class Drain {
  #draining = false;
  readonly #waits = new AbortController();

  constructor() {
    // Every analysis awaiting its workflow listens here: past 10 concurrent ones Node would warn
    // of a listener leak that is not one. Each listener is removed when its wait ends.
    setMaxListeners(0, this.#waits.signal);
  }

  get draining(): boolean {
    return this.#draining;
  }

  /** Aborted when waiting on workflows is given up. */
  get signal(): AbortSignal {
    return this.#waits.signal;
  }

  begin(): void {
    this.#draining = true;
  }

  abandonWaits(): void {
    this.#draining = true;
    if (!this.#waits.signal.aborted) this.#waits.abort(new Error('shutdown grace time over'));
  }
}
