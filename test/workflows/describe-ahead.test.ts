import { describe, expect, it } from 'vitest';
import type { PreparedUpload } from '../../workflows/types.ts';
import { describeAhead } from '../../workflows/vehicle-report.ts';

/**
 * The order a vehicle's photo calls run in when each call prepares a photo ahead
 * (workflows/vehicle-report.ts describeAhead): which call prepares which photo, and which call
 * receives a prepared upload. The calls are plain promises the test settles in the order it
 * chooses, so every interleaving below is the one asserted, not a timing.
 */
const upload = (sha256: string): PreparedUpload => ({ sha256, vendor: 'openai', blob: `b-${sha256}`, width: 1, height: 1, tokens: 1, source: { width: 1, height: 1 } });

interface Call {
  sha256: string;
  prepared: string | undefined;
  ahead: string | undefined;
  settle: (prepares: boolean) => void;
  fail: (err: Error) => void;
}

/** Runs describeAhead; each call waits until the test settles it (preparing its `ahead` or not). */
function run(todo: string[], lanes: number) {
  const calls: Call[] = [];
  const done = describeAhead(todo, lanes, (sha256, prepared, ahead) =>
    new Promise((resolve, reject) => {
      calls.push({
        sha256,
        prepared: prepared?.blob,
        ahead,
        settle: (prepares) => resolve(prepares && ahead ? { preparedAhead: upload(ahead) } : {}),
        fail: reject,
      });
    }),
  );
  return { calls, done };
}

const flush = () => new Promise<void>((r) => setImmediate(r));
const seen = (calls: Call[]) => calls.map((c) => [c.sha256, c.prepared ?? null, c.ahead ?? null]);

describe('a vehicle’s photo calls, each preparing the next', () => {
  it('one lane (a fleet’s vehicle): every photo after the first is prepared by the call before it and starts with its upload', async () => {
    const { calls, done } = run(['a', 'b', 'c', 'd'], 1);
    for (let k = 0; k < 4; k++) {
      await flush();
      calls[k]!.settle(true);
    }
    await done;
    expect(seen(calls)).toEqual([
      ['a', null, 'b'],
      ['b', 'b-b', 'c'],
      ['c', 'b-c', 'd'],
      ['d', 'b-d', null],
    ]);
  });

  it('as many lanes as photos (a single vehicle request): nothing is prepared ahead, so no photo is decoded twice', async () => {
    const { calls, done } = run(['a', 'b', 'c', 'd', 'e'], 16);
    await flush();
    expect(seen(calls)).toEqual([
      ['a', null, null],
      ['b', null, null],
      ['c', null, null],
      ['d', null, null],
      ['e', null, null],
    ]);
    calls.forEach((c) => c.settle(true));
    await done;
  });

  it('more photos than lanes: only the photos left for a free lane are prepared, and a lane takes a prepared one first', async () => {
    const { calls, done } = run(['a', 'b', 'c', 'd', 'e', 'f'], 2);
    await flush();
    // The two lanes take a and b at once; a prepares c, b prepares d.
    expect(seen(calls)).toEqual([
      ['a', null, 'c'],
      ['b', null, 'd'],
    ]);
    // b answers first: its lane takes d (prepared) before c (being prepared by a), and prepares e.
    calls[1]!.settle(true);
    await flush();
    expect(seen(calls).slice(2)).toEqual([['d', 'b-d', 'e']]);
    // a's preparation of c failed (no upload): c's own call decodes it, and prepares f.
    calls[0]!.settle(false);
    await flush();
    expect(seen(calls).slice(3)).toEqual([['c', null, 'f']]);
    calls[2]!.settle(true);
    await flush();
    expect(seen(calls).slice(4)).toEqual([['e', 'b-e', null]]);
    calls[3]!.settle(true);
    await flush();
    expect(seen(calls).slice(5)).toEqual([['f', 'b-f', null]]);
    calls[4]!.settle(true);
    calls[5]!.settle(true);
    await done;
    expect(calls.map((c) => c.sha256).sort()).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
  });

  it('a lane that finds only photos being prepared ends; the preparing call’s lane takes the photo when it answers', async () => {
    const { calls, done } = run(['a', 'b', 'c', 'd'], 3);
    await flush();
    expect(seen(calls)).toEqual([
      ['a', null, 'd'],
      ['b', null, null],
      ['c', null, null],
    ]);
    // c answers first: d is a's to prepare, so c's lane ends without decoding it a second time.
    calls[2]!.settle(true);
    await flush();
    expect(calls).toHaveLength(3);
    calls[0]!.settle(true);
    await flush();
    expect(seen(calls).slice(3)).toEqual([['d', 'b-d', null]]);
    calls[1]!.settle(true);
    calls[3]!.settle(true);
    await done;
  });

  it('the first failure starts no new call, waits for the calls in flight, then rejects with it', async () => {
    const { calls, done } = run(['a', 'b', 'c', 'd'], 2);
    const outcome = done.then(() => 'resolved', (err: Error) => err.message);
    await flush();
    calls[0]!.fail(new Error('vendor refused a'));
    await flush();
    expect(calls).toHaveLength(2);
    let settled = false;
    void outcome.then(() => (settled = true));
    await flush();
    expect(settled).toBe(false); // b is still in flight
    calls[1]!.settle(true);
    expect(await outcome).toBe('vendor refused a');
    expect(calls.map((c) => c.sha256)).toEqual(['a', 'b']);
  });
});
