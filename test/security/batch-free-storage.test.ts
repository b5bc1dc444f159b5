import { createHash, randomBytes, randomInt } from 'node:crypto';
import { utimes } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.ts';
import { KeyCache } from '../../auth/cache.ts';
import { checkInvariants, getBalance, grant } from '../../credits/ledger.ts';
import { FsBlobStore, type BlobStore } from '../../images/blobstore.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { collectBlobs } from '../../worker/blob-collector.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { testConfig } from '../harness/env.ts';
import { createApiMetrics } from '../../metrics/api.ts';
import { noRateLimits } from '../helpers/deps.ts';

/**
 * Free storage and free intake through batches (issue 21, item 2). Before: a workspace with 0
 * credits submitted batches that were taken in whole — every photo decoded and kept in the blob
 * store — and paused for credits at once; a cancelled batch kept its photos pending, which the
 * blob collector counted as references, so their bytes were never deleted; a paused batch's
 * workflow waited forever; and a photo given by URL was fetched by the worker before any credit
 * was held for it. Now: a batch is taken in only when the balance covers its first item; a
 * cancelled or long-paused batch fails its pending photos and their bytes are collected; the worker
 * holds an item's credits before it fetches the item's URL.
 */

/** Counts what intake writes: a refused batch must write nothing. */
class CountingStore implements BlobStore {
  puts = 0;
  constructor(private readonly inner: FsBlobStore) {}
  put(sha256: string, bytes: Buffer) {
    this.puts += 1;
    return this.inner.put(sha256, bytes);
  }
  get(sha256: string) {
    return this.inner.get(sha256);
  }
  has(sha256: string) {
    return this.inner.has(sha256);
  }
  delete(sha256: string) {
    return this.inner.delete(sha256);
  }
  list() {
    return this.inner.list();
  }
}

