import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANONYMOUS_SANDBOX_KEY } from '../../auth/keys.ts';
import { getBalance } from '../../credits/ledger.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { fingerprint, hammingDistance, type Fingerprint } from '../../images/fingerprint.ts';
import { getPhotos } from '../../registry/photos.ts';
import { bearer, createTestAccount, type TestAccount } from '../helpers/app.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';

/**
 * Lookup through HTTP against photos analyzed for real (Postgres, Temporal, worker, simulated
 * vendors): exact, fuzzy on re-encoded and resized copies, isolation between users, free.
 */

let p: Pipeline;
let a: TestAccount;
let b: TestAccount;
const ORIGINAL = photoBytes('gps-DSCN0021.jpg');
const OTHER = photoBytes('gps-DSCN0010.jpg');
let analyzed: { sha256: string; pHash: string };
let bPhoto: { sha256: string; pHash: string };
let reencoded: Buffer;
let resized: Buffer;
let fp: { reencoded: Fingerprint; resized: Fingerprint; other: Fingerprint };

const b64 = (buf: Buffer) => buf.toString('base64');
const post = (key: string, payload: Record<string, unknown>) => p.app.inject({ method: 'POST', url: '/v2/lookup', headers: bearer(key), payload });
const get = (key: string, query: string) => p.app.inject({ method: 'GET', url: `/v2/lookup?${query}`, headers: bearer(key) });

