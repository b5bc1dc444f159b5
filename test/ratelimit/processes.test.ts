import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ANONYMOUS_SANDBOX_KEY } from '../../auth/keys.ts';
import { issueKey } from '../../auth/repository.ts';
import type { Config } from '../../core/config.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { freePort } from '../../tools/scripts/temporal.ts';
import { testConfig } from '../harness/env.ts';
import { bearer, createTestAccount, expectEnvelope, INTERNAL_SECRET } from '../helpers/app.ts';
import { serviceEnv, spawnService, stopGracefully } from '../helpers/processes.ts';
import { inPool } from '../hostile/support/pool.ts';
import { LOADED_MACHINE_REDIS_MS } from '../helpers/deps.ts';

// Four real API processes (node --import tsx api/server.ts) against one Redis, on the real clock:
// the limits hold across processes because they live in Redis. Each process listens dual-stack and
// trusts ::1 as its proxy, so a request over [::1] is "from the proxy" (X-Forwarded-For honoured)
// and one over 127.0.0.1 is from an untrusted peer (X-Forwarded-For ignored).

const PROCESSES = 4;
const config: Config = testConfig({ INTERNAL_SECRET, TRUSTED_PROXIES: '::1' });
const SHA = 'cd'.repeat(32);

interface ApiProcess {
  child: ChildProcess;
  port: number;
  output: () => string;
}
const apis: ApiProcess[] = [];
let db: Db;
let redis: ReturnType<typeof createClient>;

function spawnApi(port: number): ApiProcess {
  // What is tested is the counting across processes, not the fail-open timeout (fail-open.test.ts):
  // on a loaded machine a check can wait past the 500 ms default and go through unlimited.
  const api = spawnService('api/server.ts', serviceEnv(config, { LOG_LEVEL: 'warn', HOST: '::', PORT: port, TRUSTED_PROXIES: config.TRUSTED_PROXIES, RATE_LIMIT_TIMEOUT_MS: LOADED_MACHINE_REDIS_MS }));
  return { child: api.child, port, output: api.output };
}

/** Resolves when /v1/health answers 200; fails at once, with the process's output, if it exits first. */
async function waitUntilHealthy(api: ApiProcess): Promise<void> {
  const exited = once(api.child, 'exit').then(() => {
    throw new Error(`API process on port ${api.port} exited before it was healthy:\n${api.output()}`);
  });
  const healthy = vi.waitFor(
    async () => {
      const res = await fetch(`http://127.0.0.1:${api.port}/v1/health`);
      if (res.status !== 200) throw new Error(`health: ${res.status}`);
    },
    { timeout: 150_000, interval: 200 },
  );
  await Promise.race([healthy, exited]);
  exited.catch(() => {});
}

beforeAll(async () => {
  db = createPool(config.DATABASE_URL, { max: 4 });
  redis = createClient({ url: config.REDIS_URL });
  await redis.connect();
  const ports = new Set<number>();
  while (ports.size < PROCESSES) ports.add(await freePort());
  for (const port of ports) apis.push(spawnApi(port));
  await Promise.all(apis.map(waitUntilHealthy));
}, 180_000);

afterAll(async () => {
  await Promise.all(apis.map(({ child }) => stopGracefully(child, 10_000)));
  redis?.destroy();
  await db?.end();
});

interface Sent {
  status: number;
  headers: Headers;
  body: unknown;
}