/** A photo server on 127.0.0.2 (the worker's fetch policy lets it through): paths to bytes, requests counted. */
interface PhotoServer {
  origin: string;
  hits: Map<string, number>;
  serve(path: string, bytes: Buffer): void;
  close(): Promise<void>;
}
async function startPhotoServer(): Promise<PhotoServer> {
  const files = new Map<string, Buffer>();
  const hits = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const path = req.url ?? '/';
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const body = files.get(path);
    if (!body) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': body.length }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.2', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.2:${port}`,
    hits,
    serve: (path, bytes) => void files.set(path, bytes),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let p: Pipeline;
let store: CountingStore;
let blobs: FsBlobStore;
let photos: PhotoServer;
beforeAll(async () => {
  photos = await startPhotoServer();
  blobs = new FsBlobStore(testConfig().BLOB_DIR);
  store = new CountingStore(blobs);
  p = await startPipeline({
    // Only the worker may reach 127.0.0.2: a hit on the photo server is the worker's fetch.
    fetchPolicy: { allowAddress: (ip) => ip === '127.0.0.2', timeoutMs: 3000 },
    // The API keeps the production policy, over a blob store that counts intake's writes.
    deps: { fetchPolicy: PUBLIC_INTERNET, blobs: store },
  });
}, 120_000);
afterAll(async () => {
  await p?.close();
  await photos?.close();
});

/** A JPEG no other test stores: random size and colour, its own blob. */
async function freshJpeg(): Promise<Buffer> {
  const [r, g, b] = randomBytes(3);
  return sharp({ create: { width: 48 + randomInt(64), height: 32 + randomInt(64), channels: 3, background: { r: r!, g: g!, b: b! } } })
    .jpeg({ quality: 60 + randomInt(30) })
    .toBuffer();
}
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const submit = (key: string, payload: Record<string, unknown>, app = p.app) => app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(key), payload });
const batchOf = async (key: string, id: string) => (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}`, headers: bearer(key) })).json();
const itemsOf = async (key: string, id: string) =>
  (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}/items?limit=500`, headers: bearer(key) })).json().items as Array<{ index: number; status: string; sha256: string | null; error: { code: string; message: string } | null }>;
const until = (key: string, id: string, want: (b: { status: string; pauseReason: string | null }) => boolean, timeout = 60_000) =>
  expect.poll(async () => want(await batchOf(key, id)), { timeout, interval: 200 }).toBe(true);
const batchRows = async (accountId: string) => Number((await p.db.query<{ n: string }>('SELECT count(*) AS n FROM batches WHERE user_id = $1', [accountId])).rows[0]!.n);
const balanced = async (accountId: string) => expect(await checkInvariants(p.db, accountId)).toEqual([{ userId: accountId, ok: true, problems: [] }]);
/** Ages the blobs so a collector pass with a one-hour grace considers them (and no other test's). */
async function collectAged(jpegs: Buffer[]): Promise<void> {
  const old = new Date(Date.now() - 2 * 3600_000);
  for (const b of jpegs) if (await blobs.has(sha(b))) await utimes(blobs.pathOf(sha(b)), old, old);
  await collectBlobs(p.db, blobs, { graceMs: 3600_000 });
}

describe('a batch is taken in only when the balance pays for its first item', () => {
  it('0 credits: 3 photos, 2,000 photos, URLs and vehicles are 402 before any intake: no batch, no blob, no fetch', async () => {
    const user = await createTestAccount(p.db);
    const three = await Promise.all([freshJpeg(), freshJpeg(), freshJpeg()]);
    const putsBefore = store.puts;

    const res = await submit(user.liveKey, { items: three.map((b, i) => ({ base64: b.toString('base64'), name: `p${i}.jpg` })), modules: ['dating'] });
    expect(res.statusCode, res.body).toBe(402);
    const err = expectEnvelope(res.json());
    expect(err.code).toBe('PLAN_LIMIT_EXCEEDED');
    expect(err.credits).toEqual({ needed: 1, community: 0, purchased: 0, total: 0, resetsInDays: expect.any(Number) });
    expect(res.headers['cache-control']).toBe('no-store, private');

    // 2,000 items of one photo plus bytes that are no photo at all: refused before a decode.
    const many = await freshJpeg();
    const big = await submit(user.liveKey, {
      items: [...Array.from({ length: 2000 }, () => ({ base64: many.toString('base64') })), { base64: Buffer.from('not a photo').toString('base64') }],
      modules: ['dating'],
    });
    expect(big.statusCode, big.body.slice(0, 300)).toBe(402);

    // Photos by URL: nothing fetched, at submission or later.
    photos.serve('/zero.jpg', three[0]!);
    const urls = await submit(user.liveKey, { items: [{ url: `${photos.origin}/zero.jpg` }], modules: ['dating'] });
    expect(urls.statusCode, urls.body).toBe(402);

    // A vehicle batch: its report's one credit.
    const vehicles = await submit(user.liveKey, { vehicles: [{ items: [{ base64: three[1]!.toString('base64') }] }] });
    expect(vehicles.statusCode, vehicles.body).toBe(402);
    expect(expectEnvelope(vehicles.json()).credits).toMatchObject({ needed: 1, total: 0 });

    // Free lenses only still need the one credit any free vendor call asks to be available.
    const free = await submit(user.liveKey, { items: [{ base64: three[2]!.toString('base64') }], modules: ['moderation'] });
    expect(free.statusCode, free.body).toBe(402);

    expect(store.puts - putsBefore).toBe(0);
    for (const b of [...three, many]) expect(await blobs.has(sha(b))).toBe(false);
    expect(photos.hits.get('/zero.jpg') ?? 0).toBe(0);
    expect(await batchRows(user.userId)).toBe(0);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 0, purchased: 0, reserved: 0 });
    await balanced(user.userId);
  }, 60_000);

  it('the first item’s price is the bar: 1 credit takes in a 1-credit batch, not a 2-credit one; a resend of an admitted batch is not asked again', async () => {
    const user = await createTestAccount(p.db, { community: 1 });
    const img = await freshJpeg();
    const two = await submit(user.liveKey, { items: [{ base64: img.toString('base64') }], modules: ['dating', 'describe'] });
    expect(two.statusCode, two.body).toBe(402);
    expect(expectEnvelope(two.json()).credits).toMatchObject({ needed: 2, community: 1, total: 1 });
    expect(await blobs.has(sha(img))).toBe(false);

    const body = { items: [{ base64: img.toString('base64') }], modules: ['dating'] };
    const headers = { ...bearer(user.liveKey), 'x-request-id': `admit-${randomBytes(6).toString('hex')}` };
    const one = await p.app.inject({ method: 'POST', url: '/v1/batches', headers, payload: body });
    expect(one.statusCode, one.body).toBe(202);
    await until(user.liveKey, one.json().id, (b) => b.status === 'completed');
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 0, reserved: 0 });
    // The balance is spent now, but the same submission resent under its id answers with its batch.
    const again = await p.app.inject({ method: 'POST', url: '/v1/batches', headers, payload: body });
    expect(again.statusCode, again.body).toBe(202);
    expect(again.json().id).toBe(one.json().id);
    await balanced(user.userId);
  }, 90_000);
});

describe('photos given by URL: nothing fetched that cannot be paid for', () => {
  it('with credits for one photo, the worker fetches one URL of three; the others wait unfetched; after a purchase each is fetched once', async () => {
    const user = await createTestAccount(p.db, { community: 1 });
    const jpegs = await Promise.all([freshJpeg(), freshJpeg(), freshJpeg()]);
    const tag = randomBytes(4).toString('hex');
    const paths = jpegs.map((b, i) => {
      photos.serve(`/${tag}-${i}.jpg`, b);
      return `/${tag}-${i}.jpg`;
    });
    const res = await submit(user.liveKey, { items: paths.map((path) => ({ url: `${photos.origin}${path}` })), modules: ['dating'] });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id;
    await until(user.liveKey, id, (b) => b.status === 'paused' && b.pauseReason === 'credits');
    expect((await batchOf(user.liveKey, id)).counts).toMatchObject({ done: 1, pending: 2, failed: 0 });
    const fetched = paths.map((path) => photos.hits.get(path) ?? 0);
    expect(fetched.reduce((a, b) => a + b, 0)).toBe(1);
    const stored = await Promise.all(jpegs.map((b) => blobs.has(sha(b))));
    expect(stored.filter(Boolean)).toHaveLength(1);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 0, reserved: 0 });
    await balanced(user.userId);

    await grant(p.db, { accountId: user.userId, pool: 'purchased', amount: 5, idempotencyKey: `buy-${id}`, kind: 'purchase' });
    expect((await p.app.inject({ method: 'POST', url: `/v1/batches/${id}/resume`, headers: bearer(user.liveKey) })).statusCode).toBe(202);
    await until(user.liveKey, id, (b) => b.status === 'completed');
    expect((await batchOf(user.liveKey, id)).counts).toEqual({ total: 3, done: 3, failed: 0, pending: 0 });
    expect(paths.map((path) => photos.hits.get(path))).toEqual([1, 1, 1]);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 0, purchased: 3, reserved: 0 });
    await balanced(user.userId);
  }, 120_000);

  it('vehicles too: with credits for one report, one vehicle’s photos are fetched; the other’s wait unfetched', async () => {
    const user = await createTestAccount(p.db, { community: 1 });
    const tag = randomBytes(4).toString('hex');
    const jpegs = await Promise.all([freshJpeg(), freshJpeg()]);
    jpegs.forEach((b, i) => photos.serve(`/${tag}-car${i}.jpg`, b));
    const res = await submit(user.liveKey, { vehicles: jpegs.map((_, i) => ({ name: `car ${i}`, items: [{ url: `${photos.origin}/${tag}-car${i}.jpg` }] })) });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id;
    await until(user.liveKey, id, (b) => b.status === 'paused' && b.pauseReason === 'credits');
    expect((await batchOf(user.liveKey, id)).counts).toMatchObject({ done: 1, pending: 1, failed: 0 });
    expect([0, 1].map((i) => photos.hits.get(`/${tag}-car${i}.jpg`) ?? 0).reduce((a, b) => a + b, 0)).toBe(1);
    expect((await Promise.all(jpegs.map((b) => blobs.has(sha(b))))).filter(Boolean)).toHaveLength(1);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 0, reserved: 0 });
    await balanced(user.userId);
  }, 90_000);

  it('a URL that cannot be fetched gives its held credits back', async () => {
    const user = await createTestAccount(p.db, { community: 2 });
    const res = await submit(user.liveKey, { items: [{ url: `${photos.origin}/missing-${randomBytes(4).toString('hex')}.jpg` }], modules: ['dating', 'describe'] });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id;
    await until(user.liveKey, id, (b) => b.status === 'completed');
    expect((await itemsOf(user.liveKey, id))[0]).toMatchObject({ status: 'failed' });
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 2, reserved: 0 });
    // The price was held before the fetch (so a balance back at 2 proves a give-back, not that
    // nothing was ever held): the item's one reservation exists, and ended released, not settled.
    const held = await p.db.query<{ id: string; amount: number; status: string; settled_amount: number | null; kinds: string[] }>(
      `SELECT r.id, r.amount, r.status, r.settled_amount,
              (SELECT array_agg(l.kind ORDER BY l.id) FROM credit_ledger l WHERE l.reservation_id = r.id) AS kinds
         FROM reservations r WHERE r.user_id = $1`,
      [user.userId],
    );
    expect(held.rows).toHaveLength(1);
    expect(held.rows[0]).toMatchObject({ amount: 2, status: 'released', settled_amount: null, kinds: ['reserve', 'release'] });
    expect(held.rows[0]!.id).toMatch(/^res:/);
    await balanced(user.userId);
  }, 90_000);
});

describe('bytes of photos that will not run are let go', () => {
  it('cancel fails the pending photos and the collector deletes their bytes; the photo that ran keeps its bytes', async () => {
    const user = await createTestAccount(p.db, { community: 1 });
    const jpegs = await Promise.all([freshJpeg(), freshJpeg(), freshJpeg(), freshJpeg()]);
    const res = await submit(user.liveKey, { items: jpegs.map((b) => ({ base64: b.toString('base64') })), modules: ['dating'] });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id;
    await until(user.liveKey, id, (b) => b.status === 'paused' && b.pauseReason === 'credits');
    // Paused, the pending photos' bytes are kept: the caller may buy credits and resume.
    await collectAged(jpegs);
    expect((await Promise.all(jpegs.map((b) => blobs.has(sha(b))))).every(Boolean)).toBe(true);

    expect((await p.app.inject({ method: 'POST', url: `/v1/batches/${id}/cancel`, headers: bearer(user.liveKey) })).statusCode).toBe(202);
    await until(user.liveKey, id, (b) => b.status === 'cancelled');
    const items = await itemsOf(user.liveKey, id);
    expect(items.map((i) => i.status).sort()).toEqual(['done', 'failed', 'failed', 'failed']);
    for (const it of items.filter((i) => i.status === 'failed')) expect(it.error).toMatchObject({ code: 'BATCH_FINISHED', message: expect.stringContaining('cancelled') });
    expect((await batchOf(user.liveKey, id)).counts).toEqual({ total: 4, done: 1, failed: 3, pending: 0 });

    await collectAged(jpegs);
    const ran = items.find((i) => i.status === 'done')!.sha256!;
    for (const b of jpegs) expect(await blobs.has(sha(b)), sha(b) === ran ? 'the photo that ran' : 'a photo that never ran').toBe(sha(b) === ran);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 0, reserved: 0 });
    await balanced(user.userId);
  }, 120_000);

  it('a batch paused longer than BATCH_PAUSED_EXPIRY_MS ends: cancelled, its pending photos failed as expired, its workflow completed, its bytes collected', async () => {
    // An API whose batches expire 4 s after they pause (the setting travels with each batch's workflow).
    const shortApp = await buildApp({ config: { ...p.config, BATCH_PAUSED_EXPIRY_MS: 4000 }, db: p.db, keyCache: new KeyCache(), blobs: store, temporal: p.temporal, fetchPolicy: PUBLIC_INTERNET, rateLimiter: noRateLimits, metrics: createApiMetrics() });
    await shortApp.ready();
    try {
      const user = await createTestAccount(p.db, { community: 1 });
      const jpegs = await Promise.all([freshJpeg(), freshJpeg(), freshJpeg()]);
      const res = await submit(user.liveKey, { items: jpegs.map((b) => ({ base64: b.toString('base64') })), modules: ['dating'] }, shortApp);
      expect(res.statusCode, res.body).toBe(202);
      const id = res.json().id;
      await until(user.liveKey, id, (b) => b.status === 'paused' && b.pauseReason === 'credits');
      await until(user.liveKey, id, (b) => b.status === 'cancelled', 60_000);
      const items = await itemsOf(user.liveKey, id);
      expect(items.filter((i) => i.status === 'failed')).toHaveLength(2);
      for (const it of items.filter((i) => i.status === 'failed')) expect(it.error).toMatchObject({ code: 'BATCH_FINISHED', message: expect.stringContaining('expired') });
      // The workflow marks the batch cancelled, then ends: its end is awaited, not assumed.
      const handle = p.temporal.workflow.getHandle(`batch:${user.userId}:${id}`);
      await handle.result();
      expect((await handle.describe()).status.name).toBe('COMPLETED');
      // Resume is refused now: the batch is over.
      expect((await p.app.inject({ method: 'POST', url: `/v1/batches/${id}/resume`, headers: bearer(user.liveKey) })).statusCode).toBe(409);

      await collectAged(jpegs);
      const ran = items.find((i) => i.status === 'done')!.sha256!;
      for (const b of jpegs) expect(await blobs.has(sha(b))).toBe(sha(b) === ran);
      expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 0, reserved: 0 });
      await balanced(user.userId);
    } finally {
      await shortApp.close();
    }
  }, 120_000);
});
