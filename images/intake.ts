import { createHash } from 'node:crypto';
import { AppError, imageTooLarge, validationFailed } from '../core/errors.ts';
import { decodeBase64Image } from './base64.ts';
import type { BlobStore } from './blobstore.ts';
import { fetchImage, type FetchPolicy } from './fetch.ts';
import { isDecoderRefusal } from './foreign-decode.ts';
import { fingerprint, perceptualHashes, type Fingerprint, type FingerprintOptions, type PerceptualHashes } from './fingerprint.ts';
import { probeImage, type ImageFormat } from './probe.ts';

/**
 * Takes one request image in (URL, base64 or bytes): reads it within the size limit, hashes it,
 * checks its header (a format we accept, dimensions within the pixel limit) and stores it under
 * its SHA-256. Returns a small reference; the bytes stay in the blob store.
 *
 * The photo is not decoded here unless an embedding is asked for: the worker's one decode makes
 * its work copy and its perceptual hashes after the credits are reserved, and a photo that fails
 * only there is refused 422 with its reservation released, never billed (docs/decisions.md,
 * "Decoding after the reservation"). A photo the caller's registry holds takes its hashes from there.
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
   * The caller's hold on the blob (registry/blob-leases.ts): `take` before it is stored, so no
   * other request's clean-up or the collector deletes bytes this intake found stored; `release`
   * to give it back for an image refused at its header (nothing stored); `forget` to give back
   * what an image refused at decode stored (deleted unless someone else holds it).
   * Without it (tests of intake alone) a refused image's blob is deleted outright.
   */
  lease?: { take(sha256: string): Promise<void>; release(sha256: string): Promise<void>; forget(sha256: string): Promise<void> };
}

export interface ImageIntake {
  sha256: string;
  format: ImageFormat;
  /** Upright size (EXIF orientation applied). */
  width: number;
  height: number;
  /** Size of the stored file in bytes. */
  bytes: number;
  /** Perceptual hashes, when known here (registry, or the embedding's decode); null otherwise. */
  pHash: string | null;
  dHash: string | null;
  /** Whether this intake wrote the blob (nobody had stored these bytes before). */
  stored: boolean;
  /** Whether the caller's registry holds the photo; undefined when it was not asked (embedding). */
  registered?: boolean;
  /** The visual embedding, from the same decode, when `embedding` was asked for. */
  embedding?: number[];
}

export interface IntakeOptions {
  /** Compute the embedding (options.includeEmbedding) with the decode that fingerprints. */
  embedding?: boolean;
  /** The caller's connection: when it aborts, a HEIC/BMP decode still queued is dropped. */
  signal?: AbortSignal;
}

export async function intakeImage(input: IntakeInput, deps: IntakeDeps, opts: IntakeOptions = {}): Promise<ImageIntake> {
  const bytes = await readInput(input, deps);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  // Only the caller's own registry spares the decode (unless the embedding needs it): whether
  // another account sent these bytes must not change what this request costs or how long it takes.
  // Asked while the header is read, as the lease is taken; a refused header makes the answer moot
  // and gives the lease back, so a refused photo leaves nothing behind.
  // Once the header passes, the bytes are written where nobody sees them while the registry and
  // the lease answer, and named only once the lease holds them (a store that writes in one step
  // is written then): a blob must not appear before its lease, or another request's clean-up
  // could take it under this one (registry/blob-leases.ts). A photo refused at its header writes
  // nothing. The key was computed from these very bytes just above: the store does not hash them again.
  const probing = probeImage(bytes, { maxPixels: deps.maxPixels, decode: false });
  const staging = deps.blobs.stage ? probing.then(() => deps.blobs.stage!(sha256, bytes, { verified: true })) : undefined;
  staging?.catch(() => {}); // awaited below, or discarded with the refusal
  const [header, registry, leased] = await Promise.allSettled([
    probing,
    opts.embedding ? undefined : deps.knownFingerprint?.(sha256),
    deps.lease?.take(sha256),
  ]);
  if (header.status === 'rejected' || registry.status === 'rejected' || leased.status === 'rejected') {
    // The refusal is the answer: a failed release is left to the lease's expiry, never a 500.
    await Promise.all([
      leased.status === 'fulfilled' ? deps.lease?.release(sha256).catch(() => {}) : undefined,
      staging?.then((s) => s.discard()).catch(() => {}),
    ]);
    throw [header, registry, leased].find((r) => r.status === 'rejected')!.reason;
  }
  const store = async () => (staging ? (await staging).commit() : deps.blobs.put(sha256, bytes, { verified: true }));
  const probed = header.value;
  const known = registry.value;
  const base = { sha256, format: probed.format, width: probed.width, height: probed.height, bytes: bytes.length };
  if (known) {
    const stored = await store();
    return { ...base, pHash: known.pHash, dHash: known.dHash, stored, registered: true };
  }
  if (!opts.embedding) {
    const stored = await store();
    return { ...base, pHash: null, dHash: null, stored, ...(known === null ? { registered: false } : {}) };
  }
  // The embedding needs the decode here. The blob is named while the image decodes; an image that fails the decode check takes back
  // the blob it wrote unless another request holds it (a crash in between leaves it to the blob collector).
  const [hashes, put] = await Promise.allSettled([checkedHashes(bytes, deps.maxPixels, opts), store()]);
  if (hashes.status === 'rejected') {
    if (put.status === 'fulfilled' && put.value) await (deps.lease ? deps.lease.forget(sha256) : deps.blobs.delete(sha256));
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
  return decodeChecked(bytes, maxPixels, () => fingerprint(bytes, { ...opts, maxPixels }), opts.signal);
}

/** `checkedFingerprint` without the SHA-256 and header the caller already has. */
function checkedHashes(bytes: Buffer, maxPixels: number, opts: FingerprintOptions): Promise<PerceptualHashes> {
  return decodeChecked(bytes, maxPixels, () => perceptualHashes(bytes, { ...opts, maxPixels }), opts.signal);
}

/**
 * The worker's fingerprint of a photo intake took in without decoding it: the same decode, hashes
 * and refusal wording as intake's own check, so analyze and lookup agree on the pHash.
 */
export async function decodeCheckedHashes(bytes: Buffer, maxPixels: number): Promise<{ pHash: string; dHash: string }> {
  const { pHash, dHash } = await checkedHashes(bytes, maxPixels, {});
  return { pHash, dHash };
}

async function decodeChecked<T>(bytes: Buffer, maxPixels: number, decode: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  try {
    return await decode();
  } catch (err) {
    // The caller went away: no second decode to word a refusal nobody reads.
    if (signal?.aborted) throw err;
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
