import { EventEmitter } from 'node:events';
import type { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { eventStream, type EventSink } from '../../core/event-stream.ts';

/** Everything written to the body, as text, once it has ended. */
async function textOf(body: PassThrough): Promise<string> {
  let text = '';
  for await (const chunk of body) text += String(chunk);
  return text;
}

describe('eventStream', () => {
  it('sends a state only when it changes, a comment after a quiet spell, its last event, then ends', async () => {
    const client = new EventEmitter();
    const states = [{ n: 1 }, { n: 1 }, { n: 1 }, { n: 1 }, { n: 1 }, { n: 2 }];
    let round = 0;
    let ended = 0;
    const stream = eventStream({
      client,
      everyMs: 15,
      heartbeat: { afterMs: 40, comment: 'still here' },
      async tick(sink) {
        const state = states[round++]!;
        sink.sendIfChanged('state', state);
        if (round < states.length) return true;
        sink.send('end', { reason: 'done' });
        return false;
      },
      onError: (err) => {
        throw err;
      },
      onEnd: () => void ended++,
    });
    const text = await textOf(stream.body);
    await stream.done;
    expect(round).toBe(6);
    expect(ended).toBe(1);
    const lines = text.split('\n\n').filter(Boolean);
    // The first and the changed state; at least one heartbeat between them (5 quiet rounds of 15 ms > 40 ms); then the end.
    expect(lines[0]).toBe('event: state\ndata: {"n":1}');
    expect(lines.at(-2)).toBe('event: state\ndata: {"n":2}');
    expect(lines.at(-1)).toBe('event: end\ndata: {"reason":"done"}');
    const between = lines.slice(1, -2);
    expect(between.length).toBeGreaterThanOrEqual(1);
    expect(new Set(between)).toEqual(new Set([': still here']));
  });

  it('compares by `compareAs` when given: a change outside it is not sent', async () => {
    const client = new EventEmitter();
    let round = 0;
    const stream = eventStream({
      client,
      everyMs: 1,
      heartbeat: { afterMs: 60_000, comment: 'x' },
      async tick(sink) {
        round++;
        sink.sendIfChanged('batch', { status: 'running', eta: round }, { status: 'running' });
        return round < 3;
      },
      onError: (err) => {
        throw err;
      },
    });
    expect(await textOf(stream.body)).toBe('event: batch\ndata: {"status":"running","eta":1}\n\n');
  });

  it('the client closing stops the loop at once, even mid-pause, and nothing is written after', async () => {
    const client = new EventEmitter();
    let rounds = 0;
    let ended = 0;
    let sink: EventSink | null = null;
    const stream = eventStream({
      client,
      // A pause far longer than the test: only the close can end it.
      everyMs: 600_000,
      heartbeat: { afterMs: 0, comment: 'beat' },
      async tick(s) {
        sink = s;
        rounds++;
        s.send('state', { rounds });
        return true;
      },
      onError: (err) => {
        throw err;
      },
      onEnd: () => void ended++,
    });
    const chunks: string[] = [];
    stream.body.on('data', (c) => chunks.push(String(c)));
    await new Promise((r) => setImmediate(r));
    expect(rounds).toBe(1);
    const started = Date.now();
    client.emit('close');
    await stream.done;
    expect(Date.now() - started).toBeLessThan(1000);
    expect(rounds).toBe(1);
    expect(ended).toBe(1);
    expect(stream.body.writableEnded).toBe(true);
    expect(sink!.closed).toBe(true);
    // A round that outlives the client writes nothing.
    expect(sink!.send('late', {})).toBe(false);
    expect(sink!.sendIfChanged('late', { other: true })).toBe(false);
    expect(chunks.join('')).toBe('event: state\ndata: {"rounds":1}\n\n');
  });

  it('a close during a round: that round’s writes are dropped and no further round runs', async () => {
    const client = new EventEmitter();
    let rounds = 0;
    const results: boolean[] = [];
    const stream = eventStream({
      client,
      everyMs: 1,
      heartbeat: { afterMs: 0, comment: 'beat' },
      async tick(sink) {
        rounds++;
        if (rounds === 2) {
          client.emit('close');
          results.push(sink.send('state', { rounds }));
        } else results.push(sink.send('state', { rounds }));
        return true;
      },
      onError: (err) => {
        throw err;
      },
    });
    const text = await textOf(stream.body);
    expect(rounds).toBe(2);
    expect(results).toEqual([true, false]);
    expect(text).toBe('event: state\ndata: {"rounds":1}\n\n');
  });

  it('a round that throws ends the stream: reported once, released once', async () => {
    const client = new EventEmitter();
    const errors: unknown[] = [];
    let ended = 0;
    const stream = eventStream({
      client,
      everyMs: 1,
      heartbeat: { afterMs: 60_000, comment: 'x' },
      async tick() {
        throw new Error('database gone');
      },
      onError: (err) => void errors.push(err),
      onEnd: () => void ended++,
    });
    expect(await textOf(stream.body)).toBe('');
    await stream.done;
    expect(errors.map((e) => (e as Error).message)).toEqual(['database gone']);
    expect(ended).toBe(1);
  });
});
