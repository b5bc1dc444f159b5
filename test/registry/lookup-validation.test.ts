import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getBalance } from '../../credits/ledger.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { fingerprint, type Fingerprint } from '../../images/fingerprint.ts';
import { isPublicAddress } from '../../images/ssrf.ts';
import { hashChunks, hexToSigned64 } from '../../registry/hashes.ts';
import { bearer, buildTestApp, createTestAccount, expectEnvelope, type TestApp, type TestAccount } from '../helpers/app.ts';
import { photoBase64, photoBytes } from '../helpers/photos.ts';
import { closedPort, type Canary, type PublicServer, startCanaryAndPublic } from '../images/servers.ts';

/**
 * Lookup input rules, threshold semantics and SSRF, on the real app and Postgres (no Temporal:
 * registry rows are written directly, with the real fingerprint of a real photo).
 */

let t: TestApp;
let canary: Canary;
let server: PublicServer;
let user: TestAccount;
let canon: Fingerprint;
const GOOD = photoBase64('Canon_40D.jpg');
const SHA = 'ab'.repeat(32);
const PHASH = '0123456789abcdef';

beforeAll(async () => {
  ({ canary, server } = await startCanaryAndPublic(photoBytes('Canon_40D.jpg')));
  // 127.0.0.2 plays a public host; everything else keeps the production policy.
  t = await buildTestApp({
    config: { IMAGE_MAX_BYTES: 500_000 },
    deps: { fetchPolicy: { allowAddress: (ip) => ip === '127.0.0.2' || isPublicAddress(ip), timeoutMs: 3000 } },
  });
  user = await createTestAccount(t.db, { community: 50 });
  canon = await fingerprint(photoBytes('Canon_40D.jpg'));
}, 60_000);
afterAll(async () => {
  await t?.close();
  await server?.close();
  await canary?.close();
});

/** `hex` with the given bit positions (0 = most significant) flipped. */
function flipped(hex: string, bits: number[]): string {
  let v = BigInt('0x' + hex);
  for (const b of bits) v ^= 1n << BigInt(63 - b);
  return v.toString(16).padStart(16, '0');
}

async function addPhoto(accountId: string, pHash: string, analyzedAt: string, sha256 = randomBytes(32).toString('hex')): Promise<string> {
  await t.db.query(
    `INSERT INTO photos (user_id, sha256, phash, dhash, phash_c0, phash_c1, phash_c2, phash_c3, first_analyzed_at, last_analyzed_at)
     VALUES ($1, $2, $3, 0, $4, $5, $6, $7, $8, $8)`,
    [accountId, sha256, hexToSigned64(pHash), ...hashChunks(pHash), analyzedAt],
  );
  return sha256;
}

const post = (payload: unknown, key = user.liveKey) =>
  t.app.inject({ method: 'POST', url: '/v2/lookup', headers: bearer(key), payload: payload as object });
const get = (query: string, key = user.liveKey) => t.app.inject({ method: 'GET', url: `/v2/lookup?${query}`, headers: bearer(key) });

async function expectRejected(res: Awaited<ReturnType<typeof post>>, status: number, code: string, field?: string) {
  expect(res.statusCode, res.body.slice(0, 300)).toBe(status);
  const e = expectEnvelope(res.json());
  expect(e.code).toBe(code);
  expect(e.retryable).toBe(false);
  if (field) expect(e.message).toContain(field);
}