async function send(i: number, path: string, headers: Record<string, string>, host = '127.0.0.1'): Promise<Sent> {
  const api = apis[i % PROCESSES]!;
  const res = await fetch(`http://${host}:${api.port}${path}`, { headers });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

/** `count` requests, request i to process i % 4, at most `concurrency` in flight. */
function sendMany(count: number, request: (i: number) => Promise<Sent>, concurrency = 32): Promise<Sent[]> {
  return inPool(Array.from({ length: count }, (_, i) => i), concurrency, request);
}

const statuses = (results: Sent[]) => results.reduce<Record<number, number>>((acc, r) => ({ ...acc, [r.status]: (acc[r.status] ?? 0) + 1 }), {});

function expectRefusal(r: Sent, message: RegExp): void {
  expect(r.status).toBe(429);
  const error = expectEnvelope(r.body);
  expect(error).toMatchObject({ code: 'RATE_LIMITED', retryable: true });
  expect(error.message).toMatch(message);
  const retryAfter = Number(r.headers.get('retry-after'));
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  expect(r.headers.get('ratelimit-remaining')).toBe('0');
  expect(r.headers.get('ratelimit-reset')).toBe(String(retryAfter));
}

describe(`${PROCESSES} API processes, one Redis`, () => {
  it('600 requests per minute per user: of 650 sent round-robin, exactly 600 succeed; the 601st gets 429 everywhere', async () => {
    const user = await createTestAccount(db);
    const secondLive = (await issueKey(db, user.userId, 'live')).key;
    const results = await sendMany(650, (i) => send(i, '/v1/modules', bearer(i % 2 === 0 ? user.liveKey : secondLive)));
    expect(statuses(results)).toEqual({ 200: 600, 429: 50 });
    for (const r of results.filter((x) => x.status === 429)) expectRefusal(r, /^Rate limit exceeded: 600 requests per minute per user\. Retry in \d+ s\.$/);
    for (let i = 0; i < PROCESSES; i++) expectRefusal(await send(i, '/v1/modules', bearer(user.liveKey)), /600 requests per minute per user/);
    // Counted once each, refusals not at all; and no process let a request through unchecked.
    expect(await redis.zCard(`${config.REDIS_PREFIX}rl:{u:${user.userId}}:all`)).toBe(600);
    for (const api of apis) expect(api.output()).not.toContain('NOT rate-limited');
  });

  it('300 lookups per minute per key: a second key of the same user has its own 300, both count against the user', async () => {
    const user = await createTestAccount(db);
    const secondLive = (await issueKey(db, user.userId, 'live')).key;
    const lookup = `/v2/lookup?sha256=${SHA}`;
    const first = await sendMany(320, (i) => send(i, lookup, bearer(user.liveKey)));
    expect(statuses(first)).toEqual({ 200: 300, 429: 20 });
    for (const r of first.filter((x) => x.status === 429)) expectRefusal(r, /300 lookup requests per minute per API key/);
    expect(first.find((r) => r.status === 200)!.body).toMatchObject({ object: 'lookup', results: { [SHA]: { matchType: 'none' } } });

    // The 20 refused lookups spent nothing: the other key still gets all of its 300, which brings
    // the user to exactly 600.
    const second = await sendMany(310, (i) => send(i, lookup, bearer(secondLive)));
    expect(statuses(second)).toEqual({ 200: 300, 429: 10 });
    expectRefusal(await send(1, '/v1/modules', bearer(user.liveKey)), /600 requests per minute per user/);
  });

  it('anonymous sandbox key: the 3rd request in a minute from one client IP is refused, whichever process gets it', async () => {
    const viaProxy = (i: number, client: string) => send(i, '/v1/modules', { ...bearer(ANONYMOUS_SANDBOX_KEY), 'x-forwarded-for': client }, '[::1]');
    expect((await viaProxy(0, '203.0.113.50')).status).toBe(200);
    expect((await viaProxy(1, '203.0.113.50')).status).toBe(200);
    expectRefusal(await viaProxy(2, '203.0.113.50'), /2 requests per minute per IP address/);
    expect((await viaProxy(3, '203.0.113.51')).status).toBe(200);
    // IPv6 clients by /64: a new address in the same /64 is the same client.
    expect((await viaProxy(0, '2001:db8:5:6::1')).status).toBe(200);
    expect((await viaProxy(1, '2001:db8:5:6::2')).status).toBe(200);
    expectRefusal(await viaProxy(2, '2001:db8:5:6:ffff::3'), /2 requests per minute per IP address/);
    expect((await viaProxy(3, '2001:db8:5:7::1')).status).toBe(200);
  });

  it('a spoofed X-Forwarded-For from an untrusted peer is ignored: the spoofer stays in its own socket address bucket', async () => {
    const spoofed = (i: number, client: string) => send(i, '/v1/modules', { ...bearer(ANONYMOUS_SANDBOX_KEY), 'x-forwarded-for': client }, '127.0.0.1');
    expect((await spoofed(0, '198.51.100.60')).status).toBe(200);
    expect((await spoofed(1, '198.51.100.61')).status).toBe(200);
    expectRefusal(await spoofed(2, '198.51.100.62'), /2 requests per minute per IP address/);
    expect(await redis.zCard(`${config.REDIS_PREFIX}rl:{ip:127.0.0.1}:anon:m`)).toBe(2);
    expect(await redis.exists(`${config.REDIS_PREFIX}rl:{ip:198.51.100.60}:anon:m`)).toBe(0);
  });
});
