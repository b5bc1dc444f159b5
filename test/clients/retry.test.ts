import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Lenstack, LenstackError, parseRetryAfter, type RetryEvent } from '@lenstack/client';

/**
 * The client's retry loop against a tiny HTTP server at the wire: the server answers each
 * attempt as the test scripts it and records what arrived.
 */
type Seen = { method: string; url: string; requestId: string | undefined; body: string; authorization: string | undefined };
type Answer = (req: IncomingMessage, res: ServerResponse) => void;

let server: Server | undefined;
afterEach(async () => {
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = undefined;
});

async function wire(answers: Answer[]): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, requestId: req.headers['x-request-id'] as string | undefined, body, authorization: req.headers.authorization });
      const answer = answers[seen.length - 1] ?? answers.at(-1)!;
      answer(req, res);
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, seen };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Answer => (_req, res) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};
const envelope = (code: string, retryable: boolean, extra: Record<string, unknown> = {}) => ({ error: { code, message: `${code} from the wire`, retryable, requestId: 'req_from_server', ...extra } });
/** Closes the connection without an answer: what a lost response looks like to the client. */
const hangUp: Answer = (req) => req.socket.destroy();
const ANALYSIS = { id: 'ana_1', object: 'analysis', schemaVersion: '2.1.0', createdAt: '2026-11-25T00:00:00Z', output: { estimatedDate: { year: 1978 } }, outputSchema: 'photo', usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2, modulesUsed: ['dating'], creditsCharged: 1 }, warnings: [], meta: {} };
const BATCH = { object: 'batch', id: 'bat_1', status: 'running' };

/** Every wait the client asked for, in ms; the client's sleep is injected, so no test waits for real. */
let waits: number[] = [];
afterEach(() => {
  waits = [];
});
function client(url: string, events: RetryEvent[], retry = {}) {
  return new Lenstack({
    apiKey: 'svc_live_wire', baseUrl: url, onRetry: (e) => events.push(e), retry: { baseDelayMs: 1, ...retry },
    sleep: async (ms) => {
      waits.push(ms);
    },
  });
}

