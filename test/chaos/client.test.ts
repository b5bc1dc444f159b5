import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCall } from '../../tools/chaos/client.ts';
import type { PlannedCall } from '../../tools/chaos/plan.ts';

/**
 * The chaos suite's analyze client (tools/chaos/client.ts) against a loopback server that answers
 * 503 with Retry-After a given number of times, then 200: it resends with the same x-request-id
 * after each Retry-After for as long as its window allows (longer than a Temporal outage in the
 * suite), and the answer it ends with is the last one it got.
 */
let server: http.Server;
let base: string;
/** Per request id: 503s still to answer, and when each request came. */
const plans = new Map<string, { busy: number; seen: number[] }>();

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const id = String(req.headers['x-request-id']);
    const p = plans.get(id)!;
    p.seen.push(Date.now());
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (p.busy-- > 0) {
        res.statusCode = 503;
        res.setHeader('retry-after', '1');
        res.end(JSON.stringify({ error: { code: 'SERVICE_UNAVAILABLE', message: 'come back', retryable: true, requestId: id } }));
      } else {
        res.end(JSON.stringify({ usage: { creditsCharged: 2 }, meta: { requestId: id, cacheHit: false } }));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

function call(requestId: string, busy: number): PlannedCall {
  plans.set(requestId, { busy, seen: [] });
  return { index: 0, user: 0, kind: 'single', path: '/v1/analyze', body: { imageUrl: 'https://example.com/a.jpg' }, requestId, workflow: 'analyze', refresh: false, extract: false };
}

const opts = { apis: () => [base], keyOf: () => 'key', timeoutMs: 5_000, maxAttempts: 60 };

describe('chaos analyze client', () => {
  it('keeps resending after each Retry-After, past six attempts, until the answer comes', async () => {
    const r = await runCall(call('busy-7', 7), { ...opts, retryForMs: 20_000 });
    expect(r.final).toEqual({ kind: 'answer', status: 200, creditsCharged: 2, cacheHit: false });
    expect(r.attempts.map((a) => a.status)).toEqual([503, 503, 503, 503, 503, 503, 503, 200]);
    expect(r.attempts.slice(0, 7).every((a) => a.retryAfter === '1')).toBe(true);
    // Each resend waited the second it was told to.
    const seen = plans.get('busy-7')!.seen;
    for (let i = 1; i < seen.length; i++) expect(seen[i]! - seen[i - 1]!).toBeGreaterThanOrEqual(950);
  }, 30_000);

  it('ends with the last 503 once its window is spent', async () => {
    const r = await runCall(call('busy-forever', 1_000), { ...opts, retryForMs: 2_500 });
    expect(r.final).toMatchObject({ kind: 'answer', status: 503, code: 'SERVICE_UNAVAILABLE' });
    // Attempts at 0 s, ~1 s, ~2 s; a fourth would start past the 2.5 s window.
    expect(r.attempts).toHaveLength(3);
  }, 30_000);
});
