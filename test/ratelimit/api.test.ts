import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANONYMOUS_SANDBOX_KEY, generateKey } from '../../auth/keys.ts';
import { issueKey } from '../../auth/repository.ts';
import { RateLimiter } from '../../ratelimit/limiter.ts';
import { testConfig } from '../harness/env.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, INTERNAL_SECRET, type TestApp } from '../helpers/app.ts';
import { LOADED_MACHINE_REDIS_MS } from '../helpers/deps.ts';

// The real app in-process against the real Redis, with the limiter's clock in the test's hands:
// every Retry-After below is exact, and "a day later" is a number, not a wait.
let now = 0;
let limiter: RateLimiter;
let t: TestApp;

beforeAll(async () => {
  limiter = await RateLimiter.connect(testConfig().REDIS_URL, { clock: () => now, commandTimeoutMs: LOADED_MACHINE_REDIS_MS });
  t = await buildTestApp({ config: { TRUSTED_PROXIES: '10.0.0.0/8' }, deps: { rateLimiter: limiter } });
});
afterAll(async () => {
  await t?.close();
  await limiter?.close();
});

const T0 = 1_800_000_000_000;
const SHA = 'ab'.repeat(32);

function get(url: string, headers: Record<string, string>, remoteAddress = '127.0.0.1') {
  return t.app.inject({ method: 'GET', url, headers, remoteAddress });
}
const anon = (remoteAddress: string, headers: Record<string, string> = {}) => get('/v1/modules', { ...bearer(ANONYMOUS_SANDBOX_KEY), ...headers }, remoteAddress);

function expectRateLimited(res: LightMyRequestResponse, retryAfter: number): string {
  expect(res.statusCode, res.body).toBe(429);
  const error = expectEnvelope(res.json());
  expect(error).toMatchObject({ code: 'RATE_LIMITED', retryable: true });
  expect(error.requestId).toBe(res.headers['x-request-id']);
  expect(res.headers['retry-after']).toBe(String(retryAfter));
  expect(res.headers['ratelimit-remaining']).toBe('0');
  expect(res.headers['ratelimit-reset']).toBe(String(retryAfter));
  return error.message;
}

describe('per-user limit: 600 requests per minute over all keys and endpoints', () => {
  it('the 601st request in a minute gets 429 with a true Retry-After; all live keys of the user share it', async () => {
    const user = await createTestAccount(t.db);
    const secondLive = (await issueKey(t.db, user.userId, 'live')).key;
    now = T0;
    const first = await get('/v1/modules', bearer(user.liveKey));
    expect(first.statusCode).toBe(200);
    expect(first.headers).toMatchObject({ 'ratelimit-limit': '600', 'ratelimit-remaining': '599', 'ratelimit-reset': '60', 'ratelimit-policy': '600;w=60' });

    for (let i = 1; i < 600; i++) {
      now = T0 + i * 50;
      const key = i % 2 === 0 ? user.liveKey : secondLive;
      const res = i % 3 === 0 ? await get('/v1/usage', bearer(key)) : await get('/v1/modules', bearer(key));
      expect(res.statusCode, `request ${i + 1}`).toBe(200);
    }
    now = T0 + 30_000;
    const refused = await get('/v1/modules', bearer(secondLive));
    expect(expectRateLimited(refused, 30)).toBe('Rate limit exceeded: 600 requests per minute per user. Retry in 30 s.');
    expect(refused.headers['ratelimit-limit']).toBe('600');

    // The first request leaves the window exactly one minute after it was made.
    now = T0 + 60_000;
    const freed = await get('/v1/modules', bearer(user.liveKey));
    expect(freed.statusCode).toBe(200);
    expect(freed.headers['ratelimit-remaining']).toBe('0');
    // 50 ms until the next slot: Retry-After rounds up, never to 0.
    expectRateLimited(await get('/v1/modules', bearer(user.liveKey)), 1);
  });
});

