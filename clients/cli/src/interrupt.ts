/**
 * Ctrl-C and SIGTERM. A step that can stop in order (the uploads: each PATCH ends where the API
 * holds it, the state file says where to go on) takes the first signal while it runs; any other
 * signal, or a second one, ends the process at once (output.ts removes a partial file first).
 */
let inOrder = 0;

/** Runs `run` with `onInterrupt` called on the first SIGINT or SIGTERM that arrives meanwhile. */
export async function whileInterruptible<T>(onInterrupt: () => void, run: () => Promise<T>): Promise<T> {
  let waiting = true;
  const done = () => {
    if (!waiting) return;
    waiting = false;
    inOrder--;
    process.removeListener('SIGINT', handler);
    process.removeListener('SIGTERM', handler);
  };
  const handler = () => {
    onInterrupt();
    // Taken: every listener of this signal still sees a step stopping in order (output.ts: its
    // handler may come after this one); the next signal does not.
    queueMicrotask(done);
  };
  inOrder++;
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  try {
    return await run();
  } finally {
    done();
  }
}

/** Whether a step is waiting to stop in order on the next signal. */
export function stopsInOrder(): boolean {
  return inOrder > 0;
}
