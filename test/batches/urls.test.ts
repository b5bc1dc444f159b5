import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { isPublicAddress } from '../../images/ssrf.ts';
import { bearer, createTestAccount } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { startCanaryAndPublic, type Canary, type PublicServer } from '../images/servers.ts';

/**
 * Batch photos given by URL are fetched by the worker when their turn comes, under the same
 * address policy as analyze: 127.0.0.2 plays a public host; a redirect to 127.0.0.1 lands on the
 * canary, which must never see a connection.
 */
let p: Pipeline;
let canary: Canary;
let server: PublicServer;
beforeAll(async () => {
  ({ canary, server } = await startCanaryAndPublic(photoBytes('Canon_40D.jpg')));
  // Only the worker may reach 127.0.0.2: the API keeps the production policy, so a photo that
  // arrives was fetched by the worker.
  p = await startPipeline({
    worker: false,
    fetchPolicy: { allowAddress: (ip) => ip === '127.0.0.2' || isPublicAddress(ip), timeoutMs: 3000 },
    deps: { fetchPolicy: PUBLIC_INTERNET },
  });
  await p.startWorker();
}, 120_000);
afterAll(async () => {
  await p?.close();
  await server?.close();
  await canary?.close();
});

describe('a batch of URLs', () => {
  it('fetches each photo in the worker, not at submission; a missing one and a redirect to a private address fail alone', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/batches',
      headers: bearer(user.liveKey),
      payload: { modules: ['dating'], items: [{ url: `${server.origin}/image.jpg` }, { url: `${server.origin}/missing` }, { url: `${server.origin}/to-canary` }, { url: 'http://127.0.0.1/inside.jpg' }] },
    });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id;
    await expect
      .poll(async () => (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}`, headers: bearer(user.liveKey) })).json().status, { timeout: 60_000, interval: 200 })
      .toBe('completed');
    const items = (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}/items`, headers: bearer(user.liveKey) })).json().items as Array<{ status: string; error: { code: string } | null; sha256: string | null }>;
    expect(items.map((i) => i.status)).toEqual(['done', 'failed', 'failed', 'failed']);
    expect(items[0]!.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(items.slice(1).every((i) => i.error !== null)).toBe(true);
    expect(server.hits.get('/image.jpg')).toBe(1);
    expect(canary.connections()).toBe(0);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 9, reserved: 0 });
  });

  it('fetches a vehicle’s photos in the worker, keeps each one taken, and fails the vehicle naming the photo that could not be fetched', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const res = await p.app.inject({
      method: 'POST',
      url: '/v1/batches',
      headers: bearer(user.liveKey),
      payload: { vehicles: [{ name: 'van', items: [{ url: `${server.origin}/image.jpg`, name: 'front.jpg' }, { url: `${server.origin}/missing`, name: 'rear.jpg' }] }] },
    });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id;
    await expect
      .poll(async () => (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}`, headers: bearer(user.liveKey) })).json().status, { timeout: 60_000, interval: 200 })
      .toBe('completed');
    const [van] = (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}/items`, headers: bearer(user.liveKey) })).json().items;
    expect(van).toMatchObject({ source: 'van', status: 'failed', creditsCharged: 0 });
    expect(van.error.message).toMatch(/^photo 2 \(rear\.jpg\): /);
    // The photo that was fetched is kept with the vehicle: a retry fetches only the other.
    expect(van.photos[0]).toMatchObject({ source: 'front.jpg', sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(van.photos[1]).toEqual({ source: 'rear.jpg', sha256: null });
    expect(canary.connections()).toBe(0);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
  });
});
