import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import type { AppError } from '../../core/errors.ts';
import { fingerprint, hammingDistance } from '../../images/fingerprint.ts';
import { decodeForeign, decodeQueue, isDecoderRefusal } from '../../images/foreign-decode.ts';
import { THRESHOLD } from '../../registry/lookup.ts';
import { createWorkCopies } from '../../vendors/work-copies.ts';
import { withHeicDecoder } from '../helpers/heic-decoder.ts';
import { mutate } from '../hostile/images/mutate.ts';
import { SEED } from '../hostile/sizes.ts';
import { prng } from '../hostile/support/prng.ts';
import { photo } from './photos.ts';

/**
 * The fingerprint of a HEIC is made from its embedded thumbnail when it carries one that fits
 * (images/heif-decode.c, fingerprint_thumbnail; docs/decisions.md, "The fingerprint of a HEIC"),
 * and from its full decode otherwise; the image itself (the vendor's work copy, probe's check) is
 * always decoded whole, and an analysis still decodes it once.
 */

/** The iPhone original: no thumbnail (its picture was edited and exported without one). */
const HEIC = photo('heic-IMG_5195.HEIC');
const HEIC_AS_JPEG = photo('heic-IMG_5195.heif-convert.jpg');
/** The same picture encoded by libheif's heif-enc with a thumbnail of 320 pixels a side, as an iPhone writes one (test/fixtures/crafted/README.md). */
const WITH_THUMBNAIL = readFileSync(new URL('../fixtures/crafted/heic-IMG_5195.thumbnail.heic', import.meta.url));
const THUMBNAIL_SIZE = { width: 246, height: 320 };
const IMAGE_SIZE = { width: 2566, height: 3313 };
const limits = { maxPixels: 100_000_000 };
/** The fingerprint of WITH_THUMBNAIL from its thumbnail (2 and 1 bits from its full decode's: a4f7d0c2176afc84, 444d266e56a1c7ae). */
const PINNED = { pHash: 'a4f7d0c2156afc85', dHash: '444d266e56a1d7ae' };
/**
 * How far a thumbnail's pHash may be from the full decode's: the most measured over the shared
 * photos as HEICs with libheif's 320-pixel thumbnails (docs/decisions.md, "The fingerprint of a HEIC").
 */
const MAX_DISTANCE = 4;
const sizeOf = (d: { width: number; height: number }) => ({ width: d.width, height: d.height });
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** The hashes of the HEIC's full decode: the same pixels as a lossless PNG go through the same fingerprint pipeline. */
async function fullDecodeHashes(heic: Buffer): Promise<{ pHash: string; dHash: string }> {
  const { pixels, width, height } = await decodeForeign('heif', heic, limits.maxPixels);
  const { pHash, dHash } = await fingerprint(await sharp(pixels, { raw: { width, height, channels: 3 } }).png({ compressionLevel: 0 }).toBuffer());
  return { pHash, dHash };
}

/** A copy whose thumbnail's image-size property (ispe) declares `width`×`height` instead. */
function thumbnailDeclaring(heic: Buffer, width: number, height: number): Buffer {
  const out = Buffer.from(heic);
  let patched = 0;
  for (let at = out.indexOf('ispe'); at >= 0; at = out.indexOf('ispe', at + 4)) {
    if (out.readUInt32BE(at + 8) !== THUMBNAIL_SIZE.width || out.readUInt32BE(at + 12) !== THUMBNAIL_SIZE.height) continue;
    out.writeUInt32BE(width, at + 8);
    out.writeUInt32BE(height, at + 12);
    patched += 1;
  }
  if (patched !== 1) throw new Error(`expected one thumbnail ispe box, patched ${patched}`);
  return out;
}

