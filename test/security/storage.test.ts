import { createHash } from 'node:crypto';
import { utimes } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../images/blobstore.ts';
import { createWorkerMetrics } from '../../metrics/worker.ts';
import { collectBlobs } from '../../worker/blob-collector.ts';
import { createBatch } from '../../batches/repository.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import sharp from 'sharp';

/**
 * No storage without payment. Before: every image was written to the blob store at intake, before
 * the 402 was known, and never deleted: a 0-credit key could fill the disk. Now: a request that
 * fails keeps no image it brought, and the worker's collector deletes blobs no registry holds once
 * they are older than BLOB_GC_GRACE_MS.
 */
let p: Pipeline;
let blobs: FsBlobStore;
beforeAll(async () => {
  p = await startPipeline();
  blobs = new FsBlobStore(p.config.BLOB_DIR);
}, 120_000);
afterAll(async () => {
  await p?.close();
});

/** A JPEG no other test stored: its own bytes, its own blob. */
async function freshJpeg(seed: number): Promise<Buffer> {
  return sharp({ create: { width: 64, height: 48, channels: 3, background: { r: seed % 256, g: (seed * 7) % 256, b: (seed * 13) % 256 } } })
    .jpeg()
    .toBuffer();
}
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const send = (key: string, payload: Record<string, unknown>) => p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload });

describe('no storage without payment', () => {
  it('a request refused for lack of credits keeps no blob', async () => {
    const user = await createTestAccount(p.db, { community: 0 });
    const img = await freshJpeg(1);
    const res = await send(user.liveKey, { imageBase64: img.toString('base64'), modules: ['dating'] });
    expect(res.statusCode, res.body).toBe(402);
    expect(expectEnvelope(res.json()).code).toBe('PLAN_LIMIT_EXCEEDED');
    expect(await blobs.has(sha(img))).toBe(false);
  });

  it('a request whose second image is invalid keeps neither image', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const good = await freshJpeg(2);
    const broken = photoBytes('Canon_40D.jpg').subarray(0, 2500);
    const res = await send(user.liveKey, { images: [{ base64: good.toString('base64') }, { base64: broken.toString('base64') }], modules: ['dating'] });
    expect(res.statusCode, res.body).toBe(422);
    expect(await blobs.has(sha(good))).toBe(false);
  });

  it('a request every vendor fails keeps no blob; a successful one keeps its blob', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const failed = await freshJpeg(3);
    for (const v of ['openai', 'anthropic', 'google'] as const) p.sim.setBehaviour(v, { failRate: 1, failure: 'http400' });
    const res = await send(user.liveKey, { imageBase64: failed.toString('base64'), modules: ['dating'] });
    p.sim.reset();
    expect(res.statusCode, res.body).toBe(502);
    expect(await blobs.has(sha(failed))).toBe(false);

    const kept = await freshJpeg(4);
    const ok = await send(user.liveKey, { imageBase64: kept.toString('base64'), modules: ['dating'] });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(await blobs.has(sha(kept))).toBe(true);
  }, 60_000);

  it('the collector deletes old blobs no registry holds, keeps referenced and recent ones, and counts them', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const referenced = await freshJpeg(5);
    const ok = await send(user.liveKey, { imageBase64: referenced.toString('base64'), modules: ['dating'] });
    expect(ok.statusCode, ok.body).toBe(200);
    const orphan = await freshJpeg(6);
    const recent = await freshJpeg(7);
    await blobs.put(sha(orphan), orphan);
    await blobs.put(sha(recent), recent);
    const hourAgo = new Date(Date.now() - 2 * 3600_000);
    for (const b of [referenced, orphan]) await utimes(blobs.pathOf(sha(b)), hourAgo, hourAgo);

    const metrics = createWorkerMetrics();
    const out = await collectBlobs(p.db, blobs, { graceMs: 3600_000, metrics });
    expect(await blobs.has(sha(orphan))).toBe(false);
    expect(await blobs.has(sha(referenced))).toBe(true);
    expect(await blobs.has(sha(recent))).toBe(true);
    expect(out.deleted).toBeGreaterThanOrEqual(1);
    expect(out.bytes).toBeGreaterThanOrEqual(orphan.length);
    const counted = (await metrics.registry.getSingleMetric('lenstack_blobs_collected_total')!.get()).values[0]!.value;
    expect(counted).toBe(out.deleted);
  });

  it('keeps the blobs of photos a batch has yet to analyze, alone or of a vehicle, and lets them go once they ran', async () => {
    const user = await createTestAccount(p.db, { community: 0 });
    const [single, front, rear] = await Promise.all([freshJpeg(8), freshJpeg(9), freshJpeg(10)]);
    const ref = (b: Buffer) => ({ sha256: sha(b), format: 'jpeg', width: 64, height: 48, pHash: '0'.repeat(16), dHash: '0'.repeat(16) });
    const spec = { stack: null, lenses: ['moderation'], billable: [] };
    const photos = await createBatch(p.db, { accountId: user.userId, kind: 'photos', spec, columns: null, items: [{ source: 'single.jpg', ref: ref(single) }] });
    const vehicles = await createBatch(p.db, {
      accountId: user.userId,
      kind: 'vehicles',
      spec,
      columns: null,
      // The rear photo's URL was not fetched yet: only the front one has an image to keep.
      items: [{ source: 'car', ref: null, photos: [{ source: 'front.jpg', ref: ref(front) }, { source: 'rear.jpg', url: 'https://example.com/rear.jpg' }] }],
    });
    const old = new Date(Date.now() - 2 * 3600_000);
    for (const b of [single, front, rear]) {
      await blobs.put(sha(b), b);
      await utimes(blobs.pathOf(sha(b)), old, old);
    }
    await collectBlobs(p.db, blobs, { graceMs: 3600_000 });
    expect(await blobs.has(sha(single))).toBe(true);
    expect(await blobs.has(sha(front))).toBe(true);
    expect(await blobs.has(sha(rear))).toBe(false);

    await p.db.query(`UPDATE batch_items SET status = 'failed', finished_at = now() WHERE batch_id = ANY($1)`, [[photos, vehicles]]);
    await collectBlobs(p.db, blobs, { graceMs: 3600_000 });
    expect(await blobs.has(sha(single))).toBe(false);
    expect(await blobs.has(sha(front))).toBe(false);
  });
});
