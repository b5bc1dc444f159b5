import { createHash } from 'node:crypto';
import zlib from 'node:zlib';
import sharp from 'sharp';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CORRUPT_IMAGE } from '../../core/errors.ts';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { blobStoreFromConfig } from '../../images/blobstore-from-config.ts';
import { fingerprint } from '../../images/fingerprint.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * The order of refusals since intake stopped decoding (docs/decisions.md, "Decoding after the
 * reservation"): the header probe (format, dimensions, pixel limit) still refuses before anything
 * is held; a photo whose header passes but whose pixels do not decode is refused 422 by the
 * worker's one decode, its reservation released at once, no vendor called, nothing billed or kept.
 * The hashes the worker makes are the ones lookup makes from the same bytes.
 */

let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => p?.close());
beforeEach(() => p.sim.reset());

const analyze = (key: string, body: Record<string, unknown>) => p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: body });
const vendorCalls = () => Object.values(p.sim.stats()).reduce((n, s) => n + s.calls, 0);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const reservations = async (accountId: string) =>
  (await p.db.query<{ status: string; amount: string }>('SELECT status, amount::text FROM reservations WHERE user_id = $1 ORDER BY created_at', [accountId])).rows;

describe('refusal order: header before the reservation, pixels after it', () => {
  it('a JPEG cut in half (its header is whole) is refused 422 by the worker: reservation released, no vendor call, nothing billed or kept', async () => {
    const user = await createTestAccount(p.db, { community: 40 });
    const whole = photoBytes('gps-DSCN0010.jpg');
    const cut = whole.subarray(0, Math.floor(whole.length / 2));
    // The header alone passes: this is the case intake no longer catches.
    expect((await sharp(cut).metadata()).width).toBeGreaterThan(0);

    const res = await analyze(user.liveKey, { imageBase64: cut.toString('base64'), preset: 'full-analysis' });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(422);
    const e = expectEnvelope(res.json());
    expect(e.code).toBe('IMAGE_INVALID');
    expect(e.message).toContain(CORRUPT_IMAGE);
    expect(e.retryable).toBe(false);

    // The reservation was made after the header passed, and released, never settled.
    expect(await reservations(user.userId)).toEqual([{ status: 'released', amount: '14' }]);
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 40, reserved: 0 });
    expect((await checkInvariants(p.db, user.userId))[0]!.ok).toBe(true);
    expect(vendorCalls()).toBe(0);
    expect((await p.db.query('SELECT 1 FROM photos WHERE user_id = $1', [user.userId])).rowCount).toBe(0);
    // The failed request keeps none of the bytes it brought.
    expect(await blobStoreFromConfig(p.config).has(sha(cut))).toBe(false);
  });

  it('a header over the pixel limit is still refused before anything is held', async () => {
    const user = await createTestAccount(p.db, { community: 40 });
    // A small PNG whose header declares 30,000 × 30,000 pixels (900 MP, over the 100 MP default).
    const bomb = Buffer.from(await sharp({ create: { width: 64, height: 64, channels: 3, background: { r: 0, g: 0, b: 0 } } }).png().toBuffer());
    bomb.writeUInt32BE(30_000, 16);
    bomb.writeUInt32BE(30_000, 20);
    bomb.writeUInt32BE(zlib.crc32(bomb.subarray(12, 29)), 29);
    const res = await analyze(user.liveKey, { imageBase64: bomb.toString('base64'), preset: 'full-analysis' });
    expect(res.statusCode).toBe(422);
    expect(expectEnvelope(res.json()).code).toBe('IMAGE_TOO_LARGE');
    expect(await reservations(user.userId)).toEqual([]);
    expect(vendorCalls()).toBe(0);
  });

  it("a new photo's hashes are made by the worker, equal to the fingerprint of its bytes and to what lookup finds", async () => {
    const user = await createTestAccount(p.db, { community: 40 });
    const bytes = photoBytes('Canon_40D.jpg');
    const expected = await fingerprint(bytes);
    const res = await analyze(user.liveKey, { imageBase64: bytes.toString('base64'), modules: ['dating'], options: { includeFingerprint: true } });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    expect(res.json().fingerprint).toEqual({ sha256: expected.sha256, pHash: expected.pHash, dHash: expected.dHash });
    const stored = await p.db.query<{ phash: string }>("SELECT lpad(to_hex(phash), 16, '0') AS phash FROM photos WHERE user_id = $1", [user.userId]);
    expect(stored.rows).toEqual([{ phash: expected.pHash }]);
    const found = await p.app.inject({ method: 'GET', url: `/v2/lookup?pHash=${expected.pHash}&threshold=0`, headers: bearer(user.liveKey) });
    expect(found.statusCode, found.body.slice(0, 300)).toBe(200);
    expect(JSON.stringify(found.json())).toContain(expected.sha256);
  });

  it('a multi-image request with one undecodable photo is refused whole: nothing billed for the good one either', async () => {
    const user = await createTestAccount(p.db, { community: 40 });
    const good = photoBytes('Nikon_D70.jpg');
    const whole = photoBytes('gps-DSCN0012.jpg');
    const cut = whole.subarray(0, Math.floor(whole.length * 0.6));
    const res = await analyze(user.liveKey, { images: [{ base64: good.toString('base64') }, { base64: cut.toString('base64') }], modules: ['dating'] });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(422);
    expect(expectEnvelope(res.json()).code).toBe('IMAGE_INVALID');
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 40, reserved: 0 });
    expect((await reservations(user.userId)).map((r) => r.status)).toEqual(['released']);
    expect((await p.db.query('SELECT 1 FROM photos WHERE user_id = $1', [user.userId])).rowCount).toBe(0);
    expect((await checkInvariants(p.db, user.userId))[0]!.ok).toBe(true);
  });

  it('a batch photo whose pixels do not decode fails as that item with its reason; its price goes back, the rest is billed', async () => {
    const user = await createTestAccount(p.db, { community: 40 });
    const whole = photoBytes('gps-DSCN0021.jpg');
    const items = [
      { base64: photoBytes('Pentax_K10D.jpg').toString('base64'), name: 'good.jpg' },
      { base64: whole.subarray(0, Math.floor(whole.length / 2)).toString('base64'), name: 'cut.jpg' },
    ];
    const res = await p.app.inject({ method: 'POST', url: '/v1/batches', headers: bearer(user.liveKey), payload: { items, modules: ['dating'] } });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(202);
    const id = res.json().id as string;
    const get = async () => (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}`, headers: bearer(user.liveKey) })).json();
    await expect.poll(async () => (await get()).status, { timeout: 90_000, interval: 200 }).toBe('completed');
    const done = await get();
    expect(done.counts).toEqual({ total: 2, done: 1, failed: 1, pending: 0 });
    expect(done.creditsCharged).toBe(1);
    const page = (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}/items`, headers: bearer(user.liveKey) })).json();
    expect(page.items[1]).toMatchObject({ source: 'cut.jpg', status: 'failed', error: { code: 'IMAGE_INVALID', message: expect.stringContaining(CORRUPT_IMAGE) } });
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 39, reserved: 0 });
    expect((await checkInvariants(p.db, user.userId))[0]!.ok).toBe(true);
  });
});
