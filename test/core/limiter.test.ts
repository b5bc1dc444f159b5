import { describe, expect, it } from 'vitest';
import { Limiter } from '../../core/limiter.ts';

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

  it('refuses past maxWaiting with the error `full` makes, and moves nothing', async () => {
    const limiter = new Limiter(1, { maxWaiting: 1, full: () => new Error('queue full') });
    const gate = deferred();
    const running = limiter.run(() => gate.promise);
    const queued = limiter.run(async () => 'queued');
    await expect(limiter.run(async () => 'third')).rejects.toThrow('queue full');
    expect([limiter.active, limiter.waiting]).toEqual([1, 1]);
    gate.resolve();
    await running;
    expect(await queued).toBe('queued');
  });

  it('a waiter whose signal aborts leaves the queue: it never runs, the next waiter gets the slot', async () => {
    const limiter = new Limiter(1);
    const gate = deferred();
    const running = limiter.run(() => gate.promise);
    const abort = new AbortController();
    const ran: string[] = [];
    const leaving = limiter.run(async () => void ran.push('left'), abort.signal);
    const staying = limiter.run(async () => void ran.push('stayed'));
    expect(limiter.waiting).toBe(2);
    abort.abort(new Error('deadline'));
    await expect(leaving).rejects.toThrow('deadline');
    expect(limiter.waiting).toBe(1);
    gate.resolve();
    await Promise.all([running, staying]);
    expect(ran).toEqual(['stayed']);
    expect([limiter.active, limiter.waiting]).toEqual([0, 0]);
    await expect(limiter.run(async () => 1, AbortSignal.abort(new Error('already')))).resolves.toBe(1); // a free slot does not wait
  });
});