describe('retries', () => {
  it('waits out a 429 for its Retry-After and resends with the same x-request-id', async () => {
    const { url, seen } = await wire([json(429, envelope('RATE_LIMITED', true), { 'retry-after': '1' }), json(200, ANALYSIS)]);
    const events: RetryEvent[] = [];
    const analysis = await client(url, events).analyze({ imageUrl: 'https://example.com/a.jpg', modules: ['dating'] });
    expect(analysis.id).toBe('ana_1');
    expect(seen).toHaveLength(2);
    expect(seen[0]!.requestId).toMatch(/^req_[0-9a-f]{32}$/);
    expect(seen[1]!.requestId).toBe(seen[0]!.requestId);
    // The body is sent again whole, and the key with it.
    expect(JSON.parse(seen[1]!.body)).toEqual({ imageUrl: 'https://example.com/a.jpg', modules: ['dating'] });
    expect(seen[1]!.authorization).toBe('Bearer svc_live_wire');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ attempt: 1, reason: 429, requestId: seen[0]!.requestId });
    expect(events[0]!.delayMs).toBeGreaterThanOrEqual(1000);
    expect(events[0]!.delayMs).toBeLessThan(1250);
    // Asked of the injected sleep, not slept.
    expect(waits).toEqual([events[0]!.delayMs]);
  });

  it("keeps the caller's x-request-id across a 503 and a lost answer", async () => {
    const { url, seen } = await wire([json(503, envelope('SERVICE_UNAVAILABLE', true)), hangUp, json(200, ANALYSIS)]);
    const events: RetryEvent[] = [];
    await client(url, events, { maxAttempts: 3 }).analyze({ imageUrl: 'https://example.com/a.jpg' }, { requestId: 'order-4711' });
    expect(seen.map((s) => s.requestId)).toEqual(['order-4711', 'order-4711', 'order-4711']);
    expect(events.map((e) => e.reason)).toEqual([503, 'network']);
  });

  it('gives up after maxAttempts with the last answer as a typed error', async () => {
    const { url, seen } = await wire([json(503, envelope('SERVICE_UNAVAILABLE', true), { 'retry-after': '0' })]);
    const err = await client(url, [], { maxAttempts: 2 }).usage().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LenstackError);
    expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, retryable: true, attempts: 2, retryAfterSeconds: 0, requestId: 'req_from_server' });
    expect(seen).toHaveLength(2);
  });

  it('does not wait out a Retry-After beyond maxRetryAfterMs: the caller gets the 429 and the wait', async () => {
    const { url, seen } = await wire([json(429, envelope('RATE_LIMITED', true), { 'retry-after': '3600' })]);
    const err = await client(url, []).analyze({ imageUrl: 'https://example.com/a.jpg' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'RATE_LIMITED', status: 429, retryAfterSeconds: 3600, attempts: 1 });
    expect(seen).toHaveLength(1);
  });

  it('resends a batch submission whose answer was lost under the same x-request-id (the API answers with the batch it made), and retries its 429', async () => {
    const lost = await wire([hangUp, json(202, BATCH)]);
    const resent = await client(lost.url, []).batches.create({ items: [{ url: 'https://example.com/a.jpg' }] });
    expect(resent.id).toBe('bat_1');
    expect(lost.seen).toHaveLength(2);
    expect(lost.seen[1]!.requestId).toBe(lost.seen[0]!.requestId);
    await new Promise((r) => server!.close(r));

    // Steering a batch is not resent after a lost answer.
    const control = await wire([hangUp, json(202, BATCH)]);
    const err = await client(control.url, []).batches.pause('bat_1').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'NETWORK_ERROR', status: null, attempts: 1, retryable: true });
    expect((err as LenstackError).requestId).toBe(control.seen[0]!.requestId);
    expect(control.seen).toHaveLength(1);
    await new Promise((r) => server!.close(r));

    const limited = await wire([json(429, envelope('RATE_LIMITED', true), { 'retry-after': '0' }), json(202, BATCH)]);
    const batch = await client(limited.url, []).batches.create({ items: [{ url: 'https://example.com/a.jpg' }] });
    expect(batch.id).toBe('bat_1');
    expect(limited.seen.map((s) => s.requestId)).toEqual([limited.seen[0]!.requestId, limited.seen[0]!.requestId]);
  });

  it('reports no answer at all as NETWORK_ERROR after every attempt', async () => {
    const { url, seen } = await wire([hangUp]);
    const err = await client(url, [], { maxAttempts: 3 }).catalog().catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'NETWORK_ERROR', status: null, attempts: 3 });
    expect((err as Error).message).toMatch(/No answer from the API after 3 attempts/);
    expect(seen).toHaveLength(3);
  });
});

