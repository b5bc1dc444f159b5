import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { noRateLimits } from '../helpers/deps.ts';
import { buildApp } from '../../api/app.ts';
import { KeyCache } from '../../auth/cache.ts';
import { blobStoreFromConfig } from '../../images/blobstore-from-config.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { createApiMetrics } from '../../metrics/api.ts';

/**
 * A client whose answer was lost (connection reset, API restart, 5xx) sends the request again with
 * its x-request-id. Found by the chaos suite: once the first run had finished, the retry was a full
 * cache hit of the records that run had just paid for, answered "0 credits, cacheHit" although the
 * request cost credits. The retry must get the first run's answer and charge, billed once.
 */
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => {
  await p?.close();
});

const send = (key: string, requestId: string, payload: Record<string, unknown>) =>
  p.app.inject({ method: 'POST', url: '/v1/analyze', headers: { ...bearer(key), 'x-request-id': requestId }, payload });

describe('a finished request sent again with its x-request-id', () => {
  it('analyze: the first run\'s answer and charge, not a free cache hit; a new request id is the cache hit', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    const body = { imageBase64: photoBase64('gps-DSCN0010.jpg'), modules: ['dating', 'location'] };
    const first = await send(user.liveKey, 'req-retry-analyze-1', body);
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json().usage.creditsCharged).toBe(2);

    const again = await send(user.liveKey, 'req-retry-analyze-1', body);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().usage.creditsCharged).toBe(2);
    expect(again.json().meta.cacheHit).toBe(false);
    expect(again.json().output).toEqual(first.json().output);

    const other = await send(user.liveKey, 'req-retry-analyze-2', body);
    expect(other.json().usage.creditsCharged).toBe(0);
    expect(other.json().meta.cacheHit).toBe(true);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 18, reserved: 0 });
  });

  it('vehicle report: the first run\'s report and charge', async () => {
    const user = await createTestAccount(p.db, { community: 5 });
    const body = { images: [{ base64: photoBase64('gps-DSCN0012.jpg') }], preset: 'vehicle-condition' };
    const first = await send(user.liveKey, 'req-retry-vehicle-1', body);
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json().usage.creditsCharged).toBe(1);

    const again = await send(user.liveKey, 'req-retry-vehicle-1', body);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().usage.creditsCharged).toBe(1);
    expect(again.json().meta.cacheHit).toBe(false);
    expect(again.json().output.reportId).toBe(first.json().output.reportId);

    const other = await send(user.liveKey, 'req-retry-vehicle-2', body);
    expect(other.json().usage.creditsCharged).toBe(0);
    expect(other.json().meta.cacheHit).toBe(true);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 4, reserved: 0 });
  });
});

describe('a resend that arrives while the first run is still at the vendor', () => {
  it('is not a free cache hit when the first run records its lenses between the resend\'s two registry reads (seen in the chaos suite: told 0, ledger settled)', async () => {
    const user = await createTestAccount(p.db, { community: 20 });
    const image = photoBase64('Canon_40D.jpg');
    // The photo is in the registry already (another lens), so the resend's intake finds it there.
    expect((await send(user.liveKey, 'req-race-known', { imageBase64: image, modules: ['location'] })).statusCode).toBe(200);

    // A second API process on the same database, whose reads of the registry's photos wait while
    // `holding` (the test's stand-in for the moment between two queries).
    let release!: () => void;
    let held = false;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const heldDb = new Proxy(p.db, {
      get(target, prop, receiver) {
        if (prop !== 'query') return Reflect.get(target, prop, receiver) as unknown;
        return async (...args: Parameters<typeof target.query>) => {
          const text = typeof args[0] === 'string' ? args[0] : '';
          if (/FROM photos WHERE user_id = \$1 AND sha256 = ANY/.test(text) && !held) {
            held = true;
            await gate;
          }
          return (target.query as (...a: unknown[]) => Promise<unknown>)(...args);
        };
      },
    });
    const second = await buildApp({ config: p.config, db: heldDb, keyCache: new KeyCache(), blobs: blobStoreFromConfig(p.config), temporal: p.temporal, fetchPolicy: PUBLIC_INTERNET, rateLimiter: noRateLimits, metrics: createApiMetrics() });
    try {
      p.sim.setBehaviour('all', { latencyMs: 1500 });
      const calls = p.sim.stats().openai.calls;
      const body = { imageBase64: image, modules: ['dating'] };
      const first = send(user.liveKey, 'req-race-1', body);
      await expect.poll(() => p.sim.stats().openai.calls).toBeGreaterThan(calls);
      // The resend (same id) reaches the registry check while the first run is at the vendor.
      const resend = second.inject({ method: 'POST', url: '/v1/analyze', headers: { ...bearer(user.liveKey), 'x-request-id': 'req-race-1' }, payload: body });
      await expect.poll(() => held).toBe(true);
      const answered = await first;
      expect(answered.statusCode, answered.body).toBe(200);
      expect(answered.json().usage.creditsCharged).toBe(1);
      // Now the registry holds the lens that run paid for; the resend's read goes on.
      release();
      const again = await resend;
      expect(again.statusCode, again.body).toBe(200);
      expect(again.json().usage.creditsCharged).toBe(1);
      expect(again.json().meta.cacheHit).toBe(false);
      expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 18, reserved: 0 });
    } finally {
      p.sim.setBehaviour('all', { latencyMs: 0 });
      release();
      await second.close();
    }
  }, 60_000);
});