describe('native decoder: a HEIC is fingerprinted from its thumbnail when it carries one that fits', () => {
  withHeicDecoder('native');

  it("a fingerprint's decode is the thumbnail; the image's decode is the whole image", async () => {
    expect(sizeOf(await decodeForeign('heif', WITH_THUMBNAIL, limits.maxPixels, { purpose: 'fingerprint' }))).toEqual(THUMBNAIL_SIZE);
    expect(sizeOf(await decodeForeign('heif', WITH_THUMBNAIL, limits.maxPixels))).toEqual(IMAGE_SIZE);
  });

  it("its fingerprint is pinned, near its full decode's, and matches the iPhone original and the JPEG export at lookup's default threshold", async () => {
    const [fp, full, original, jpeg] = await Promise.all([fingerprint(WITH_THUMBNAIL), fullDecodeHashes(WITH_THUMBNAIL), fingerprint(HEIC), fingerprint(HEIC_AS_JPEG)]);
    // The upright size is the image's, read from its header, not the thumbnail's.
    expect(fp).toMatchObject({ ...PINNED, ...IMAGE_SIZE });
    expect(hammingDistance(fp.pHash, full.pHash)).toBeLessThanOrEqual(MAX_DISTANCE);
    expect(hammingDistance(fp.dHash, full.dHash)).toBeLessThanOrEqual(MAX_DISTANCE);
    expect(hammingDistance(fp.pHash, original.pHash)).toBeLessThanOrEqual(THRESHOLD.default);
    expect(hammingDistance(fp.pHash, jpeg.pHash)).toBeLessThanOrEqual(THRESHOLD.default);
  });

  it('a HEIC without a thumbnail (the iPhone original) is fingerprinted from its full decode, as before', async () => {
    expect(sizeOf(await decodeForeign('heif', HEIC, limits.maxPixels, { purpose: 'fingerprint' }))).toEqual(IMAGE_SIZE);
    const [fp, full] = await Promise.all([fingerprint(HEIC), fullDecodeHashes(HEIC)]);
    expect({ pHash: fp.pHash, dHash: fp.dHash }).toEqual(full);
  });

  it('a thumbnail whose proportions are not the image\'s is not taken: the image is decoded', async () => {
    const skewed = thumbnailDeclaring(WITH_THUMBNAIL, THUMBNAIL_SIZE.width, THUMBNAIL_SIZE.height - 20);
    expect(sizeOf(await decodeForeign('heif', skewed, limits.maxPixels, { purpose: 'fingerprint' }))).toEqual(IMAGE_SIZE);
  });

  it('a fingerprint that finds no thumbnail shares the decode of the image under way: one full decode', async () => {
    const before = decodeQueue.started;
    const [image, picture] = await Promise.all([decodeForeign('heif', HEIC, limits.maxPixels), decodeForeign('heif', Buffer.from(HEIC), limits.maxPixels, { purpose: 'fingerprint' })]);
    // Booleans, not the objects: a failed assertion must not pretty-print 25 MB of pixels.
    expect(picture === image).toBe(true);
    // The image's decode, and the question for a thumbnail, answered without decoding anything.
    expect(decodeQueue.started - before).toBe(2);
  });

  it("the worker's analysis decodes a HEIC whole once (its work copy, and its hashes from the thumbnail or from that same decode), and again only on a fallback to a vendor billing more", async () => {
    for (const [heic, decoders] of [
      [HEIC, 2], // the image, and the question for a thumbnail
      [WITH_THUMBNAIL, 2], // the image, and its thumbnail
    ] as const) {
      const copies = createWorkCopies({ read: async () => heic, maxBytes: 1 << 30, maxPixels: limits.maxPixels });
      const before = decodeQueue.started;
      const { copy, hashes } = await copies.withHashes(sha256(heic), 'openai');
      expect(decodeQueue.started - before).toBe(decoders);
      expect(copy.source).toEqual(IMAGE_SIZE);
      const fp = await fingerprint(heic);
      expect(hashes).toEqual({ pHash: fp.pHash, dHash: fp.dHash });
      // Google bills 1190×1536 where OpenAI bills 768×992: the image decoded whole again, its hashes kept.
      const atGoogle = decodeQueue.started;
      const larger = await copies.withHashes(sha256(heic), 'google');
      expect(decodeQueue.started - atGoogle).toBe(1);
      expect({ width: larger.copy.width, height: larger.copy.height, hashes: larger.hashes }).toEqual({ width: 1190, height: 1536, hashes });
      // Anthropic bills less than Google: served from Google's copy, nothing decoded.
      expect(await copies.get(sha256(heic), 'anthropic')).toBe(larger.copy);
      expect(decodeQueue.started - atGoogle).toBe(1);
    }
  });

  it('asked for its thumbnail, a truncated HEIC is refused as corrupt (422, final), as its full decode is', async () => {
    for (const cut of [WITH_THUMBNAIL.length - 1_000, Math.floor(WITH_THUMBNAIL.length / 2)]) {
      const truncated = WITH_THUMBNAIL.subarray(0, cut);
      const err = (await decodeForeign('heif', truncated, limits.maxPixels, { purpose: 'fingerprint' }).catch((e: unknown) => e)) as AppError;
      expect(err).toMatchObject({ code: 'IMAGE_INVALID', status: 422, message: expect.stringMatching(/corrupt or truncated/) });
      expect(isDecoderRefusal(err)).toBe(true);
      await expect(fingerprint(truncated)).rejects.toMatchObject({ code: 'IMAGE_INVALID', status: 422 });
    }
  });

  it('byte mutants asked for their fingerprint picture decode (thumbnail or image) or are refused with a 422, never a server error', async () => {
    const random = prng(SEED).fork('heic-thumbnail-mutants');
    for (let i = 0; i < 8; i++) {
      const m = mutate(WITH_THUMBNAIL, random);
      const outcome = await decodeForeign('heif', m.bytes, limits.maxPixels, { purpose: 'fingerprint' }).then(
        (d) => ({ decoded: `${d.width}×${d.height}` }),
        (err: AppError) => ({ refused: err.status }),
      );
      expect([{ decoded: '246×320' }, { decoded: '2566×3313' }, { refused: 422 }], m.recipe).toContainEqual(outcome);
    }
  });
});

describe('WASM fallback: a HEIC is fingerprinted from its full decode (libheif-js is not asked for thumbnails)', () => {
  withHeicDecoder('wasm');

  it('decodes the image for a fingerprint, which comes within the native decoder\'s thumbnail fingerprint by the same distance', async () => {
    expect(sizeOf(await decodeForeign('heif', WITH_THUMBNAIL, limits.maxPixels, { purpose: 'fingerprint' }))).toEqual(IMAGE_SIZE);
    const fp = await fingerprint(WITH_THUMBNAIL);
    expect(hammingDistance(fp.pHash, PINNED.pHash)).toBeLessThanOrEqual(MAX_DISTANCE);
    expect(hammingDistance(fp.dHash, PINNED.dHash)).toBeLessThanOrEqual(MAX_DISTANCE);
  });
});
