import { getMaxListeners, setMaxListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { Drain } from '../../api/drain.ts';

/** Warnings `process` reports while `act` runs and one turn after (emitWarning reports on the next tick). */
async function warningsDuring(act: () => void): Promise<string[]> {
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(w.name);
  process.on('warning', onWarning);
  try {
    act();
    await new Promise((resolve) => setImmediate(resolve));
    return warnings;
  } finally {
    process.off('warning', onWarning);
  }
}

describe('Drain', () => {
  it('negative control: past a listener limit, the check the next test makes does see the warning', async () => {
    // Without this, "no MaxListenersExceededWarning" below could pass because the check never fires.
    // Node 24 makes an AbortController's signal unlimited by default; an EventTarget still has
    // Node's limit of 10, and that is what a signal with a limit looks like.
    expect(getMaxListeners(new EventTarget())).toBe(10);
    const limited = new AbortController().signal;
    setMaxListeners(10, limited);
    const warnings = await warningsDuring(() => {
      for (let i = 0; i < 25; i++) limited.addEventListener('abort', () => {}, { once: true });
    });
    expect(warnings).toContain('MaxListenersExceededWarning');
  });

  it('lets every in-flight analysis wait on its signal without a listener-leak warning, and abandons them all at once', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const drain = new Drain();
      // Unlimited whatever Node's default for a signal is (an older Node warned past 10).
      expect(getMaxListeners(drain.signal)).toBe(0);
      // One abort listener per analysis awaiting its workflow (analysis/await-workflow.ts); 20
      // concurrent clients are an ordinary load.
      let abandoned = 0;
      for (let i = 0; i < 25; i++) drain.signal.addEventListener('abort', () => abandoned++, { once: true });
      // process.emitWarning reports on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).not.toContain('MaxListenersExceededWarning');
      drain.abandonWaits();
      expect(abandoned).toBe(25);
      expect(drain.draining).toBe(true);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