describe('following a batch', () => {
  it('opens the event stream again when it breaks off, and reads the end state', async () => {
    const running = { ...BATCH, counts: { total: 2, done: 1, failed: 0, pending: 1 } };
    const completed = { ...BATCH, status: 'completed', counts: { total: 2, done: 2, failed: 0, pending: 0 } };
    const { url, seen } = await wire([
      (req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(`event: batch\ndata: ${JSON.stringify(running)}\n\n`, () => req.socket.destroy());
      },
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(`: still running\n\nevent: batch\ndata: ${JSON.stringify(completed)}\n\n`);
      },
      json(200, completed),
    ]);
    const progress: unknown[] = [];
    const done = await client(url, []).batches.wait('bat_1', { onProgress: (b) => progress.push(b.status) });
    expect(done).toEqual(completed);
    expect(seen.map((s) => s.url)).toEqual(['/v1/batches/bat_1/events', '/v1/batches/bat_1/events', '/v1/batches/bat_1']);
    expect(progress.at(-1)).toBe('completed');
  });

  it('gives up on a stream that keeps breaking off with NETWORK_ERROR', async () => {
    const { url, seen } = await wire([(req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': hello\n\n', () => req.socket.destroy());
    }]);
    const err = await client(url, [], { maxAttempts: 2 }).batches.wait('bat_1').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'NETWORK_ERROR', status: null });
    expect((err as Error).message).toContain('event stream broke off');
    expect(seen).toHaveLength(2);
  });
  it('opens the stream again when it ends cleanly while the batch still runs, and reads the end state', async () => {
    const running = { ...BATCH, counts: { total: 2, done: 1, failed: 0, pending: 1 } };
    const completed = { ...BATCH, status: 'completed', counts: { total: 2, done: 2, failed: 0, pending: 0 } };
    // The server ends the stream cleanly when its read of the batch throws: not the end of the batch.
    const cleanEnd = (b: unknown): Answer => (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`event: batch\ndata: ${JSON.stringify(b)}\n\n`);
    };
    const { url, seen } = await wire([cleanEnd(running), cleanEnd(completed), json(200, completed)]);
    const progress: string[] = [];
    const done = await client(url, []).batches.wait('bat_1', { onProgress: (b) => progress.push(b.status) });
    expect(done).toEqual(completed);
    expect(seen.map((s) => s.url)).toEqual(['/v1/batches/bat_1/events', '/v1/batches/bat_1/events', '/v1/batches/bat_1']);
    expect(progress).toEqual(['running', 'completed']);
    // It waited (a jittered backoff, bounded by maxDelayMs) before opening the stream again.
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeLessThanOrEqual(8000);
  });

  it('gives up on a stream that keeps ending after the same first event, with backoff between tries', async () => {
    const running = { ...BATCH, counts: { total: 2, done: 1, failed: 0, pending: 1 } };
    const { url, seen } = await wire([(_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`event: batch\ndata: ${JSON.stringify(running)}\n\n`);
    }]);
    const err = await client(url, [], { maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 150 }).batches.wait('bat_1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LenstackError);
    expect(err).toMatchObject({ code: 'NETWORK_ERROR', status: null });
    expect((err as Error).message).toContain('ended while the batch was still running');
    // Three streams (maxAttempts in a row without news), a wait between each; no GET.
    expect(seen.map((s) => s.url)).toEqual(Array(3).fill('/v1/batches/bat_1/events'));
    expect(waits).toHaveLength(2);
    for (const w of waits) expect(w).toBeLessThanOrEqual(150);
  });

  it('keeps following as long as each new stream brings news', async () => {
    const at = (done: number) => ({ ...BATCH, counts: { total: 5, done, failed: 0, pending: 5 - done } });
    const completed = { ...BATCH, status: 'completed', counts: { total: 5, done: 5, failed: 0, pending: 0 } };
    const cleanEnd = (...batches: unknown[]): Answer => (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(batches.map((b) => `event: batch\ndata: ${JSON.stringify(b)}\n\n`).join(''));
    };
    // maxAttempts 2: four clean ends in a row would fail, but each brings a new count.
    const { url, seen } = await wire([cleanEnd(at(1)), cleanEnd(at(1), at(2)), cleanEnd(at(2), at(3)), cleanEnd(at(3), at(4)), cleanEnd(completed), json(200, completed)]);
    const done = await client(url, [], { maxAttempts: 2 }).batches.wait('bat_1');
    expect(done.status).toBe('completed');
    expect(seen).toHaveLength(6);
  });
  it('returns a paused batch and closes its stream, which the server keeps open', async () => {
    const paused = { ...BATCH, status: 'paused', pauseReason: 'credits', counts: { total: 2, done: 1, failed: 0, pending: 1 } };
    let closed!: Promise<void>;
    const { url } = await wire([(req, res) => {
      closed = new Promise((resolve) => res.on('close', () => resolve()));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`event: batch\ndata: ${JSON.stringify(paused)}\n\n`);
    }]);
    expect(await client(url, []).batches.wait('bat_1')).toEqual(paused);
    // Resolves only when the client hung up (the test would time out otherwise).
    await closed;
  });
});

