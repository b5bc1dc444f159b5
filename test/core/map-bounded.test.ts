import { describe, expect, it } from 'vitest';
import { mapBounded } from '../../core/map-bounded.ts';

describe('mapBounded', () => {
  it('keeps order and never has more than `limit` calls in flight', async () => {
    let inFlight = 0;
    let most = 0;
    const out = await mapBounded([5, 1, 4, 2, 3], 2, async (n) => {
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setImmediate(r));
      inFlight--;
      return n * 10;
    });
    expect(out).toEqual([50, 10, 40, 20, 30]);
    expect(most).toBe(2);
  });

  it('on a failure starts nothing new, waits for the calls in flight, then rejects with the first failure', async () => {
    const finished: number[] = [];
    const started: number[] = [];
    let release!: () => void;
    const slow = new Promise<void>((r) => (release = r));
    const run = mapBounded([0, 1, 2, 3], 2, async (n) => {
      started.push(n);
      if (n === 0) {
        await slow; // in flight when item 1 fails
        finished.push(n);
        return n;
      }
      if (n === 1) throw new Error('item 1 failed');
      finished.push(n);
      return n;
    });
    let settled = false;
    void run.catch(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    // Item 1 failed, but item 0 is still running: the map has not rejected yet.
    expect(settled).toBe(false);
    release();
    await expect(run).rejects.toThrow('item 1 failed');
    expect(finished).toEqual([0]);
    expect(started).toEqual([0, 1]);
  });
});
