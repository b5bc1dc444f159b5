import { createHash, randomBytes } from 'node:crypto';
import { parse } from 'csv-parse/sync';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { utimes } from 'node:fs/promises';
import { collectBlobs } from '../../worker/blob-collector.ts';
import { thumbnailOf } from '../../images/thumbnail.ts';
import { bearer, createTestAccount, expectEnvelope } from '../helpers/app.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * DELETE /v1/photos/{sha256} through HTTP against the real pipeline (docs/privacy.md): the photo
 * leaves the caller's registry with its lens records, its bytes leave the blob store once nothing
 * else keeps them, old batch exports say it was erased, and nobody else can erase it.
 */
let p: Pipeline;
let blobs: FsBlobStore;
beforeAll(async () => {
  p = await startPipeline();
  blobs = new FsBlobStore(p.config.BLOB_DIR);
}, 120_000);
afterAll(async () => p?.close());

/** A JPEG of random noise: bytes and perceptual hash no other test (or run) has. */
async function noiseJpeg(): Promise<Buffer> {
  return sharp(randomBytes(96 * 64 * 3), { raw: { width: 96, height: 64, channels: 3 } }).jpeg({ quality: 90 }).toBuffer();
}
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const analyze = (key: string, img: Buffer, modules = ['dating']) =>
  p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: { imageBase64: img.toString('base64'), modules } });
const erase = (key: string, sha256: string) => p.app.inject({ method: 'DELETE', url: `/v1/photos/${sha256}`, headers: bearer(key) });
const lookup = async (key: string, sha256: string) =>
  (await p.app.inject({ method: 'GET', url: `/v2/lookup?sha256=${sha256}`, headers: bearer(key) })).json().results[sha256];
const lookupByImage = async (key: string, img: Buffer) =>
  (await p.app.inject({ method: 'POST', url: '/v2/lookup', headers: bearer(key), payload: { images_base64: [img.toString('base64')] } })).json().results[sha(img)];
const status = async (key: string, id: string) => (await p.app.inject({ method: 'GET', url: `/v1/batches/${id}`, headers: bearer(key) })).json();
const ledgerOk = async (accountId: string) => expect(await checkInvariants(p.db, accountId)).toEqual([{ userId: accountId, ok: true, problems: [] }]);

