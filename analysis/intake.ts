import { mapBounded } from '../core/map-bounded.ts';
import type { Config } from '../core/config.ts';
import type { Db } from '../db/pool.ts';
import type { BlobStore } from '../images/blobstore.ts';
import type { FetchPolicy } from '../images/fetch.ts';
import { AppError } from '../core/errors.ts';
import { intakeImage, type ImageIntake, type IntakeDeps, type IntakeInput } from '../images/intake.ts';
import { markBlobUse, photoFingerprint, releaseBlobUses } from '../registry/photos.ts';
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

/** What intake needs for one account's photos: the limits, the store, the fetch policy, its registry. */
export function intakeDepsFor(deps: { config: Pick<Config, 'IMAGE_MAX_BYTES' | 'IMAGE_MAX_PIXELS'>; db: Db; blobs: BlobStore; fetchPolicy: FetchPolicy }, userId: string): IntakeDeps {
  return {
    blobs: deps.blobs,
    maxBytes: deps.config.IMAGE_MAX_BYTES,
    maxPixels: deps.config.IMAGE_MAX_PIXELS,
    fetchPolicy: deps.fetchPolicy,
    knownFingerprint: (sha256) => photoFingerprint(deps.db, userId, sha256),
    markUse: (sha256) => markBlobUse(deps.db, sha256),
    releaseUse: (useId) => releaseBlobUses(deps.db, [useId]),
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
  deps: Parameters<typeof intakeDepsFor>[0],
  userId: string,
  input: IntakeInput,
): Promise<{ ref: ImageRef; stored: boolean; useId?: string } | { refused: { code: string; message: string } }> {
  try {
    const img = await intakeImage(input, intakeDepsFor(deps, userId));
    return { ref: refOf(img), stored: img.stored, ...(img.useId ? { useId: img.useId } : {}) };
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
    // An upload's bytes are in the blob store already (stored once, when it finished).
    const source = input.upload ? { bytes: await deps.uploads!.bytes(input.upload) } : input;
    const img = await intakeImage(source, intakeDepsFor(deps, userId), { embedding: request.includeEmbedding });
    if (img.stored) progress.stored.push(img.sha256);
    if (img.useId) progress.uses.push(img.useId);
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
