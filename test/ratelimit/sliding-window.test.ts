import { createHash, randomBytes } from 'node:crypto';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RateLimiter } from '../../ratelimit/limiter.ts';
import { SLIDING_WINDOW_LUA, slidingWindowScript, type ScriptBucket } from '../../ratelimit/script.ts';
import { testConfig } from '../harness/env.ts';
import { LOADED_MACHINE_REDIS_MS } from '../helpers/deps.ts';

// The script's semantics against the real Redis, with time as a parameter: every `now` below is
// chosen by the test, nothing waits for a clock.
const config = testConfig();
let now = 0;
let limiter: RateLimiter;
let redis: ReturnType<typeof createClient>;

beforeAll(async () => {
  limiter = await RateLimiter.connect(config.REDIS_URL, { clock: () => now, commandTimeoutMs: LOADED_MACHINE_REDIS_MS });
  redis = createClient({ url: config.REDIS_URL });
  await redis.connect();
});
afterAll(async () => {
  await limiter?.close();
  redis?.destroy();
});

const bucket = (limit: number, windowMs: number): ScriptBucket => ({
  key: `${config.REDIS_PREFIX}sw:${randomBytes(6).toString('hex')}`,
  limit,
  windowMs,
});

async function hitAt(t: number, buckets: ScriptBucket[], record = true) {
  now = t;
  return limiter.hit(buckets, { record });
}

describe('sliding-window script', () => {
  it('admits exactly `limit` requests per window and refuses the next with the exact wait', async () => {
    const b = bucket(3, 1000);
    const T = 1_700_000_000_000;
    expect((await hitAt(T, [b])).buckets[0]).toMatchObject({ remaining: 2, resetMs: 1000 });
    expect((await hitAt(T + 100, [b])).buckets[0]).toMatchObject({ remaining: 1, resetMs: 900 });
    expect((await hitAt(T + 200, [b])).buckets[0]).toMatchObject({ remaining: 0, resetMs: 800 });

    const refused = await hitAt(T + 300, [b]);
    expect(refused).toMatchObject({ admitted: false, retryAfterMs: 700, now: T + 300 });
    expect(refused.buckets[0]).toMatchObject({ remaining: 0, resetMs: 700 });
    expect((await hitAt(T + 999, [b])).retryAfterMs).toBe(1);

    // The first request leaves the window at exactly T + 1000: one slot, taken at once.
    const again = await hitAt(T + 1000, [b]);
    expect(again).toMatchObject({ admitted: true, retryAfterMs: 0 });
    expect(again.buckets[0]).toMatchObject({ remaining: 0, resetMs: 100 });
    expect(await hitAt(T + 1000, [b])).toMatchObject({ admitted: false, retryAfterMs: 100 });
    expect(await redis.zCard(b.key)).toBe(3);
  });

  it('slides: a burst at the end of one minute is still counted at the start of the next', async () => {
    const b = bucket(3, 60_000);
    const T = 1_700_000_040_000;
    for (let i = 0; i < 3; i++) expect((await hitAt(T + 19_000 + i, [b])).admitted).toBe(true);
    // A fixed window would have reset at T + 20 000 and admitted 3 more.
    const refused = await hitAt(T + 20_000, [b]);
    expect(refused).toMatchObject({ admitted: false, retryAfterMs: 59_000 });
  });

  it('a refused request is recorded in no bucket, so it spends no other quota', async () => {
    const tight = bucket(2, 1000);
    const loose = bucket(5, 1000);
    const T = 1_700_000_100_000;
    await hitAt(T, [tight, loose]);
    await hitAt(T + 1, [tight, loose]);
    const refused = await hitAt(T + 2, [tight, loose]);
    expect(refused.admitted).toBe(false);
    expect(refused.tightest.bucket).toBe(tight);
    expect(refused.buckets.map((s) => s.remaining)).toEqual([0, 3]);
    expect(await redis.zCard(loose.key)).toBe(2);
    expect(await redis.zCard(tight.key)).toBe(2);
  });

  it('when several buckets refuse, the longest wait decides Retry-After', async () => {
    const minute = bucket(1, 60_000);
    const day = bucket(1, 86_400_000);
    const T = 1_700_000_200_000;
    expect((await hitAt(T, [minute, day])).admitted).toBe(true);
    const refused = await hitAt(T + 10, [minute, day]);
    expect(refused.retryAfterMs).toBe(86_400_000 - 10);
    expect(refused.tightest.bucket).toBe(day);
    // Once the minute is over only the day refuses, and still with its own wait.
    expect(await hitAt(T + 60_000, [minute, day])).toMatchObject({ admitted: false, retryAfterMs: 86_400_000 - 60_000 });
  });

  it('when admitted, the bucket closest to its limit is the one reported', async () => {
    const user = bucket(600, 60_000);
    const key = bucket(300, 60_000);
    const T = 1_700_000_300_000;
    const d = await hitAt(T, [user, key]);
    expect(d.tightest.bucket).toBe(key);
    expect(d.buckets.map((s) => s.remaining)).toEqual([599, 299]);
  });

  it('record: false only looks', async () => {
    const b = bucket(1, 1000);
    const T = 1_700_000_400_000;
    expect(await hitAt(T, [b], false)).toMatchObject({ admitted: true });
    expect(await redis.exists(b.key)).toBe(0);
    await hitAt(T, [b]);
    expect(await hitAt(T + 1, [b], false)).toMatchObject({ admitted: false, retryAfterMs: 999 });
    expect(await redis.zCard(b.key)).toBe(1);
  });

  it('keys live no longer than their window', async () => {
    const b = bucket(5, 90_000);
    await hitAt(1_700_000_500_000, [b]);
    const ttl = await redis.pTTL(b.key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(90_000);
  });

  it('concurrent callers on separate connections never admit more than the limit', async () => {
    const others = await Promise.all([1, 2, 3].map(() => RateLimiter.connect(config.REDIS_URL, { clock: () => 1_700_000_600_000, commandTimeoutMs: LOADED_MACHINE_REDIS_MS })));
    try {
      now = 1_700_000_600_000;
      const b = bucket(50, 60_000);
      const all = [limiter, ...others];
      const decisions = await Promise.all(Array.from({ length: 200 }, (_, i) => all[i % 4]!.hit([b])));
      expect(decisions.filter((d) => d.admitted)).toHaveLength(50);
      expect(await redis.zCard(b.key)).toBe(50);
    } finally {
      await Promise.all(others.map((o) => o.close()));
    }
  });

  it("without an injected clock it decides on the Redis server's clock", async () => {
    const serverClock = await RateLimiter.connect(config.REDIS_URL, { commandTimeoutMs: LOADED_MACHINE_REDIS_MS });
    try {
      const before = await redisMillis();
      const d = await serverClock.hit([bucket(1, 1000)]);
      const after = await redisMillis();
      expect(d.now).toBeGreaterThanOrEqual(before);
      expect(d.now).toBeLessThanOrEqual(after);
    } finally {
      await serverClock.close();
    }
  });

  it('is loaded with SCRIPT LOAD and called by its SHA1 (EVALSHA)', async () => {
    expect(slidingWindowScript.SHA1).toBe(createHash('sha1').update(SLIDING_WINDOW_LUA).digest('hex'));
    expect(await limiter.scriptLoaded()).toBe(true);
  });
});

async function redisMillis(): Promise<number> {
  const reply = (await redis.sendCommand(['TIME'])) as [string, string];
  return Number(reply[0]) * 1000 + Math.floor(Number(reply[1]) / 1000);
}
