import { createHash } from 'node:crypto';
import { AppError, imageTooLarge, validationFailed } from '../core/errors.ts';
import { decodeBase64Image } from './base64.ts';
import type { BlobStore } from './blobstore.ts';
import { fetchImage, type FetchPolicy } from './fetch.ts';
import { isDecoderRefusal } from './foreign-decode.ts';
import { fingerprint, perceptualHashes, type Fingerprint, type FingerprintOptions, type PerceptualHashes } from './fingerprint.ts';
import { probeImage, type ImageFormat } from './probe.ts';

/**
 * Takes one request image in (URL or base64), accepts it only if it decodes within the limits,
 * fingerprints it with that same decode, and stores it under its SHA-256. Returns a small
 * reference; the bytes stay in the blob store.
 */

export interface IntakeInput {
  url?: string;
  base64?: string;
  /** Bytes already here (a finished console upload). */
  bytes?: Buffer;
}

export interface IntakeDeps {
  blobs: BlobStore;
  /** IMAGE_MAX_BYTES: largest image accepted, fetched or decoded. */
  maxBytes: number;
  /** IMAGE_MAX_PIXELS: largest width × height accepted. */
  maxPixels: number;
  /** How image URLs are fetched (address policy, resolver, timeouts). */
  fetchPolicy: FetchPolicy;
  /**
   * The caller's own registry entry for a photo: a photo this account analyzed before was fully
   * decoded then, so its hashes are reused and a header read is enough.
   */
  knownFingerprint?: (sha256: string) => Promise<Pick<Fingerprint, 'pHash' | 'dHash'> | null>;
  /**
   * Records that this intake uses the bytes, before the blob store is asked (registry/photos.ts
   * markBlobUse): a photo erased meanwhile keeps its blob for this run.
   */
  markUse?: (sha256: string) => Promise<string>;
  /** Ends a use `markUse` began (an intake that failed after it). */
  releaseUse?: (useId: string) => Promise<void>;
}

export interface ImageIntake {
  sha256: string;
  format: ImageFormat;
  /** Upright size (EXIF orientation applied). */
  width: number;
  height: number;
  /** Size of the stored file in bytes. */
  bytes: number;
  /** Perceptual hashes: the one decode that checks the image also fingerprints it. */
  pHash: string;
  dHash: string;
  /** Whether this intake wrote the blob (nobody had stored these bytes before). */
  stored: boolean;
  /** Whether the caller's registry holds the photo; undefined when it was not asked (embedding). */
  registered?: boolean;
  /** The visual embedding, from the same decode, when `embedding` was asked for. */
  embedding?: number[];
  /** The use of the bytes `markUse` began: the caller ends it once its run ended or the bytes are kept otherwise. */
  useId?: string;
}

export interface IntakeOptions {
  /** Compute the embedding (options.includeEmbedding) with the decode that fingerprints. */
  embedding?: boolean;
}

export async function intakeImage(input: IntakeInput, deps: IntakeDeps, opts: IntakeOptions = {}): Promise<ImageIntake> {
  const bytes = await readInput(input, deps);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  // Only the caller's own registry spares the decode (unless the embedding needs it): whether
  // another account sent these bytes must not change what this request costs or how long it takes.
  // Asked while the header is read; a refused header makes the answer moot.
  const [probed, known] = await Promise.all([
    probeImage(bytes, { maxPixels: deps.maxPixels, decode: false }),
    opts.embedding ? undefined : deps.knownFingerprint?.(sha256),
  ]);
  const base = { sha256, format: probed.format, width: probed.width, height: probed.height, bytes: bytes.length };
  const useId = await deps.markUse?.(sha256);
  try {
    return { ...(await store(bytes, sha256, base, known, deps, opts)), ...(useId ? { useId } : {}) };
  } catch (err) {
    if (useId) await deps.releaseUse?.(useId);
    throw err;
  }
}

async function store(
  bytes: Buffer,
  sha256: string,
  base: Pick<ImageIntake, 'sha256' | 'format' | 'width' | 'height' | 'bytes'>,
  known: Pick<Fingerprint, 'pHash' | 'dHash'> | null | undefined,
  deps: IntakeDeps,
  opts: IntakeOptions,
): Promise<ImageIntake> {
  if (known) {
    const stored = await deps.blobs.put(sha256, bytes);
    return { ...base, pHash: known.pHash, dHash: known.dHash, stored, registered: true };
  }
  // The blob is written while the image decodes; an image that fails the decode check takes back
  // the blob it wrote (a crash in between leaves it to the blob collector).
  const [hashes, put] = await Promise.allSettled([checkedHashes(bytes, deps.maxPixels, opts), deps.blobs.put(sha256, bytes)]);
  if (hashes.status === 'rejected') {
    if (put.status === 'fulfilled' && put.value) await deps.blobs.delete(sha256);
    throw hashes.reason;
  }
  if (put.status === 'rejected') throw put.reason;
  const fp = hashes.value;
  return {
    ...base,
    pHash: fp.pHash,
    dHash: fp.dHash,
    stored: put.value,
    ...(known === null ? { registered: false } : {}),
    ...(fp.embedding ? { embedding: fp.embedding } : {}),
  };
}

/**
 * Fingerprint bytes whose header probe passed. The fingerprint's decode (at reduced size) is the
 * decode check: it rejects corrupt or truncated data, and yields the hashes.
 */
export async function checkedFingerprint(bytes: Buffer, maxPixels: number, opts: FingerprintOptions = {}): Promise<Fingerprint & { embedding?: number[] }> {
  return decodeChecked(bytes, maxPixels, () => fingerprint(bytes, { ...opts, maxPixels }));
}

/** `checkedFingerprint` without the SHA-256 and header the caller already has. */
function checkedHashes(bytes: Buffer, maxPixels: number, opts: FingerprintOptions): Promise<PerceptualHashes> {
  return decodeChecked(bytes, maxPixels, () => perceptualHashes(bytes, { ...opts, maxPixels }));
}

async function decodeChecked<T>(bytes: Buffer, maxPixels: number, decode: () => Promise<T>): Promise<T> {
  try {
    return await decode();
  } catch (err) {
    // The HEIC/BMP decoder's refusals are already precise, and decoding again costs seconds; a
    // server-side failure (busy, decoder down: retryable) is not the image's, nor worth a second decode.
    if (isDecoderRefusal(err) || (err instanceof AppError && err.retryable)) throw err;
    // The probe's own decode check words the refusal precisely (pixel limit, truncation).
    await probeImage(bytes, { maxPixels, decode: true });
    throw err;
  }
}

/** The request image's bytes: SSRF-safe fetch of its URL, or its base64 decoded, within maxBytes. */
export async function readInput(input: IntakeInput, deps: Pick<IntakeDeps, 'maxBytes' | 'fetchPolicy'>): Promise<Buffer> {
  const hasUrl = input.url !== undefined;
  const hasBase64 = input.base64 !== undefined;
  if (input.bytes !== undefined && !hasUrl && !hasBase64) {
    if (input.bytes.length > deps.maxBytes) throw imageTooLarge(`Image is ${input.bytes.length} bytes, over the ${deps.maxBytes}-byte limit`);
    return input.bytes;
  }
  if (hasUrl === hasBase64 || input.bytes !== undefined) throw validationFailed('Provide exactly one of an image URL or base64 image data');
  if (hasUrl) {
    const { bytes } = await fetchImage(input.url!, { ...deps.fetchPolicy, maxBytes: deps.maxBytes });
    return bytes;
  }
  return decodeBase64Image(input.base64!, deps.maxBytes);
}
