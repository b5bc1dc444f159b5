import { mapBounded } from '../core/map-bounded.ts';
import type { Config } from '../core/config.ts';
import type { Db } from '../db/pool.ts';
import type { BlobStore } from '../images/blobstore.ts';
import type { FetchPolicy } from '../images/fetch.ts';
import { AppError } from '../core/errors.ts';
import { intakeImage, type ImageIntake, type IntakeDeps, type IntakeInput } from '../images/intake.ts';
import type { FinishedUpload } from '../uploads/service.ts';
import { leaseBlob, releaseLeases } from '../registry/blob-leases.ts';
import { deleteUnreferencedBlobs, photoFingerprint } from '../registry/photos.ts';
import type { ImageRef } from '../workflows/types.ts';
import type { AnalysisRequest } from './request.ts';
import type { Progress } from './progress.ts';
import type { AnalyzeDeps } from './service.ts';

/** Images taken in at once per request (each is a fetch or a base64 decode, a decode and a write). */
const INTAKE_CONCURRENCY = 4;

export interface TakenImages {
  refs: ImageRef[];
  /** By SHA-256, when the caller asked for embeddings: made by intake's one decode. */
  embeddings: Map<string, number[]>;
  /** False when a photo is known to be new to the caller's registry (then nothing can be a cache hit). */
  allRegistered: boolean;
}

type IntakeContext = { config: Pick<Config, 'IMAGE_MAX_BYTES' | 'IMAGE_MAX_PIXELS' | 'BLOB_GC_GRACE_MS'>; db: Db; blobs: BlobStore; fetchPolicy: FetchPolicy };

/**
 * What intake needs for one account's photos: the limits, the store, the fetch policy, its
 * registry, and `holder`'s leases on the blobs it takes in (registry/blob-leases.ts). A lease lasts
 * until its holder releases it, or BLOB_GC_GRACE_MS (longer than any run) if the holder dies.
 */
export function intakeDepsFor(deps: IntakeContext, userId: string, holder: string): IntakeDeps {
  return {
    blobs: deps.blobs,
    maxBytes: deps.config.IMAGE_MAX_BYTES,
    maxPixels: deps.config.IMAGE_MAX_PIXELS,
    fetchPolicy: deps.fetchPolicy,
    knownFingerprint: (sha256) => photoFingerprint(deps.db, userId, sha256),
    lease: {
      take: (sha256) => leaseBlob(deps.db, { holder, sha256, ttlMs: deps.config.BLOB_GC_GRACE_MS }),
      forget: async (sha256) => {
        await releaseLeases(deps.db, holder, [sha256]);
        await deleteUnreferencedBlobs(deps.db, deps.blobs, [sha256]);
      },
    },
  };
}

/**
 * A finished upload taken in without reading it: its bytes are in the store under their SHA-256 and
 * its header was probed when the upload finished (uploads/service.ts), so intake only takes its
 * lease and asks the caller's registry for its hashes (the worker makes them otherwise).
 */
export async function takeUpload(deps: IntakeDeps, upload: FinishedUpload): Promise<ImageIntake> {
  await deps.lease?.take(upload.sha256);
  const known = await deps.knownFingerprint?.(upload.sha256);
  return {
    sha256: upload.sha256,
    format: upload.format,
    width: upload.width,
    height: upload.height,
    bytes: upload.size,
    pHash: known?.pHash ?? null,
    dHash: known?.dHash ?? null,
    stored: false,
    ...(known === undefined ? {} : { registered: known !== null }),
  };
}

/** An image as the workflows carry it. */
export const refOf = (img: ImageIntake): ImageRef => ({ sha256: img.sha256, format: img.format, width: img.width, height: img.height, pHash: img.pHash, dHash: img.dHash });

/**
 * One photo of a batch taken in, or the reason intake refused it (bad bytes, too large, a URL the
 * address policy or the host refused): one bad photo of thousands is an answer, not a failure.
 * Anything else (the store, the database) is thrown.
 */
export async function takeBatchPhoto(
  deps: IntakeContext,
  userId: string,
  input: IntakeInput | { upload: FinishedUpload },
  /** Whose lease holds the photo's blob until the batch item names it (registry/blob-leases.ts). */
  holder: string,
): Promise<{ ref: ImageRef; stored: boolean } | { refused: { code: string; message: string } }> {
  try {
    const taking = intakeDepsFor(deps, userId, holder);
    const img = 'upload' in input && input.upload ? await takeUpload(taking, input.upload) : await intakeImage(input as IntakeInput, taking);
    return { ref: refOf(img), stored: img.stored };
  } catch (err) {
    if (err instanceof AppError && err.status < 500) return { refused: { code: err.code, message: err.message } };
    throw err;
  }
}

/** Take the request's images in (images/intake.ts); every blob written is noted in `progress`. */
export async function takeImages(deps: AnalyzeDeps, userId: string, request: AnalysisRequest, progress: Progress): Promise<TakenImages> {
  const embeddings = new Map<string, number[]>();
  let allRegistered = true;
  const refs = await mapBounded(request.inputs, INTAKE_CONCURRENCY, async (input): Promise<ImageRef> => {
    const taking = intakeDepsFor(deps, userId, progress.holder);
    // An upload's bytes are in the blob store already (stored once, when it finished): nothing to
    // read unless the embedding needs a decode here.
    const img = input.upload && !request.includeEmbedding
      ? await takeUpload(taking, input.upload)
      : await intakeImage(input.upload ? { bytes: await deps.uploads!.bytes(input.upload) } : input, taking, { embedding: request.includeEmbedding, ...(deps.signal ? { signal: deps.signal } : {}) });
    if (img.stored) progress.stored.push(img.sha256);
    if (img.embedding) embeddings.set(img.sha256, img.embedding);
    if (img.registered === false) allRegistered = false;
    return refOf(img);
  });
  return { refs, embeddings, allRegistered };
}

/** The local visual embedding of each image, from intake. */
export function embeddingOf(taken: TakenImages, sha256: string): number[] {
  const embedding = taken.embeddings.get(sha256);
  if (!embedding) throw new Error(`no embedding was made for ${sha256} at intake`);
  return embedding;
}