describe('lookup limit: 300 per minute per key, counted against the user too', () => {
  it('a key that used up its lookups is refused while another key of the user still looks up; the refusal spends no user quota', async () => {
    const user = await createTestAccount(t.db);
    const secondLive = (await issueKey(t.db, user.userId, 'live')).key;
    now = T0;
    const lookups = await Promise.all(Array.from({ length: 300 }, () => get(`/v2/lookup?sha256=${SHA}`, bearer(user.liveKey))));
    expect(lookups.map((r) => r.statusCode)).toEqual(Array(300).fill(200));
    expect(lookups[0]!.headers['ratelimit-policy']).toBe('600;w=60, 300;w=60');

    now = T0 + 1_000;
    const refused = await get(`/v2/lookup?sha256=${SHA}`, bearer(user.liveKey));
    expect(expectRateLimited(refused, 59)).toBe('Rate limit exceeded: 300 lookup requests per minute per API key. Retry in 59 s.');
    expect(refused.headers['ratelimit-limit']).toBe('300');

    const otherKey = await get(`/v2/lookup?sha256=${SHA}`, bearer(secondLive));
    expect(otherKey.statusCode).toBe(200);
    expect(otherKey.json()).toMatchObject({ object: 'lookup', results: { [SHA]: { matchType: 'none' } } });
    expect(otherKey.headers['ratelimit-remaining']).toBe('299');

    // 300 + 1 lookups counted for the user; the refused one is not among them.
    const elsewhere = await get('/v1/modules', bearer(user.liveKey));
    expect(elsewhere.statusCode).toBe(200);
    expect(elsewhere.headers).toMatchObject({ 'ratelimit-limit': '600', 'ratelimit-remaining': '298', 'ratelimit-policy': '600;w=60' });
  });
});

describe('anonymous sandbox key: 2 per minute and 10 per day per client IP', () => {
  it('the 3rd request in a minute is refused until the first is a minute old', async () => {
    const ip = '198.51.100.70';
    now = T0;
    const first = await anon(ip);
    expect(first.statusCode).toBe(200);
    expect(first.headers).toMatchObject({ 'ratelimit-limit': '2', 'ratelimit-remaining': '1', 'ratelimit-reset': '60', 'ratelimit-policy': '2;w=60, 10;w=86400' });
    now = T0 + 1_000;
    expect((await anon(ip)).statusCode).toBe(200);
    now = T0 + 2_000;
    expect(expectRateLimited(await anon(ip), 58)).toMatch(/^Rate limit exceeded: 2 requests per minute per IP address with the anonymous sandbox key\./);
    now = T0 + 60_000;
    expect((await anon(ip)).statusCode).toBe(200);
  });

  it('the 11th request in a day is refused until the first is a day old', async () => {
    const ip = '198.51.100.71';
    for (let m = 0; m < 5; m++) {
      for (const s of [0, 1_000]) {
        now = T0 + m * 60_000 + s;
        expect((await anon(ip)).statusCode, `minute ${m}`).toBe(200);
      }
    }
    now = T0 + 5 * 60_000;
    const refused = await anon(ip);
    expect(expectRateLimited(refused, 86_400 - 300)).toMatch(/10 requests per day per IP address/);
    expect(refused.headers['ratelimit-limit']).toBe('10');
    now = T0 + 86_400_000;
    expect((await anon(ip)).statusCode).toBe(200);
  });

  it('X-Forwarded-For from an untrusted peer is ignored: the spoofer shares its socket address bucket', async () => {
    now = T0;
    const spoofer = '192.0.2.50';
    expect((await anon(spoofer, { 'x-forwarded-for': '198.51.100.1' })).statusCode).toBe(200);
    expect((await anon(spoofer, { 'x-forwarded-for': '198.51.100.2' })).statusCode).toBe(200);
    expectRateLimited(await anon(spoofer, { 'x-forwarded-for': '198.51.100.3' }), 60);
    expectRateLimited(await anon(spoofer), 60);
    // Nor did the spoofed addresses' own buckets move.
    expect((await anon('198.51.100.1')).headers['ratelimit-remaining']).toBe('1');
  });

  it('from a trusted proxy, the client address in X-Forwarded-For is the bucket', async () => {
    now = T0;
    const proxy = '10.0.0.5';
    const via = (xff: string) => anon(proxy, { 'x-forwarded-for': xff });
    expect((await via('6.6.6.6, 198.51.100.40')).statusCode).toBe(200);
    expect((await via('7.7.7.7, 198.51.100.40')).statusCode).toBe(200);
    expectRateLimited(await via('198.51.100.40'), 60);
    // Another client behind the same proxy has its own bucket, and so does the proxy.
    expect((await via('198.51.100.41')).statusCode).toBe(200);
    expect((await anon(proxy)).headers['ratelimit-remaining']).toBe('1');
  });

  it('IPv6 clients are bucketed by /64', async () => {
    now = T0;
    expect((await anon('2001:db8:77:1::1')).statusCode).toBe(200);
    expect((await anon('2001:db8:77:1:ffff:ffff:ffff:2')).statusCode).toBe(200);
    expectRateLimited(await anon('2001:db8:77:1:abcd::3'), 60);
    expect((await anon('2001:db8:77:2::1')).statusCode).toBe(200);
  });

  it('the limit is decided before the body is read, and its headers stay on other errors', async () => {
    now = T0;
    const ip = '198.51.100.72';
    const invalid = await get('/v2/lookup?sha256=XYZ', bearer(ANONYMOUS_SANDBOX_KEY), ip);
    expect(invalid.statusCode).toBe(400);
    expect(expectEnvelope(invalid.json()).code).toBe('VALIDATION_FAILED');
    expect(invalid.headers).toMatchObject({ 'ratelimit-limit': '2', 'ratelimit-remaining': '1' });
    await anon(ip);
    const malformed = await t.app.inject({
      method: 'POST',
      url: '/v2/lookup',
      headers: { ...bearer(ANONYMOUS_SANDBOX_KEY), 'content-type': 'application/json' },
      payload: '{ not json',
      remoteAddress: ip,
    });
    expectRateLimited(malformed, 60);
  });
});

