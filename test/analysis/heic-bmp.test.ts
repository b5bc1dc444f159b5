import sharp from 'sharp';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { checkInvariants, getBalance } from '../../credits/ledger.ts';
import { fingerprint, hammingDistance } from '../../images/fingerprint.ts';
import { bearer, createTestAccount, expectEnvelope, type TestAccount } from '../helpers/app.ts';
import { HEIC_DECODERS, withHeicDecoder } from '../helpers/heic-decoder.ts';
import { photoBytes } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { bmpOf, bmpVariant, heicDeclaring } from '../images/foreign-inputs.ts';

/**
 * An iPhone HEIC and a BMP through the real API: analyze (Temporal worker, simulated vendors,
 * billing, registry), then lookup by image, including the HEIC's independent JPEG export. The
 * HEIC tests run on both HEIC decoders (the API and the worker share this process and its setting).
 */

let p: Pipeline;
beforeAll(async () => {
  p = await startPipeline();
}, 120_000);
afterAll(async () => p?.close());
beforeEach(() => p.sim.reset());

const HEIC = photoBytes('heic-IMG_5195.HEIC');
const HEIC_AS_JPEG = photoBytes('heic-IMG_5195.heif-convert.jpg');

const analyze = (key: string, image: Buffer) =>
  p.app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(key), payload: { imageBase64: image.toString('base64'), modules: ['describe'], options: { includeFingerprint: true } } });
const lookup = (key: string, images: Buffer[]) =>
  p.app.inject({ method: 'POST', url: '/v2/lookup', headers: bearer(key), payload: { images_base64: images.map((b) => b.toString('base64')) } });
const photoRows = async (user: TestAccount) => (await p.db.query('SELECT sha256 FROM photos WHERE user_id = $1', [user.userId])).rows;
const vendorSeen = () => Object.values(p.sim.stats()).flatMap((s) => s.last?.images ?? []);

describe.each(HEIC_DECODERS)('an iPhone HEIC, %s decoder', (mode) => {
  withHeicDecoder(mode);

  it('is analyzed and billed like a JPEG; the vendor gets an upright JPEG of it; lookup finds it by its bytes and by its JPEG export', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const res = await analyze(user.liveKey, HEIC);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    const local = await fingerprint(HEIC);
    expect(body.fingerprint).toMatchObject({ sha256: local.sha256, pHash: local.pHash });
    expect(body.usage.creditsCharged).toBe(1);
    expect(body.output).toHaveProperty('description');
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 9, reserved: 0 });
    expect(await photoRows(user)).toEqual([{ sha256: local.sha256 }]);
    // Portrait 2566×3313 reached the vendor as a portrait image of pixels.
    const [seen] = vendorSeen();
    expect(seen!.height).toBeGreaterThan(seen!.width);

    const exported = await fingerprint(HEIC_AS_JPEG);
    const distance = hammingDistance(exported.pHash, local.pHash);
    expect(distance).toBeLessThanOrEqual(4);
    const found = await lookup(user.liveKey, [HEIC, HEIC_AS_JPEG]);
    expect(found.statusCode, found.body).toBe(200);
    expect(found.json().results[local.sha256]).toMatchObject({ matchType: 'exact', hammingDistance: 0, photo: { sha256: local.sha256 } });
    expect(found.json().results[exported.sha256]).toMatchObject({ matchType: 'fuzzy', hammingDistance: distance, photo: { sha256: local.sha256 } });
  });

  it('hostile HEICs are refused in the spec envelope: nothing billed, no registry row, no vendor call', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const cases: Array<[string, Buffer, string]> = [
      ['truncated', HEIC.subarray(0, 400_000), 'IMAGE_INVALID'],
      ['garbage behind a HEIC ftyp', Buffer.concat([HEIC.subarray(0, 32), Buffer.alloc(8192, 0x41)]), 'IMAGE_INVALID'],
      ['declaring 60000×60000', heicDeclaring(HEIC, 60_000, 60_000), 'IMAGE_TOO_LARGE'],
      ['declaring a size its coded data does not have', heicDeclaring(HEIC, 100, 100), 'IMAGE_INVALID'],
    ];
    for (const [name, bytes, code] of cases) {
      const res = await analyze(user.liveKey, bytes);
      expect(res.statusCode, name).toBe(422);
      expect(expectEnvelope(res.json()), name).toMatchObject({ code, retryable: false });
    }
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
    // The grant, and for a file whose header passed and whose pixels the worker refused, a
    // reservation and its release (docs/decisions.md, "Decoding after the reservation"): never a settle.
    const rows = (await p.db.query<{ kind: string; n: number; charged: string }>('SELECT kind, count(*)::int AS n, sum(charged_delta)::text AS charged FROM credit_ledger WHERE user_id = $1 GROUP BY kind ORDER BY kind', [user.userId])).rows;
    const byKind = Object.fromEntries(rows.map((r) => [r.kind, r.n]));
    expect(byKind.grant).toBe(1);
    expect(byKind.settle).toBeUndefined();
    expect(byKind.reserve ?? 0).toBe(byKind.release ?? 0);
    expect(rows.every((r) => r.charged === '0')).toBe(true);
    expect((await checkInvariants(p.db, user.userId))[0]!.ok).toBe(true);
    expect(await photoRows(user)).toEqual([]);
    expect(vendorSeen()).toEqual([]);
  });
});

describe('a BMP', () => {
  it('is analyzed and billed, and its fingerprint is that of the same pixels as PNG', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const { data, info } = await sharp(photoBytes('gps-DSCN0021.jpg')).resize(320, 240).raw().toBuffer({ resolveWithObject: true });
    const bmp = bmpOf(data, info.width, info.height);
    const png = await sharp(data, { raw: { width: info.width, height: info.height, channels: 3 } }).png().toBuffer();
    const res = await analyze(user.liveKey, bmp);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().usage.creditsCharged).toBe(1);
    expect(res.json().fingerprint.pHash).toBe((await fingerprint(png)).pHash);
    expect(vendorSeen()).toEqual([expect.objectContaining({ width: 320, height: 240 })]);
    expect(await photoRows(user)).toHaveLength(1);
  });

  it('a palette or RLE BMP (which the BMP decoder reads wrongly) is refused by name: nothing billed, stored or sent', async () => {
    const user = await createTestAccount(p.db, { community: 10 });
    const grey = Array.from({ length: 256 }, (_, i): [number, number, number] => [i, i, i]);
    const cases: Array<[Buffer, RegExp]> = [
      [bmpVariant(32, 32, { depth: 8, palette: grey, rows: Buffer.alloc(32 * 32, 77) }), /8-bit palette BMP is not supported; convert to PNG$/],
      [bmpVariant(32, 32, { depth: 8, compression: 1, palette: grey, rows: Buffer.from([32, 77, 0, 1]) }), /RLE8-compressed BMP is not supported; convert to PNG$/],
    ];
    for (const [bmp, message] of cases) {
      const res = await analyze(user.liveKey, bmp);
      expect(res.statusCode, res.body).toBe(422);
      expect(expectEnvelope(res.json())).toMatchObject({ code: 'IMAGE_INVALID', retryable: false, message: expect.stringMatching(message) });
      const found = await lookup(user.liveKey, [bmp]);
      expect(found.statusCode, found.body).toBe(422);
    }
    expect(await getBalance(p.db, user.userId)).toMatchObject({ community: 10, reserved: 0 });
    expect(await photoRows(user)).toEqual([]);
    expect(vendorSeen()).toEqual([]);
  });
});
