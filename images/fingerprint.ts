import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { imageInvalid } from '../core/errors.ts';
import { DECODE_FAIL_ON } from './probe.ts';
import { HASH_GRID, boxDownsample, dctHash, gradientHash } from './perceptual-hash.ts';

export { hammingDistance } from './perceptual-hash.ts';

/**
 * The registry's identity of a photo: SHA-256 of the exact bytes, plus DCT (pHash) and gradient
 * (dHash) perceptual hashes of the upright picture. See perceptual-hash.ts for the bit order.
 *
 * blockhash (blockhash-core) is not used: it is a third, different hash. It would earn a place
 * only as a second fuzzy signal if pHash alone gave too many false matches on crops or heavy
 * edits, because it works on block means of the full-size image; that needs its own decode at a
 * larger size, so we would add it only with evidence of need.
 */

export interface Fingerprint {
  sha256: string;
  pHash: string;
  dHash: string;
  /** Upright size, after EXIF orientation. */
  width: number;
  height: number;
}

// One greyscale intermediate that both grids divide exactly: 288 = 9·32, 256 = 8·32, so each
// pHash pixel is a 9×8 block mean and each dHash pixel a 32×32 block mean.
const INTER_W = HASH_GRID.gradientW * HASH_GRID.dct;
const INTER_H = HASH_GRID.gradientH * HASH_GRID.dct;

export async function fingerprint(bytes: Buffer): Promise<Fingerprint> {
  // Started first: libvips works on its own threads while this thread hashes the bytes.
  const decoding = sharp(bytes, { failOn: DECODE_FAIL_ON })
    .autoOrient() // same as .rotate() without arguments
    .flatten({ background: '#ffffff' }) // transparent pixels have arbitrary colour underneath
    .resize(INTER_W, INTER_H, { fit: 'fill' }) // shrink-on-load: a 12 MP JPEG decodes at 1/8
    .greyscale()
    .raw({ depth: 'uchar' })
    .toBuffer({ resolveWithObject: true });
  const header = sharp(bytes).metadata();
  const sha256 = createHash('sha256').update(bytes).digest('hex');

  // A decode failure is deterministic: a non-retryable domain error, not something to retry.
  const [{ data, info }, meta] = await Promise.all([decoding, header]).catch((err: unknown) => {
    throw imageInvalid(`Image could not be decoded for fingerprinting: ${err instanceof Error ? err.message.split('\n').at(-1) : String(err)}`);
  });
  if (info.channels !== 1 || info.width !== INTER_W || info.height !== INTER_H) {
    throw new Error(`unexpected intermediate ${info.width}×${info.height}×${info.channels}`);
  }
  const pixels = new Uint8Array(data.buffer, data.byteOffset, data.length);
  const grey32 = boxDownsample(pixels, INTER_W, INTER_H, HASH_GRID.dct, HASH_GRID.dct);
  const grey9x8 = boxDownsample(pixels, INTER_W, INTER_H, HASH_GRID.gradientW, HASH_GRID.gradientH);
  return {
    sha256,
    pHash: dctHash(grey32),
    dHash: gradientHash(grey9x8),
    width: meta.autoOrient.width,
    height: meta.autoOrient.height,
  };
}
