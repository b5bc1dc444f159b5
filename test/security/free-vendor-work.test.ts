import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Vendor work nobody pays for. Before: a key with 0 credits ran `quick-scan` (the free moderation
 * lens) with `refresh: true` as often as the rate limit allowed, each a real vendor call; and a
 * request whose vendor answers always fail (a schema the answer cannot fit) was released every
 * time, so a loop of them spent vendor tokens for free without end. Now: a request that bills
 * nothing needs 1 available credit (not charged), and unbilled vendor calls (free lenses, failed
 * runs) are capped per account per UTC day (FREE_VENDOR_CALLS_PER_DAY; 3 here), 429 beyond.
 */
const CAP = 3;
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline({ config: { FREE_VENDOR_CALLS_PER_DAY: CAP } });
}, 120_000);
afterAll(async () => {
  await p?.close();
});

const send = (key: string, payload: Record<string, unknown>) =>
  p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload });
const vendorCalls = () => Object.values(p.sim.stats()).reduce((n, s) => n + s.calls, 0);
const photos = [photoBase64('Canon_40D.jpg'), photoBase64('Nikon_D70.jpg'), photoBase64('Pentax_K10D.jpg'), photoBase64('xmp-BlueSquare.jpg')];

describe('vendor work nobody pays for', () => {
  it('a 0-credit key gets 402 for a request that bills nothing, before any vendor call', async () => {
    const user = await createTestAccount(p.db, { community: 0 });
    const calls = vendorCalls();
    const res = await send(user.liveKey, { imageBase64: photos[0], preset: 'quick-scan', refresh: true });
    expect(res.statusCode, res.body).toBe(402);
    const err = expectEnvelope(res.json());
    expect(err.code).toBe('PLAN_LIMIT_EXCEEDED');
    expect(err.credits).toEqual({ needed: 1, community: 0, purchased: 0, total: 0, resetsInDays: 0 });
    expect(res.headers['cache-control']).toBe('no-store, private');
    expect(vendorCalls()).toBe(calls);
    const rows = await p.db.query('SELECT 1 FROM photos WHERE user_id = $1', [user.userId]);
    expect(rows.rowCount).toBe(0);
  });

  it('with 1 credit the free lens runs uncharged, until the daily cap: then 429 with Retry-After and no vendor call', async () => {
    p.sim.reset();
    const user = await createTestAccount(p.db, { community: 1 });
    for (let i = 0; i < CAP; i++) {
      const ok = await send(user.liveKey, { imageBase64: photos[i], preset: 'quick-scan', refresh: true });
      expect(ok.statusCode, ok.body).toBe(200);
      expect(ok.json().usage.creditsCharged).toBe(0);
    }
    const calls = vendorCalls();
    const refused = await send(user.liveKey, { imageBase64: photos[3], preset: 'quick-scan', refresh: true });
    expect(refused.statusCode, refused.body).toBe(429);
    expect(expectEnvelope(refused.json()).code).toBe('RATE_LIMITED');
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(24 * 3600);
    expect(vendorCalls()).toBe(calls);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 1, reserved: 0 });
  });

  it('a loop of requests whose vendor answers always fail stops within a bounded number of vendor calls', async () => {
    p.sim.reset();
    for (const v of ['openai', 'anthropic', 'google'] as const) p.sim.setBehaviour(v, { failRate: 1, failure: 'schema-invalid' });
    const user = await createTestAccount(p.db, { community: 100 });
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await send(user.liveKey, { imageBase64: photos[i % photos.length], modules: ['describe'], refresh: true });
      statuses.push(res.statusCode);
    }
    // The first failing run spends 3 calls (one per vendor) and reaches the cap; every later one is refused before a vendor call.
    expect(statuses[0]).toBe(502);
    expect(statuses.slice(1).every((s) => s === 429)).toBe(true);
    expect(vendorCalls()).toBeLessThanOrEqual(CAP + 3);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 100, reserved: 0 });
    p.sim.reset();
  }, 60_000);
});