describe('requests that may not be sent twice', () => {
  it('resends pause after a 503 with the API envelope, but not after a bare 503 from a gateway', async () => {
    const enveloped = await wire([json(503, envelope('SERVICE_UNAVAILABLE', true), { 'retry-after': '0' }), json(200, BATCH)]);
    expect((await client(enveloped.url, []).batches.pause('bat_1')).id).toBe('bat_1');
    expect(enveloped.seen).toHaveLength(2);
    await new Promise((r) => server!.close(r));

    const bare = await wire([(_req, res) => {
      res.writeHead(503, { 'content-type': 'text/html', 'retry-after': '0' });
      res.end('<html>upstream unavailable</html>');
    }, json(200, BATCH)]);
    const err = await client(bare.url, []).batches.cancel('bat_1').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'UNEXPECTED_RESPONSE', status: 503, attempts: 1 });
    expect(bare.seen).toHaveLength(1);
    await new Promise((r) => server!.close(r));

    // An idempotent request is resent after either.
    const read = await wire([(_req, res) => {
      res.writeHead(503, { 'content-type': 'text/html', 'retry-after': '0' });
      res.end('<html>upstream unavailable</html>');
    }, json(200, BATCH)]);
    expect((await client(read.url, []).batches.get('bat_1')).id).toBe('bat_1');
    expect(read.seen).toHaveLength(2);
  });

  it('refuses a requestId the API would replace (it would no longer make retries idempotent), before sending', async () => {
    const { url, seen } = await wire([json(200, ANALYSIS)]);
    const c = client(url, []);
    for (const bad of ['', 'has space', 'x'.repeat(129), 'ümlaut', 'a/b']) {
      await expect(c.analyze({ imageUrl: 'https://example.com/a.jpg' }, { requestId: bad })).rejects.toThrow(TypeError);
    }
    await expect(c.batches.events('bat_1', { requestId: 'no good' }).next()).rejects.toThrow(/requestId/);
    await expect(c.batches.pause('bat_1', { requestId: 'no good' })).rejects.toThrow(TypeError);
    expect(seen).toHaveLength(0);
    await c.analyze({ imageUrl: 'https://example.com/a.jpg' }, { requestId: 'A-z.0_9:ok' });
    expect(seen.at(-1)!.requestId).toBe('A-z.0_9:ok');
  });
});

describe('error values', () => {
  it('carries the envelope: code, message, status, request id and the credit shortfall of a 402', async () => {
    const credits = { needed: 14, community: 3, purchased: 0, total: 3, resetsInDays: 0 };
    const { url, seen } = await wire([json(402, envelope('PLAN_LIMIT_EXCEEDED', false, { credits }))]);
    const err = await client(url, []).analyze({ imageUrl: 'https://example.com/a.jpg' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LenstackError);
    expect(err).toMatchObject({ name: 'LenstackError', code: 'PLAN_LIMIT_EXCEEDED', message: 'PLAN_LIMIT_EXCEEDED from the wire', status: 402, retryable: false, requestId: 'req_from_server', credits, attempts: 1 });
    // Not retried: a 402 will not change by waiting.
    expect(seen).toHaveLength(1);
  });

  it('names an answer without the envelope UNEXPECTED_RESPONSE, with its status and the id it sent', async () => {
    const { url, seen } = await wire([(_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<html>Bad gateway</html>');
    }]);
    const err = await client(url, []).health().catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'UNEXPECTED_RESPONSE', status: 502, retryable: true, requestId: seen[0]!.requestId });
    expect((err as Error).message).toContain('Bad gateway');
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    expect(parseRetryAfter('7')).toBe(7);
    expect(parseRetryAfter('Wed, 25 Nov 2026 10:00:30 GMT', Date.parse('2026-11-25T10:00:00Z'))).toBe(30);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(null)).toBeUndefined();
    // Only delta-seconds (a non-negative integer) or an HTTP-date: Date.parse reads these as dates in the past.
    for (const odd of ['1.5', '-1', '+3', '1e3', '0x10', 'Wed, 25 Nov 2026', '25 Nov 2026 10:00:30 GMT', 'Wed, 25 Nov 2026 10:00:30 +0100']) {
      expect(parseRetryAfter(odd), odd).toBeUndefined();
    }
    expect(parseRetryAfter(' 2 ')).toBe(2);
    const now = Date.parse('1994-11-06T08:49:00Z');
    // The three forms RFC 9110 §5.6.7 names: IMF-fixdate, RFC 850 and asctime (all GMT).
    expect(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT', now)).toBe(37);
    expect(parseRetryAfter('Sunday, 06-Nov-94 08:49:37 GMT', now)).toBe(37);
    expect(parseRetryAfter('Sun Nov  6 08:49:37 1994', now)).toBe(37);
    expect(parseRetryAfter('Sun, 06 Nov 1994 08:48:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('Sun, 32 Nov 1994 08:49:37 GMT', now)).toBeUndefined();
  });
});