describe('POST /v2/lookup: 400 VALIDATION_FAILED naming the field', () => {
  const cases: Array<[string, unknown, string]> = [
    ['neither images nor images_base64', { threshold: 5 }, 'images'],
    ['both images and images_base64', { images: ['https://example.com/a.jpg'], images_base64: [GOOD] }, 'images_base64'],
    ['images: []', { images: [] }, 'images'],
    ['images_base64: []', { images_base64: [] }, 'images_base64'],
    ['51 images', { images: Array.from({ length: 51 }, (_, i) => `https://example.com/${i}.jpg`) }, 'images'],
    ['51 images_base64', { images_base64: Array.from({ length: 51 }, () => GOOD) }, 'images_base64'],
    ['threshold 65', { images_base64: [GOOD], threshold: 65 }, 'threshold'],
    ['threshold -1', { images_base64: [GOOD], threshold: -1 }, 'threshold'],
    ['threshold 1.5', { images_base64: [GOOD], threshold: 1.5 }, 'threshold'],
    ['threshold as a string', { images_base64: [GOOD], threshold: '5' }, 'threshold'],
    ['threshold null', { images_base64: [GOOD], threshold: null }, 'threshold'],
    ['a relative URL', { images: ['photo.jpg'] }, 'images.0'],
    ['a URL over 2048 chars', { images: ['https://example.com/' + 'a'.repeat(2048)] }, 'images.0'],
    ['images items that are objects', { images: [{ url: 'https://example.com/a.jpg' }] }, 'images.0'],
    ['an empty base64 string', { images_base64: [''] }, 'images_base64.0'],
    ['non-base64 characters', { images_base64: [GOOD, '%%%not base64%%%'] }, 'images_base64.1'],
    ['a data URI that is not an image', { images_base64: ['data:text/plain;base64,aGVsbG8='] }, 'images_base64.0'],
    ['an unknown field', { images_base64: [GOOD], treshold: 3 }, 'treshold'],
    ['a body that is an array', [GOOD], 'body'],
  ];
  for (const [name, body, field] of cases) {
    it(name, async () => {
      await expectRejected(await post(body), 400, 'VALIDATION_FAILED', field);
    });
  }
});

describe('GET /v2/lookup: 400 VALIDATION_FAILED naming the parameter', () => {
  const cases: Array<[string, string, string]> = [
    ['neither sha256 nor pHash', 'threshold=5', 'sha256'],
    ['both sha256 and pHash', `sha256=${SHA}&pHash=${PHASH}`, 'pHash'],
    ['sha256 of 63 chars', `sha256=${SHA.slice(1)}`, 'sha256'],
    ['sha256 of 65 chars', `sha256=${SHA}a`, 'sha256'],
    ['uppercase sha256', `sha256=${SHA.toUpperCase()}`, 'sha256'],
    ['non-hex sha256', `sha256=${'g'.repeat(64)}`, 'sha256'],
    ['pHash of 15 chars', `pHash=${PHASH.slice(1)}`, 'pHash'],
    ['uppercase pHash', `pHash=${PHASH.toUpperCase()}`, 'pHash'],
    ['non-hex pHash', `pHash=${'z'.repeat(16)}`, 'pHash'],
    ['pHash spelled phash', `phash=${PHASH}`, 'pHash'],
    ['sha256 given twice', `sha256=${SHA}&sha256=${SHA}`, 'sha256'],
    ['threshold 65', `pHash=${PHASH}&threshold=65`, 'threshold'],
    ['threshold -1', `pHash=${PHASH}&threshold=-1`, 'threshold'],
    ['threshold 1.5', `pHash=${PHASH}&threshold=1.5`, 'threshold'],
    ['threshold 1e1', `pHash=${PHASH}&threshold=1e1`, 'threshold'],
    ['threshold 0x10', `pHash=${PHASH}&threshold=0x10`, 'threshold'],
    ['threshold abc', `pHash=${PHASH}&threshold=abc`, 'threshold'],
  ];
  for (const [name, query, field] of cases) {
    it(name, async () => {
      await expectRejected(await get(query), 400, 'VALIDATION_FAILED', field);
    });
  }

  it('401 without a key, on both methods', async () => {
    const g = await t.app.inject({ method: 'GET', url: `/v2/lookup?pHash=${PHASH}` });
    const p = await t.app.inject({ method: 'POST', url: '/v2/lookup', payload: { images_base64: [GOOD] } });
    for (const res of [g, p]) await expectRejected(res, 401, 'AUTH_FAILED');
  });
});