async function analyze(user: TestAccount, image: Buffer): Promise<{ sha256: string; pHash: string }> {
  const res = await p.app.inject({
    method: 'POST',
    url: '/v1/analyze',
    headers: bearer(user.liveKey),
    payload: { imageBase64: b64(image), modules: ['describe'], options: { includeFingerprint: true } },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().fingerprint;
}

beforeAll(async () => {
  p = await startPipeline();
  [a, b] = [await createTestAccount(p.db, { community: 20 }), await createTestAccount(p.db, { community: 20 })];
  analyzed = await analyze(a, ORIGINAL);
  bPhoto = await analyze(b, photoBytes('gps-DSCN0012.jpg'));
  const { width } = await sharp(ORIGINAL).metadata();
  reencoded = await sharp(ORIGINAL).jpeg({ quality: 60 }).toBuffer();
  resized = await sharp(ORIGINAL).resize(Math.round(width / 2)).jpeg({ quality: 85 }).toBuffer();
  fp = { reencoded: await fingerprint(reencoded), resized: await fingerprint(resized), other: await fingerprint(OTHER) };
}, 180_000);
afterAll(async () => p?.close());

describe('exact', () => {
  it('the same bytes (base64) → exact, distance 0, with the Photo record of the registry', async () => {
    const res = await post(a.liveKey, { images_base64: [b64(ORIGINAL)] });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(Object.keys(body.results)).toEqual([analyzed.sha256]);
    const stored = (await getPhotos(p.db, a.userId, [analyzed.sha256])).get(analyzed.sha256)!;
    const { origins: _origins, ...record } = stored;
    expect(body).toEqual({
      object: 'lookup',
      results: { [analyzed.sha256]: { matchType: 'exact', hammingDistance: 0, photo: record } },
      meta: { imagesSubmitted: 1, imagesMatched: 1, processingTimeMs: expect.any(Number), requestId: res.headers['x-request-id'] },
    });
    expect(Number.isInteger(body.meta.processingTimeMs)).toBe(true);
    const photo = body.results[analyzed.sha256].photo;
    expect(photo).toMatchObject({ sha256: analyzed.sha256, pHash: analyzed.pHash, totalCreditsSpent: 1, analyzeCallCount: 1 });
    expect(Object.keys(photo.lenses).sort()).toEqual(['describe', 'moderation']);
    expect(photo.lenses.describe).toEqual({
      eventId: expect.stringMatching(/^evt_/),
      output: expect.any(Object),
      version: expect.any(String),
      producedAt: expect.any(String),
      coRunHash: expect.any(String),
      provider: expect.stringContaining('simulated'),
    });
  });

  it('GET by sha256 → exact, keyed by the submitted sha256', async () => {
    const res = await get(a.liveKey, `sha256=${analyzed.sha256}`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().results).toEqual({ [analyzed.sha256]: { matchType: 'exact', hammingDistance: 0, photo: expect.objectContaining({ sha256: analyzed.sha256 }) } });
    expect(res.json().meta).toMatchObject({ imagesSubmitted: 1, imagesMatched: 1 });
  });

  it("GET by an unknown sha256 → none, even though the pHash would match (sha256 lookups are exact only)", async () => {
    const res = await get(a.liveKey, `sha256=${fp.resized.sha256}`);
    expect(res.json()).toMatchObject({ results: { [fp.resized.sha256]: { matchType: 'none' } }, meta: { imagesSubmitted: 1, imagesMatched: 0 } });
    expect(res.json().results[fp.resized.sha256]).toEqual({ matchType: 'none' });
  });
});

describe('fuzzy', () => {
  it('a re-encoded (JPEG q60) and a half-size copy match fuzzily at their true small distance; a different photo does not', async () => {
    const dRe = hammingDistance(fp.reencoded.pHash, analyzed.pHash);
    const dRs = hammingDistance(fp.resized.pHash, analyzed.pHash);
    // Preconditions of this test: real edits move the pHash a little, another photo a lot.
    expect(dRs).toBeGreaterThan(0);
    expect(Math.max(dRe, dRs)).toBeLessThanOrEqual(5);
    expect(hammingDistance(fp.other.pHash, analyzed.pHash)).toBeGreaterThan(20);

    const res = await post(a.liveKey, { images_base64: [b64(reencoded), b64(resized), b64(OTHER)] });
    expect(res.statusCode, res.body).toBe(200);
    const { results, meta } = res.json();
    expect(results[fp.reencoded.sha256]).toMatchObject({ matchType: 'fuzzy', hammingDistance: dRe, photo: { sha256: analyzed.sha256 } });
    expect(results[fp.resized.sha256]).toMatchObject({ matchType: 'fuzzy', hammingDistance: dRs, photo: { sha256: analyzed.sha256 } });
    expect(results[fp.other.sha256]).toEqual({ matchType: 'none' });
    expect(meta).toMatchObject({ imagesSubmitted: 3, imagesMatched: 2 });
  });

  it('a threshold below the distance turns the resized copy into none', async () => {
    const d = hammingDistance(fp.resized.pHash, analyzed.pHash);
    const below = await post(a.liveKey, { images_base64: [b64(resized)], threshold: d - 1 });
    expect(below.json().results[fp.resized.sha256]).toEqual({ matchType: 'none' });
    const at = await post(a.liveKey, { images_base64: [b64(resized)], threshold: d });
    expect(at.json().results[fp.resized.sha256]).toMatchObject({ matchType: 'fuzzy', hammingDistance: d });
  });

  it('GET by pHash: threshold 0 finds only the identical pHash (as fuzzy, distance 0); a larger one finds the resized copy', async () => {
    const d = hammingDistance(fp.resized.pHash, analyzed.pHash);
    const same = await get(a.liveKey, `pHash=${analyzed.pHash}&threshold=0`);
    expect(same.json().results).toEqual({ [analyzed.pHash]: { matchType: 'fuzzy', hammingDistance: 0, photo: expect.objectContaining({ sha256: analyzed.sha256 }) } });

    const zero = await get(a.liveKey, `pHash=${fp.resized.pHash}&threshold=0`);
    expect(zero.statusCode).toBe(200);
    expect(zero.json()).toMatchObject({ results: { [fp.resized.pHash]: { matchType: 'none' } }, meta: { imagesMatched: 0 } });

    const wide = await get(a.liveKey, `pHash=${fp.resized.pHash}&threshold=12`);
    expect(wide.json().results[fp.resized.pHash]).toMatchObject({ matchType: 'fuzzy', hammingDistance: d, photo: { sha256: analyzed.sha256 } });
    // Past the MIH cut-over the scan answers the same.
    const scan = await get(a.liveKey, `pHash=${fp.resized.pHash}&threshold=40`);
    expect(scan.json().results[fp.resized.pHash]).toMatchObject({ matchType: 'fuzzy', hammingDistance: d, photo: { sha256: analyzed.sha256 } });
  });

  it('duplicates in one request share one result key; every copy counts as submitted and matched', async () => {
    const res = await post(a.liveKey, { images_base64: [b64(ORIGINAL), b64(reencoded), b64(ORIGINAL), b64(OTHER)] });
    const { results, meta } = res.json();
    expect(Object.keys(results).sort()).toEqual([analyzed.sha256, fp.reencoded.sha256, fp.other.sha256].sort());
    expect(results[analyzed.sha256].matchType).toBe('exact');
    expect(meta).toMatchObject({ imagesSubmitted: 4, imagesMatched: 3 });
  });
});

describe('isolation', () => {
  it("user B never sees user A's photo: not exact, not fuzzy, only B's own at any threshold", async () => {
    const exact = await post(b.liveKey, { images_base64: [b64(ORIGINAL), b64(resized)] });
    expect(exact.json().results).toEqual({ [analyzed.sha256]: { matchType: 'none' }, [fp.resized.sha256]: { matchType: 'none' } });
    expect((await get(b.liveKey, `sha256=${analyzed.sha256}`)).json().results[analyzed.sha256]).toEqual({ matchType: 'none' });
    expect((await get(b.liveKey, `pHash=${analyzed.pHash}`)).json().results[analyzed.pHash]).toEqual({ matchType: 'none' });
    // Threshold 64 matches every photo of the caller: B gets B's, never A's closer one.
    const all = await get(b.liveKey, `pHash=${analyzed.pHash}&threshold=64`);
    expect(all.json().results[analyzed.pHash]).toMatchObject({
      matchType: 'fuzzy',
      hammingDistance: hammingDistance(analyzed.pHash, bPhoto.pHash),
      photo: { sha256: bPhoto.sha256 },
    });
    const mih = await post(b.liveKey, { images_base64: [b64(ORIGINAL)], threshold: 11 });
    expect(mih.json().results[analyzed.sha256]).toEqual({ matchType: 'none' });
  });

  it("a user's sandbox key looks up that user's registry", async () => {
    const res = await post(a.testKey, { images_base64: [b64(ORIGINAL)] });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().results[analyzed.sha256]).toMatchObject({ matchType: 'exact', photo: { sha256: analyzed.sha256 } });
  });

  it('the anonymous sandbox key has no registry: none for everything', async () => {
    const byImage = await post(ANONYMOUS_SANDBOX_KEY, { images_base64: [b64(ORIGINAL)], threshold: 64 });
    expect(byImage.statusCode, byImage.body).toBe(200);
    expect(byImage.json()).toMatchObject({ results: { [analyzed.sha256]: { matchType: 'none' } }, meta: { imagesSubmitted: 1, imagesMatched: 0 } });
    expect((await get(ANONYMOUS_SANDBOX_KEY, `pHash=${analyzed.pHash}&threshold=64`)).json().results[analyzed.pHash]).toEqual({ matchType: 'none' });
  });
});

describe('free and side-effect free', () => {
  it('lookups moved no credit, created or touched no photo row, and stored no image', async () => {
    const before = await Promise.all([getBalance(p.db, a.userId), p.db.query('SELECT sha256, analyze_call_count, last_analyzed_at FROM photos WHERE user_id = $1', [a.userId])]);
    for (const images_base64 of [[b64(ORIGINAL)], [b64(reencoded), b64(resized)], [b64(OTHER)]]) {
      expect((await post(a.liveKey, { images_base64 })).statusCode).toBe(200);
    }
    expect((await get(a.liveKey, `sha256=${analyzed.sha256}`)).statusCode).toBe(200);
    const after = await Promise.all([getBalance(p.db, a.userId), p.db.query('SELECT sha256, analyze_call_count, last_analyzed_at FROM photos WHERE user_id = $1', [a.userId])]);
    expect(after[0]).toEqual(before[0]);
    expect(after[0]).toMatchObject({ community: 19, reserved: 0 });
    expect(after[1].rows).toEqual(before[1].rows);
    expect(after[1].rows).toHaveLength(1);
    const ledger = await p.db.query(`SELECT kind FROM credit_ledger WHERE user_id = $1 ORDER BY id`, [a.userId]);
    expect(ledger.rows.map((r) => r.kind)).toEqual(['grant', 'reserve', 'settle']);
    const blobs = new FsBlobStore(p.config.BLOB_DIR);
    expect(await blobs.has(analyzed.sha256)).toBe(true); // analyze stored its image…
    for (const sha of [fp.reencoded.sha256, fp.resized.sha256, fp.other.sha256]) expect(await blobs.has(sha)).toBe(false); // …lookup none
  });
});
