import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { ENRICH_CONCURRENCY, ENRICH_QUEUE, enrichLimiter } from '../../enrich/service.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * The bytes of large bodies one API process holds at once are bounded (BODY_BYTES_IN_FLIGHT).
 * Before: every upload up to MAX_BODY_BYTES was read onto the heap whatever else was in flight,
 * so ~20 concurrent 90 MB uploads were estimated to crash the process. Reduced here to a 2.5 MiB
 * budget and ~1.5 MB bodies; the full-size storm (20 × 90 MB) is bench/upload-storm.ts.
 */
const MiB = 1024 * 1024;
let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline({ config: { BODY_BYTES_IN_FLIGHT: 2.5 * MiB, MAX_BODY_BYTES: 2.5 * MiB } });
}, 120_000);
afterAll(async () => {
  await p?.close();
});

/** A valid analyze body of about 1.5 MB: a real photo, padded with JSON white space. */
const bigBody = (image: string, modules: string[]) => `{"imageBase64":"${image}","modules":${JSON.stringify(modules)}${' '.repeat(1.5 * MiB)}}`;
const post = (key: string, payload: string) =>
  p.app.inject({ method: 'POST', url: '/v1/analyze', headers: { ...bearer(key), 'content-type': 'application/json' }, payload });

describe('large bodies in flight are bounded', () => {
  it('beyond the budget: 503 with Retry-After before reading, health answers, the admitted upload completes, then the budget is free again', async () => {
    const a = await createTestAccount(p.db, { community: 5 });
    const b = await createTestAccount(p.db, { community: 5 });
    p.sim.setBehaviour('openai', { latencyMs: 1500 });
    const first = post(a.liveKey, bigBody(photoBase64('Canon_40D.jpg'), ['dating']));
    // The first upload is read and its vendor call is under way: it holds 1.5 MB of the budget.
    await expect.poll(() => p.sim.stats().openai.calls, { timeout: 20_000 }).toBeGreaterThanOrEqual(1);

    const refused = await post(b.liveKey, bigBody(photoBase64('Nikon_D70.jpg'), ['dating']));
    expect(refused.statusCode, refused.body).toBe(503);
    const err = expectEnvelope(refused.json());
    expect(err.code).toBe('SERVICE_UNAVAILABLE');
    expect(err.retryable).toBe(true);
    expect(refused.headers['retry-after']).toBe('2');
    const health = await p.app.inject({ method: 'GET', url: '/v1/health' });
    expect(health.statusCode).toBe(200);

    expect((await first).statusCode).toBe(200);
    p.sim.reset();
    const again = await post(b.liveKey, bigBody(photoBase64('Nikon_D70.jpg'), ['dating']));
    expect(again.statusCode, again.body).toBe(200);
    // The refused upload moved nothing: b paid once, for the retry.
    expect(await getBalance(p.db, b.userId)).toMatchObject({ community: 4, reserved: 0 });
  }, 60_000);

  it('small bodies are not counted against it', async () => {
    const a = await createTestAccount(p.db, { community: 5 });
    p.sim.setBehaviour('openai', { latencyMs: 1500 });
    const first = post(a.liveKey, bigBody(photoBase64('Pentax_K10D.jpg'), ['dating']));
    await expect.poll(() => p.sim.stats().openai.calls, { timeout: 20_000 }).toBeGreaterThanOrEqual(1);
    const small = await p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(a.liveKey), payload: { imageBase64: photoBase64('xmp-BlueSquare.jpg'), modules: ['describe'] } });
    expect(small.statusCode, small.body).toBe(200);
    expect((await first).statusCode).toBe(200);
    p.sim.reset();
  }, 60_000);
});

describe('the enrichment queue is bounded', () => {
  it('refuses a waiter beyond its 4 running and 16 waiting with 503 SERVICE_UNAVAILABLE', async () => {
    expect([ENRICH_CONCURRENCY, ENRICH_QUEUE]).toEqual([4, 16]);
    const limiter = enrichLimiter();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const running = Array.from({ length: ENRICH_CONCURRENCY }, () => limiter.run(() => gate));
    const waiting = Array.from({ length: ENRICH_QUEUE }, (_, i) => limiter.run(async () => i));
    await expect(limiter.run(async () => 'one too many')).rejects.toMatchObject({ code: 'SERVICE_UNAVAILABLE', headers: { 'retry-after': '2' } });
    release();
    await Promise.all(running);
    expect(await Promise.all(waiting)).toEqual([...Array(ENRICH_QUEUE).keys()]);
  });
});