describe('threshold', () => {
  it('defaults to 5 on POST and on GET, where an empty value or null also mean the default', async () => {
    const [at5, at6] = [await createTestAccount(t.db), await createTestAccount(t.db)];
    const sha5 = await addPhoto(at5.userId, flipped(canon.pHash, [0, 17, 33, 40, 63]), '2026-02-01T00:00:00Z');
    const sha6 = await addPhoto(at6.userId, flipped(canon.pHash, [1, 2, 20, 35, 50, 62]), '2026-02-01T00:00:00Z');

    const p5 = await post({ images_base64: [GOOD] }, at5.liveKey);
    expect(p5.json().results[canon.sha256]).toMatchObject({ matchType: 'fuzzy', hammingDistance: 5, photo: { sha256: sha5 } });
    expect((await post({ images_base64: [GOOD] }, at6.liveKey)).json().results[canon.sha256]).toEqual({ matchType: 'none' });
    expect((await post({ images_base64: [GOOD], threshold: 6 }, at6.liveKey)).json().results[canon.sha256]).toMatchObject({ hammingDistance: 6, photo: { sha256: sha6 } });

    for (const suffix of ['', '&threshold=', '&threshold=null']) {
      const g5 = await get(`pHash=${canon.pHash}${suffix}`, at5.liveKey);
      expect(g5.statusCode, `${suffix}: ${g5.body}`).toBe(200);
      expect(g5.json().results[canon.pHash], suffix).toMatchObject({ matchType: 'fuzzy', hammingDistance: 5 });
      expect((await get(`pHash=${canon.pHash}${suffix}`, at6.liveKey)).json().results[canon.pHash], suffix).toEqual({ matchType: 'none' });
    }
    expect((await get(`pHash=${canon.pHash}&threshold=6`, at6.liveKey)).json().results[canon.pHash]).toMatchObject({ matchType: 'fuzzy', hammingDistance: 6 });
    // threshold is accepted (and has nothing to do) on a sha256 lookup.
    expect((await get(`sha256=${sha5}&threshold=0`, at5.liveKey)).json().results[sha5]).toMatchObject({ matchType: 'exact', hammingDistance: 0 });
  });

  it('best match: the smallest distance wins; equal distances go to the most recently analyzed', async () => {
    const u = await createTestAccount(t.db);
    await addPhoto(u.userId, flipped(canon.pHash, [3, 4, 5]), '2026-04-01T00:00:00Z');
    const newer3 = await addPhoto(u.userId, flipped(canon.pHash, [10, 30, 50]), '2026-04-03T00:00:00Z');
    await addPhoto(u.userId, flipped(canon.pHash, [7, 8, 9]), '2026-04-02T00:00:00Z');
    const res = await post({ images_base64: [GOOD] }, u.liveKey);
    expect(res.json().results[canon.sha256]).toMatchObject({ matchType: 'fuzzy', hammingDistance: 3, photo: { sha256: newer3, lastAnalyzedAt: '2026-04-03T00:00:00.000Z' } });
    const older2 = await addPhoto(u.userId, flipped(canon.pHash, [60, 61]), '2020-01-01T00:00:00Z');
    expect((await post({ images_base64: [GOOD] }, u.liveKey)).json().results[canon.sha256]).toMatchObject({ hammingDistance: 2, photo: { sha256: older2 } });
    // The exact photo beats every fuzzy one, at distance 0.
    await addPhoto(u.userId, canon.pHash, '2019-01-01T00:00:00Z', canon.sha256);
    expect((await post({ images_base64: [GOOD] }, u.liveKey)).json().results[canon.sha256]).toMatchObject({ matchType: 'exact', hammingDistance: 0, photo: { sha256: canon.sha256 } });
  });
});

