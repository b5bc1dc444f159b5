import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBatch, markBatchStarted, setBatchStatus } from '../../batches/repository.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { startConsoleOverHttp, type ConsoleOverHttp } from './console-http.ts';

/**
 * The console's live batch list (`GET …/workspaces/{id}/batches/events`, web/routes/batches.ts over
 * core/event-stream.ts), over HTTP against the console's real server: the list pushed when it
 * changes, ended once no batch runs, at most 3 open per person, and a slot given back as soon as its
 * client goes. The Dashboard follows it in Chromium (test/web/console.test.ts); this reads the wire.
 */
let p: Pipeline;
let site: ConsoleOverHttp;
let url: string;

beforeAll(async () => {
  // No worker: the batch here is moved by hand.
  p = await startPipeline({ worker: false });
  site = await startConsoleOverHttp(p);
  url = site.url;
}, 120_000);
afterAll(async () => {
  // Every stream has ended by now; the close cuts the test's own idle keep-alive sockets.
  await site?.close();
  await p?.close();
});

/** A person signed in by a mailed link: their session cookie and personal workspace. */
const signIn = (email: string) => site.signIn(email);

/** An open event stream: its response, the events read so far, and a way to hang up. */
function open(cookie: string, workspaceId: string) {
  const abort = new AbortController();
  const events: Array<{ event: string; data: unknown }> = [];
  const started = fetch(`${url}/api/v1/workspaces/${workspaceId}/batches/events`, { headers: { cookie }, signal: abort.signal });
  const ended = started.then(async (res) => {
    if (res.status !== 200 || !res.body) return;
    const decoder = new TextDecoder();
    let text = '';
    try {
      for await (const chunk of res.body) {
        text += decoder.decode(chunk, { stream: true });
        let at: number;
        while ((at = text.indexOf('\n\n')) !== -1) {
          const block = text.slice(0, at);
          text = text.slice(at + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event && data !== undefined) events.push({ event, data: JSON.parse(data) });
        }
      }
    } catch {
      // Hung up by the test.
    }
  });
  return { started, ended, events, close: () => abort.abort() };
}

describe('the live batch list', () => {
  it('pushes the list, then its change, then ends once none runs; at most 3 at once, a slot back as soon as its client goes', async () => {
    const { cookie, workspaceId } = await signIn(`stream-${randomBytes(5).toString('hex')}@example.test`);
    const batchId = await createBatch(p.db, { accountId: workspaceId, kind: 'photos', spec: { stack: null, lenses: ['memorial'], billable: ['memorial'] }, columns: null, items: [{ source: 'a.jpg', ref: null, url: 'https://example.test/a.jpg' }] });
    await markBatchStarted(p.db, batchId);

    const first = open(cookie, workspaceId);
    const res = await first.started;
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    expect(res.headers.get('x-request-id')).toMatch(/\S/);
    await expect.poll(() => first.events.length, { timeout: 10_000 }).toBe(1);
    expect(first.events[0]).toMatchObject({ event: 'batches', data: [{ id: batchId, status: 'running' }] });

    // Three open at once per person; the fourth is refused in the envelope.
    const second = open(cookie, workspaceId);
    const third = open(cookie, workspaceId);
    expect([(await second.started).status, (await third.started).status]).toEqual([200, 200]);
    const fourth = await fetch(`${url}/api/v1/workspaces/${workspaceId}/batches/events`, { headers: { cookie } });
    expect(fourth.status).toBe(429);
    expect(((await fourth.json()) as { error: { code: string } }).error.code).toBe('RATE_LIMITED');

    // A client hanging up gives its slot back at once (its loop is woken, not left to its next round).
    third.close();
    await third.ended;
    await expect
      .poll(async () => {
        const again = open(cookie, workspaceId);
        const status = (await again.started).status;
        again.close();
        await again.ended;
        return status;
      }, { timeout: 10_000 })
      .toBe(200);

    // The batch completes: the changed list, then the end, then the stream closes.
    await setBatchStatus(p.db, { batchId, status: 'completed' });
    await first.ended;
    expect(first.events.map((e) => e.event)).toEqual(['batches', 'batches', 'end']);
    expect(first.events[1]).toMatchObject({ data: [{ id: batchId, status: 'completed' }] });
    expect(first.events[2]!.data).toEqual({ reason: 'none-running' });
    await second.ended;
    expect(second.events.at(-1)).toEqual({ event: 'end', data: { reason: 'none-running' } });

    // Nothing runs: a new stream sends the list once and ends at once.
    const after = open(cookie, workspaceId);
    await after.ended;
    expect(after.events.map((e) => e.event)).toEqual(['batches', 'end']);
  }, 90_000);
});
