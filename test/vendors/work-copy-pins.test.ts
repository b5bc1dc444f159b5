import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { fingerprint } from '../../images/fingerprint.ts';
import { JPEG_QUALITY, billedSize, prepareImage, type WorkCopy } from '../../vendors/resize.ts';
import { createWorkCopies } from '../../vendors/work-copies.ts';
import { photo } from './fixtures.ts';

/**
 * What the worker makes of a real photo, pinned (issue 22 §4: the worker's CPU per photo is cut
 * without changing any of it). The perceptual hashes a new photo gets in the worker are those its
 * registry entry is found by later (lookup and intake hash with images/fingerprint.ts), and each
 * vendor's upload is the size it bills; a faster path that moved a hash bit or a pixel of size
 * would break the registry or the bill.
 *
 * Pinned with sharp 0.35.5 / libvips 8.18.7, as test/images/fingerprint.test.ts.
 */
const VENDORS = ['openai', 'anthropic', 'google'] as const;

const PINNED = {
  // 3264×2448, a phone camera's JPEG: each vendor's copy decoded at its billed size (3.2× smaller
  // for OpenAI's, 2.1× for Google's), the hashes at 1/8.
  'mobile-jolla.jpg': {
    hashes: { pHash: 'c86a53d0fc59b11b', dHash: 'a1e163339694d8e8' },
    source: { width: 3264, height: 2448 },
    uploads: { openai: [1024, 768, 765], anthropic: [1267, 950, 1605], google: [1536, 1152, 1032] },
  },
  // Stored 2048×1536 with EXIF orientation 6: hashed and uploaded upright.
  'hdr-canon_hdr_NO.jpg': {
    hashes: { pHash: '98e976b2e41b19a9', dHash: '9be4b1b2a2b8d919' },
    source: { width: 1536, height: 2048 },
    uploads: { openai: [768, 1024, 765], anthropic: [950, 1267, 1605], google: [1152, 1536, 1032] },
  },
} as const;

const rawOf = (jpeg: Buffer) => sharp(jpeg).raw().toBuffer({ resolveWithObject: true });

describe("the worker's work copies and hashes of a real photo, pinned", () => {
  it.each(Object.entries(PINNED))('%s', async (name, pinned) => {
    const bytes = photo(name);
    let decoded = 0;
    const copies = createWorkCopies({ read: async () => bytes, maxBytes: 64 << 20, maxPixels: 100_000_000, onLookup: (o) => void (o === 'decoded' && decoded++) });
    const fp = await fingerprint(bytes);

    // Asked in the order each vendor bills more than the one before: each decodes again, at its own size.
    for (const [n, vendor] of VENDORS.entries()) {
      const { copy, hashes } = await copies.withHashes('a'.repeat(64), vendor);
      expect(decoded).toBe(n + 1);

      // The hashes: pinned, and the same as intake's and lookup's fingerprint of the same bytes.
      expect(hashes).toEqual(pinned.hashes);
      expect({ pHash: fp.pHash, dHash: fp.dHash }).toEqual(pinned.hashes);

      const [width, height, tokens] = pinned.uploads[vendor];
      expect(copy.source).toEqual(pinned.source);
      expect({ vendor, width: copy.width, height: copy.height }).toEqual({ vendor, width, height });
      expect(copy.pixels.length).toBe(width * height * 3);

      const upload = await prepareImage(vendor, copy);
      expect({ vendor, width: upload.width, height: upload.height, tokens: upload.tokens }).toEqual({ vendor, width, height, tokens });
      expect(billedSize(vendor, copy.source.width, copy.source.height)).toEqual({ width, height });
      const decodedUpload = await rawOf(upload.data);
      expect({ width: decodedUpload.info.width, height: decodedUpload.info.height, format: (await sharp(upload.data).metadata()).format }).toEqual({ width, height, format: 'jpeg' });
      // The encode's Huffman tables are the standard ones (no second pass): lossless, so the pixels
      // are those of sharp's default encode (per-image tables) of the same copy.
      const reference = await sharpDefaultUpload(copy, { width, height });
      expect(reference.length).not.toBe(upload.data.length);
      expect(decodedUpload.data.equals((await rawOf(reference)).data)).toBe(true);
    }
  });
});

/** The upload as it was made before issue 22 §4: the copy resized to the billed size, sharp's default JPEG options. */
function sharpDefaultUpload(copy: WorkCopy, size: { width: number; height: number }): Promise<Buffer> {
  let pipeline = sharp(copy.pixels, { raw: { width: copy.width, height: copy.height, channels: 3 } });
  if (size.width !== copy.width || size.height !== copy.height) pipeline = pipeline.resize(size.width, size.height, { fit: 'fill' });
  return pipeline.flatten({ background: '#ffffff' }).jpeg({ quality: JPEG_QUALITY }).toBuffer();
}
