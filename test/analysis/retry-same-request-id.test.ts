import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { bearer, createTestUser } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

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
    const user = await createTestUser(p.db, { community: 20 });
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
    const user = await createTestUser(p.db, { community: 5 });
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
