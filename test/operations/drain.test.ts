import { describe, expect, it } from 'vitest';
import { Drain } from '../../api/drain.ts';

describe('Drain', () => {
  it('lets every in-flight analysis wait on its signal without a listener-leak warning, and abandons them all at once', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const drain = new Drain();
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