describe('what is not limited', () => {
  it('unauthenticated routes and internal-secret calls, even from an address that is over its limit', async () => {
    now = T0;
    const ip = '198.51.100.73';
    await anon(ip);
    await anon(ip);
    expect((await anon(ip)).statusCode).toBe(429);
    const user = await createTestAccount(t.db);
    for (const url of ['/v1/health', '/v1/llms.txt', '/v1/openapi.json', `/v1/usage?userId=${user.userId}`]) {
      for (let i = 0; i < 3; i++) {
        const res = await get(url, { 'x-internal-secret': INTERNAL_SECRET }, ip);
        expect(res.statusCode, url).toBe(200);
        expect(res.headers['ratelimit-limit'], url).toBeUndefined();
      }
    }
  });
});

describe('failed-authentication guard: 300 failures per 10 minutes per IP', () => {
  it('refuses further key checks from that address with 429, but not keys already known, nor other addresses', async () => {
    now = T0;
    const ip = '192.0.2.99';
    const known = await createTestAccount(t.db);
    expect((await get('/v1/modules', bearer(known.liveKey), '192.0.2.98')).statusCode).toBe(200);

    for (let batch = 0; batch < 6; batch++) {
      const failures = await Promise.all(Array.from({ length: 50 }, () => get('/v1/modules', bearer('nope'), ip)));
      expect(failures.map((r) => r.statusCode)).toEqual(Array(50).fill(401));
    }
    const blocked = await get('/v1/modules', bearer(generateKey('live')), ip);
    expect(expectRateLimited(blocked, 600)).toBe('Rate limit exceeded: 300 failed authentications per 10 minutes per IP address. Retry in 600 s.');
    // A valid key this process has not seen yet is refused too (the price of a shared address)...
    const fresh = await createTestAccount(t.db);
    expect((await get('/v1/modules', bearer(fresh.liveKey), ip)).statusCode).toBe(429);
    // ...while keys already in the key cache and the anonymous key cannot fail, so they pass.
    expect((await get('/v1/modules', bearer(known.liveKey), ip)).statusCode).toBe(200);
    expect((await anon(ip)).statusCode).toBe(200);
    expect((await get('/v1/modules', bearer('nope'), '192.0.2.100')).statusCode).toBe(401);

    now = T0 + 600_000;
    expect((await get('/v1/modules', bearer('nope'), ip)).statusCode).toBe(401);
    expect((await get('/v1/modules', bearer(fresh.liveKey), ip)).statusCode).toBe(200);
  });
});