describe('images by URL', () => {
  it('a URL is fetched once and looked up by the SHA-256 of its bytes', async () => {
    const u = await createTestAccount(t.db);
    await addPhoto(u.userId, canon.pHash, '2026-01-01T00:00:00Z', canon.sha256);
    const hits = server.hits.get('/image.jpg') ?? 0;
    const res = await post({ images: [`${server.origin}/image.jpg`] }, u.liveKey);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().results).toEqual({ [canon.sha256]: { matchType: 'exact', hammingDistance: 0, photo: expect.objectContaining({ sha256: canon.sha256, lenses: {} }) } });
    expect(server.hits.get('/image.jpg')).toBe(hits + 1);
    expect(await new FsBlobStore(t.config.BLOB_DIR).has(canon.sha256)).toBe(false);
  });

  it('an image that cannot be fetched or decoded → 422 IMAGE_INVALID naming the item, as on analyze', async () => {
    const whole = photoBytes('gps-DSCN0010.jpg');
    await expectRejected(await post({ images_base64: [GOOD, Buffer.from('just some text, not a photo').toString('base64')] }), 422, 'IMAGE_INVALID', 'images_base64.1');
    await expectRejected(await post({ images_base64: [whole.subarray(0, whole.length / 2).toString('base64')] }), 422, 'IMAGE_INVALID', 'images_base64.0');
    await expectRejected(await post({ images: [`${server.origin}/missing`] }), 422, 'IMAGE_INVALID', 'images.0');
    await expectRejected(await post({ images: [`http://127.0.0.2:${await closedPort()}/photo.jpg`] }), 422, 'IMAGE_INVALID', 'images.0');
  });

  it('an image over the byte cap → 422 IMAGE_TOO_LARGE', async () => {
    // IMAGE_MAX_BYTES is 500,000 in this file.
    await expectRejected(await post({ images_base64: [Buffer.alloc(600_000, 0xff).toString('base64')] }), 422, 'IMAGE_TOO_LARGE', 'images_base64.0');
  });
});

describe('SSRF: lookup URLs never reach private networks', () => {
  it('loopback, private, link-local, metadata, numeric tricks and redirects are 400 and never connect', async () => {
    const port = canary.port;
    const before = canary.connections();
    const urls = [
      `http://127.0.0.1:${port}/`,
      `http://localhost:${port}/`,
      `http://[::1]:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      `http://2130706433:${port}/`,
      `http://0x7f.0.0.1:${port}/`,
      `http://user@127.0.0.1:${port}/`,
      'http://10.0.0.1/',
      'http://192.168.1.1/',
      'http://169.254.169.254/latest/meta-data/',
      'http://[fd00::1]/',
      'file:///etc/passwd',
      `${server.origin}/to-canary`,
      `${server.origin}/to-canary-v6`,
    ];
    for (const url of urls) {
      const res = await post({ images: [url] });
      expect(res.statusCode, `${url}: ${res.body}`).toBe(400);
      expect(expectEnvelope(res.json()).code).toBe('VALIDATION_FAILED');
    }
    // One bad URL among good ones refuses the whole request.
    const mixed = await post({ images: [`${server.origin}/image.jpg`, `http://127.0.0.1:${port}/`] });
    await expectRejected(mixed, 400, 'VALIDATION_FAILED', 'images.1');
    expect(canary.connections() - before).toBe(0);
  });
});

describe('bad input changes nothing', () => {
  it('no credit moved and no registry row for any request above', async () => {
    expect(await getBalance(t.db, user.userId)).toEqual({ community: 50, purchased: 0, reserved: 0, referralBonus: 0 });
    const r = await t.db.query('SELECT count(*)::int AS n FROM photos WHERE user_id = $1', [user.userId]);
    expect(r.rows[0].n).toBe(0);
  });
});

describe('OpenAPI', () => {
  it('documents both lookup operations with their request and response schemas', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const ops = doc.paths['/v2/lookup'];
    expect(Object.keys(ops).sort()).toEqual(['get', 'post']);
    expect(ops.get.parameters.filter((x: { $ref?: string }) => !x.$ref).map((x: { name: string; in: string }) => `${x.in}:${x.name}`).sort()).toEqual(['query:pHash', 'query:sha256', 'query:threshold']);
    expect(JSON.stringify(ops.post.requestBody)).toContain('LookupRequest');
    expect(JSON.stringify(ops.post.responses['200'])).toContain('Lookup');
    const schemas = doc.components.schemas;
    expect(Object.keys(schemas.LookupRequest.properties).sort()).toEqual(['images', 'images_base64', 'threshold', 'uploadIds']);
    expect(schemas.LookupResult.properties.matchType.enum).toEqual(['exact', 'fuzzy', 'none']);
    expect(Object.keys(schemas.PhotoRecord.properties).sort()).toEqual(
      ['analyzeCallCount', 'dHash', 'firstAnalyzedAt', 'lastAnalyzedAt', 'lenses', 'pHash', 'sha256', 'totalCreditsSpent'],
    );
    expect(Object.keys(ops.post.responses).sort()).toEqual(['200', '400', '401', '404', '413', '415', '422', '429', 'default']);
  });
});
