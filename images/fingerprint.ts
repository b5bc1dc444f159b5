import { createHash } from 'node:crypto';
import { DEFAULT_IMAGE_MAX_PIXELS } from '../core/config.ts';
import { AppError, corruptImage } from '../core/errors.ts';
import { decodeUpright, greyscale } from './decode.ts';
import { embedPixels } from './embedding.ts';
import { readHeader } from './open.ts';
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

export interface FingerprintOptions {
  /** Also compute the visual embedding (images/embedding.ts) from the same decode. */
  embedding?: boolean;
  /** The pixel limit the decode holds to: the configured IMAGE_MAX_PIXELS (its default when unset). */
  maxPixels?: number;
  /** The caller's connection: a HEIC/BMP decode still queued leaves when it aborts (images/foreign-decode.ts). */
  signal?: AbortSignal;
}

export async function fingerprint(bytes: Buffer, opts: FingerprintOptions = {}): Promise<Fingerprint & { embedding?: number[] }> {
  // Started first: libvips works on its own threads while this thread hashes the bytes.
  const hashing = perceptualHashes(bytes, opts);
  const header = readHeader(bytes);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const [hashes, meta] = await Promise.all([hashing, header]).catch((err: unknown) => {
    throw undecodable(err);
  });
  return { sha256, width: meta.upright.width, height: meta.upright.height, ...hashes };
}

export type PerceptualHashes = Pick<Fingerprint, 'pHash' | 'dHash'> & { embedding?: number[] };

/**
 * The perceptual half of the fingerprint, for a caller that already has the SHA-256 and the
 * header (intake): the one decode, the hashes and, when asked for, the embedding.
 */
export async function perceptualHashes(bytes: Buffer, opts: FingerprintOptions = {}): Promise<PerceptualHashes> {
  // A decode failure is deterministic: a non-retryable domain error, not something to retry.
  const px = await decodeUpright(bytes, { maxPixels: opts.maxPixels ?? DEFAULT_IMAGE_MAX_PIXELS, ...(opts.signal ? { signal: opts.signal } : {}) }).catch((err: unknown) => {
    if (opts.signal?.aborted) throw err; // the caller left: nothing to word
    throw undecodable(err);
  });
  const [grey, embedding] = await Promise.all([greyscale(px), opts.embedding ? embedPixels(px) : undefined]);
  const grey32 = boxDownsample(grey, px.width, px.height, HASH_GRID.dct, HASH_GRID.dct);
  const grey9x8 = boxDownsample(grey, px.width, px.height, HASH_GRID.gradientW, HASH_GRID.gradientH);
  return { pHash: dctHash(grey32), dHash: gradientHash(grey9x8), ...(embedding ? { embedding } : {}) };
}

function undecodable(err: unknown): Error {
  return corruptImage(err);
}