describe('DELETE /v1/photos/{sha256}', () => {
  it('erases the photo, its lens records and its bytes; old batch exports say it was erased; again is 404', async () => {
    const user = await createTestAccount(p.db, { community: 50 });
    const photo = await noiseJpeg();
    const other = await noiseJpeg();
    const ok = await analyze(user.liveKey, photo, ['dating', 'describe']);
    expect(ok.statusCode, ok.body).toBe(200);
    // A batch with the photo (named as a person would name it) and another one.
    const sub = await p.app.inject({
      method: 'POST', url: '/v1/batches', headers: bearer(user.liveKey),
      payload: { modules: ['dating'], items: [{ base64: photo.toString('base64'), name: 'Jane Doe at the lake.jpg' }, { base64: other.toString('base64'), name: 'other.jpg' }] },
    });
    expect(sub.statusCode, sub.body).toBe(202);
    const batchId = sub.json().id;
    await expect.poll(async () => (await status(user.liveKey, batchId)).status, { timeout: 90_000, interval: 200 }).toBe('completed');
    const before = (await p.app.inject({ method: 'GET', url: `/v1/batches/${batchId}/items`, headers: bearer(user.liveKey) })).json().items;
    expect(before[0]).toMatchObject({ source: 'Jane Doe at the lake.jpg', status: 'done', output: { estimatedDate: expect.any(Object) } });
    expect(await lookup(user.liveKey, sha(photo))).toMatchObject({ matchType: 'exact', photo: { lenses: { dating: expect.any(Object), describe: expect.any(Object) } } });
    expect(await blobs.has(sha(photo))).toBe(true);
    // The console's thumbnail of it (a small copy of the photo) exists too.
    expect(await thumbnailOf({ db: p.db, blobs }, sha(photo))).not.toBeNull();
    const balance = await getBalance(p.db, user.userId);

    const res = await erase(user.liveKey, sha(photo));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      object: 'photo.erased', sha256: sha(photo), lensRecordsDeleted: 3, vehicleReportsDeleted: 0, batchItemsErased: 1, requestId: res.headers['x-request-id'],
    });

    // Lookup finds nothing, by hash or by image; the bytes are gone; no row of any table names it for this account.
    expect(await lookup(user.liveKey, sha(photo))).toEqual({ matchType: 'none' });
    expect(await lookupByImage(user.liveKey, photo)).toEqual({ matchType: 'none' });
    expect(await blobs.has(sha(photo))).toBe(false);
    expect((await p.db.query('SELECT 1 FROM thumbnails WHERE sha256 = $1', [sha(photo)])).rowCount).toBe(0);
    for (const table of ['photos', 'lens_events', 'lens_records']) {
      const r = await p.db.query(`SELECT count(*)::int AS n FROM ${table} WHERE user_id = $1 AND sha256 = $2`, [user.userId, sha(photo)]);
      expect(r.rows[0].n, table).toBe(0);
    }
    const answers = await p.db.query(`SELECT count(*)::int AS n FROM analysis_requests WHERE user_id = $1 AND strpos(response::text, $2) > 0`, [user.userId, sha(photo)]);
    expect(answers.rows[0].n).toBe(0);

    // The batch's items and exports say it was erased, without its name; the other photo is untouched.
    const items = (await p.app.inject({ method: 'GET', url: `/v1/batches/${batchId}/items`, headers: bearer(user.liveKey) })).json().items;
    expect(items[0]).toMatchObject({ source: '[erased]', status: 'done', output: null, error: { code: 'PHOTO_NOT_IN_REGISTRY', message: expect.stringContaining('The photo was erased') } });
    expect(items[1]).toMatchObject({ source: 'other.jpg', status: 'done', error: null, output: { estimatedDate: expect.any(Object) } });
    const csv = await p.app.inject({ method: 'GET', url: `/v1/batches/${batchId}/export?format=csv`, headers: bearer(user.liveKey) });
    expect(csv.statusCode).toBe(200);
    expect(csv.body).not.toContain('Jane Doe');
    const rows = parse(csv.body.replace(/^\uFEFF/, ''), { columns: true }) as Array<Record<string, string>>;
    expect(Object.values(rows[0]!).some((v) => v.startsWith('PHOTO_NOT_IN_REGISTRY: The photo was erased'))).toBe(true);
    const json = await p.app.inject({ method: 'GET', url: `/v1/batches/${batchId}/export?format=json`, headers: bearer(user.liveKey) });
    expect(json.body).not.toContain('Jane Doe');
    expect(json.json()[0]).toMatchObject({ source: '[erased]', output: null, error: expect.stringMatching(/^PHOTO_NOT_IN_REGISTRY: The photo was erased/) });

    // Again: 404 in the envelope, nothing moves; erasing is free and the ledger balances.
    const again = await erase(user.liveKey, sha(photo));
    expect(again.statusCode).toBe(404);
    expect(expectEnvelope(again.json()).code).toBe('PHOTO_NOT_IN_REGISTRY');
    expect(await getBalance(p.db, user.userId)).toEqual(balance);
    await ledgerOk(user.userId);

    // Sent again, it is a new photo: every lens bills again.
    const anew = await analyze(user.liveKey, photo);
    expect(anew.statusCode, anew.body).toBe(200);
    expect(anew.json().usage.creditsCharged).toBe(1);
    expect(await blobs.has(sha(photo))).toBe(true);
  }, 180_000);

  it('another account cannot erase the photo (404, nothing changes); the same bytes in two accounts keep the blob until both erased', async () => {
    const a = await createTestAccount(p.db, { community: 10 });
    const b = await createTestAccount(p.db, { community: 10 });
    const shared = await noiseJpeg();
    const onlyA = await noiseJpeg();
    for (const [key, img] of [[a.liveKey, shared], [b.liveKey, shared], [a.liveKey, onlyA]] as const) {
      const r = await analyze(key, img);
      expect(r.statusCode, r.body).toBe(200);
    }

    // B names A's photo: the same 404 as a photo nobody has, and A keeps everything.
    const attack = await erase(b.liveKey, sha(onlyA));
    expect(attack.statusCode).toBe(404);
    expect(expectEnvelope(attack.json()).code).toBe('PHOTO_NOT_IN_REGISTRY');
    const nobody = await erase(b.liveKey, 'f'.repeat(64));
    expect(nobody.statusCode).toBe(404);
    expect(expectEnvelope(nobody.json()).message).toBe(expectEnvelope(attack.json()).message);
    expect(await lookup(a.liveKey, sha(onlyA))).toMatchObject({ matchType: 'exact', photo: { lenses: { dating: expect.any(Object) } } });
    expect(await blobs.has(sha(onlyA))).toBe(true);

    // A erases the shared photo: gone from A, B still finds it and its bytes stay.
    expect((await erase(a.liveKey, sha(shared))).statusCode).toBe(200);
    expect(await lookup(a.liveKey, sha(shared))).toEqual({ matchType: 'none' });
    expect(await lookup(b.liveKey, sha(shared))).toMatchObject({ matchType: 'exact' });
    expect(await blobs.has(sha(shared))).toBe(true);
    // B erases it too: now nothing keeps the bytes.
    expect((await erase(b.liveKey, sha(shared))).statusCode).toBe(200);
    expect(await blobs.has(sha(shared))).toBe(false);
    await ledgerOk(a.userId);
    await ledgerOk(b.userId);
  }, 120_000);

  it('refuses bad ids, sandbox keys and no key in the error envelope, and changes nothing', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const img = await noiseJpeg();
    expect((await analyze(user.liveKey, img)).statusCode).toBe(200);
    const cases: Array<[string, Record<string, string>, number, string]> = [
      [sha(img).toUpperCase(), bearer(user.liveKey), 400, 'VALIDATION_FAILED'],
      [`${sha(img)}0`, bearer(user.liveKey), 400, 'VALIDATION_FAILED'],
      ['..%2F..%2Fetc%2Fpasswd', bearer(user.liveKey), 400, 'VALIDATION_FAILED'],
      [`${sha(img).slice(0, 63)}%0A`, bearer(user.liveKey), 400, 'VALIDATION_FAILED'],
      [sha(img), bearer(user.testKey), 403, 'FORBIDDEN'],
      [sha(img), bearer('svc_test_public0000000000000000000000000000000000'), 404, 'PHOTO_NOT_IN_REGISTRY'],
      [sha(img), {}, 401, 'AUTH_FAILED'],
    ];
    for (const [id, headers, statusCode, code] of cases) {
      const res = await p.app.inject({ method: 'DELETE', url: `/v1/photos/${id}`, headers });
      expect(res.statusCode, `${id} ${res.body}`).toBe(statusCode);
      expect(expectEnvelope(res.json()).code).toBe(code);
    }
    expect(await lookup(user.liveKey, sha(img))).toMatchObject({ matchType: 'exact' });
    expect(await blobs.has(sha(img))).toBe(true);
  }, 60_000);

  it('an analysis of the photo in flight while it is erased completes, keeps its bytes for the run, and records only its own result', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const img = await noiseJpeg();
    expect((await analyze(user.liveKey, img, ['dating'])).statusCode).toBe(200);
    // The next analysis (a lens the registry lacks) waits at the vendor: provably in flight.
    p.sim.hold();
    try {
      const inFlight = analyze(user.liveKey, img, ['describe']);
      await expect.poll(() => p.sim.held(), { timeout: 60_000, interval: 20 }).toBeGreaterThan(0);
      const res = await erase(user.liveKey, sha(img));
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().lensRecordsDeleted).toBe(2); // moderation and dating
      // The run's intake used the bytes: they stay for it.
      expect(await blobs.has(sha(img))).toBe(true);
      p.sim.release();
      const done = await inFlight;
      expect(done.statusCode, done.body).toBe(200);
      expect(done.json().usage.creditsCharged).toBe(1);
    } finally {
      p.sim.reset();
    }
    // The photo is back with that run's lens only: the erased records (moderation, dating) did not return.
    const found = await lookup(user.liveKey, sha(img));
    expect(Object.keys(found.photo.lenses).sort()).toEqual(['describe']);
    await ledgerOk(user.userId);
  }, 120_000);

  it('retention never takes the bytes of a run in flight: the collector keeps them until the run answered', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    await p.db.query('UPDATE users SET retention_days = 1 WHERE id = $1', [user.userId]);
    const img = await noiseJpeg();
    expect((await analyze(user.liveKey, img, ['dating'])).statusCode).toBe(200);
    const aged = async () => {
      await p.db.query(`UPDATE photos SET last_analyzed_at = now() - interval '2 days' WHERE user_id = $1`, [user.userId]);
      const past = new Date(Date.now() - 2 * 86400_000);
      await utimes(blobs.pathOf(sha(img)), past, past);
    };
    await aged();
    p.sim.hold();
    try {
      const inFlight = analyze(user.liveKey, img, ['describe']);
      await expect.poll(() => p.sim.held(), { timeout: 60_000, interval: 20 }).toBeGreaterThan(0);
      // Past its retention and its grace, but used by the run at the vendor: kept.
      await collectBlobs(p.db, blobs, { graceMs: 3600_000 });
      expect(await blobs.has(sha(img))).toBe(true);
      p.sim.release();
      expect((await inFlight).statusCode).toBe(200);
    } finally {
      p.sim.reset();
    }
    // The run answered and ended its use: aged again, the collector takes the bytes, the records stay.
    await aged();
    await collectBlobs(p.db, blobs, { graceMs: 3600_000 });
    expect(await blobs.has(sha(img))).toBe(false);
    expect(Object.keys((await lookup(user.liveKey, sha(img))).photo.lenses).sort()).toEqual(['dating', 'describe', 'moderation']);
  }, 120_000);
});
