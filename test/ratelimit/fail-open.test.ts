import net from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { ANONYMOUS_SANDBOX_KEY } from '../../auth/keys.ts';
import { RateLimiter } from '../../ratelimit/limiter.ts';
import { freePort } from '../../tools/scripts/temporal.ts';
import { testConfig } from '../harness/env.ts';
import { bearer, buildTestApp, expectEnvelope } from '../helpers/app.ts';

// Decision: when Redis cannot answer, requests go through unlimited (fail open) and the outage is
// logged loudly. These tests break Redis in the two ways that matter: nothing listens (refused at
// once) and a connection that stops answering (only the command timeout ends the wait).

const anon = (app: Awaited<ReturnType<typeof buildTestApp>>['app'], remoteAddress: string) =>
  app.inject({ method: 'GET', url: '/v1/modules', headers: bearer(ANONYMOUS_SANDBOX_KEY), remoteAddress });

function linesMatching(spy: { mock: { calls: unknown[][] } }, text: string): unknown[][] {
  return spy.mock.calls.filter((args) => args.some((a) => typeof a === 'string' && a.includes(text)));
}

/** A TCP proxy to the real Redis that can stop forwarding (bytes are held, as a stalled Redis would). */
async function freezableProxy(redisUrl: string) {
  const target = new URL(redisUrl);
  let frozen = false;
  const links = new Set<{ held: Buffer[]; upstream: net.Socket; client: net.Socket }>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    const link = { held: [] as Buffer[], upstream, client };
    links.add(link);
    client.on('data', (chunk: Buffer) => (frozen ? link.held.push(chunk) : upstream.write(chunk)));
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
      links.delete(link);
    };
    for (const s of [client, upstream]) s.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `redis://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    freeze: () => {
      frozen = true;
    },
    thaw: () => {
      frozen = false;
      for (const l of links) for (const chunk of l.held.splice(0)) l.upstream.write(chunk);
    },
    close: () => {
      for (const l of links) l.client.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('Redis unreachable: fail open', () => {
  it('nothing listening: every request goes through without limit headers, and the outage is one loud log line', async () => {
    const port = await freePort();
    const limiter = await RateLimiter.connect(`redis://127.0.0.1:${port}`, { connectTimeoutMs: 200 });
    const t = await buildTestApp({ deps: { rateLimiter: limiter } });
    try {
      expect(limiter.ready).toBe(false);
      const errors = vi.spyOn(t.app.log, 'error');
      // With Redis up, the anonymous key would be refused from the 3rd request on.
      for (let i = 0; i < 6; i++) {
        const res = await anon(t.app, '198.51.100.90');
        expect(res.statusCode, `request ${i + 1}`).toBe(200);
        expect(res.headers['ratelimit-limit']).toBeUndefined();
      }
      const lines = linesMatching(errors, 'requests are NOT rate-limited');
      expect(lines).toHaveLength(1);
      expect(lines[0]![0]).toMatchObject({ unlimitedRequests: 1, err: expect.stringMatching(/offline|closed/i) });
    } finally {
      await t.close();
      await limiter.close();
    }
  });

  it('a Redis that stops answering mid-connection: requests fail open after the command timeout instead of hanging; limits return with Redis', async () => {
    const proxy = await freezableProxy(testConfig().REDIS_URL);
    const limiter = await RateLimiter.connect(proxy.url, { commandTimeoutMs: 100 });
    const t = await buildTestApp({ deps: { rateLimiter: limiter } });
    const ip = '198.51.100.91';
    try {
      expect(limiter.ready).toBe(true);
      const errors = vi.spyOn(t.app.log, 'error');
      const warnings = vi.spyOn(t.app.log, 'warn');
      const first = await anon(t.app, ip);
      expect(first.statusCode).toBe(200);
      expect(first.headers['ratelimit-remaining']).toBe('1');

      proxy.freeze();
      for (let i = 0; i < 3; i++) {
        const res = await anon(t.app, ip);
        expect(res.statusCode).toBe(200);
        expect(res.headers['ratelimit-limit']).toBeUndefined();
      }
      expect(linesMatching(errors, 'requests are NOT rate-limited')).toHaveLength(1);
      expect(linesMatching(errors, 'requests are NOT rate-limited')[0]![0]).toMatchObject({ err: expect.stringMatching(/timeout/i) });

      // The held commands reach Redis late but in order; the connection stays in step, and the
      // requests that did happen count: the bucket is full now.
      proxy.thaw();
      const after = await anon(t.app, ip);
      expect(after.statusCode, after.body).toBe(429);
      expect(expectEnvelope(after.json()).code).toBe('RATE_LIMITED');
      const retryAfter = Number(after.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(linesMatching(warnings, 'Redis reachable again')).toHaveLength(1);
      expect(linesMatching(warnings, 'Redis reachable again')[0]![0]).toMatchObject({ unlimitedRequests: 3 });
    } finally {
      await t.close();
      await limiter.close();
      await proxy.close();
    }
    // Without the command timeout this test hangs; fail it quickly instead.
  }, 10_000);
});
