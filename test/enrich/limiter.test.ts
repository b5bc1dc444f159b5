import { describe, expect, it } from 'vitest';
import { Limiter } from '../../enrich/limiter.ts';

const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

describe('Limiter', () => {
  it('runs at most `max` at once, starts waiters in arrival order, and frees the slot on failure', async () => {
    const limiter = new Limiter(2);
    const gates = Array.from({ length: 5 }, deferred);
    const started: number[] = [];
    const runs = gates.map((g, i) =>
      limiter.run(async () => {
        started.push(i);
        await g.promise;
        if (i === 0) throw new Error('boom');
        return i;
      }),
    );
    await Promise.resolve();
    expect(started).toEqual([0, 1]);
    expect([limiter.active, limiter.waiting]).toEqual([2, 3]);

    gates[0]!.resolve();
    await expect(runs[0]).rejects.toThrow('boom');
    expect(started).toEqual([0, 1, 2]);
    expect([limiter.active, limiter.waiting]).toEqual([2, 2]);

    for (const g of gates.slice(1)) g.resolve();
    expect(await Promise.all(runs.slice(1))).toEqual([1, 2, 3, 4]);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    expect([limiter.active, limiter.waiting]).toEqual([0, 0]);
  });

  it('refuses a non-positive bound', () => {
    expect(() => new Limiter(0)).toThrow();
  });
});
