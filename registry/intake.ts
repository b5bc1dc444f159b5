import type { Config } from '../core/config.ts';
import { AppError } from '../core/errors.ts';
import type { Db } from '../db/pool.ts';
import type { BlobStore } from '../images/blobstore.ts';
import type { FetchPolicy } from '../images/fetch.ts';
import { intakeImage, type ImageIntake, type IntakeDeps, type IntakeInput } from '../images/intake.ts';
import type { ImageFormat } from '../images/probe.ts';
import type { ImageRef } from '../workflows/types.ts';
import { leaseBlob, releaseLeases } from './blob-leases.ts';
import { deleteUnreferencedBlobs, photoFingerprint } from './photos.ts';

/**
 * Taking a photo into an account's registry world: intake (images/intake.ts) with the account's
 * registry answer and its lease on the bytes. Used by analyze (analysis/intake.ts), batch
 * submission and the batch activity that fetches a URL photo at its turn; it sits here, under all
 * three, so none of them reaches up into another.
 */

/** A finished upload as intake needs it (uploads/service.ts FinishedUpload has these fields). */
export interface StoredUpload {
  sha256: string;
  format: ImageFormat;
  width: number;
  height: number;
  size: number;
}

export type IntakeContext = { config: Pick<Config, 'IMAGE_MAX_BYTES' | 'IMAGE_MAX_PIXELS' | 'BLOB_GC_GRACE_MS'>; db: Db; blobs: BlobStore; fetchPolicy: FetchPolicy };

/**
 * What intake needs for one account's photos: the limits, the store, the fetch policy, its
 * registry, and `holder`'s leases on the blobs it takes in (registry/blob-leases.ts). A lease lasts
 * until its holder releases it, or BLOB_GC_GRACE_MS (longer than any run) if the holder dies.
 */
export function intakeDepsFor(deps: IntakeContext, accountId: string, holder: string): IntakeDeps {
  const release = (sha256: string) => releaseLeases(deps.db, holder, [sha256]);
  return {
    blobs: deps.blobs,
    maxBytes: deps.config.IMAGE_MAX_BYTES,
    maxPixels: deps.config.IMAGE_MAX_PIXELS,
    fetchPolicy: deps.fetchPolicy,
    knownFingerprint: (sha256) => photoFingerprint(deps.db, accountId, sha256),
    lease: {
      take: (sha256) => leaseBlob(deps.db, { holder, sha256, ttlMs: deps.config.BLOB_GC_GRACE_MS }),
      release,
      forget: async (sha256) => {
        await release(sha256);
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
export async function takeUpload(deps: IntakeDeps, upload: StoredUpload): Promise<ImageIntake> {
  // Both asked at once: neither answer changes the other question.
  const [, known] = await Promise.all([deps.lease?.take(upload.sha256), deps.knownFingerprint?.(upload.sha256)]);
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
  accountId: string,
  input: IntakeInput | { upload: StoredUpload },
  /** Whose lease holds the photo's blob until the batch item names it (registry/blob-leases.ts). */
  holder: string,
): Promise<{ ref: ImageRef; stored: boolean } | { refused: { code: string; message: string } }> {
  try {
    const taking = intakeDepsFor(deps, accountId, holder);
    const img = 'upload' in input && input.upload ? await takeUpload(taking, input.upload) : await intakeImage(input as IntakeInput, taking);
    return { ref: refOf(img), stored: img.stored };
  } catch (err) {
    if (err instanceof AppError && err.status < 500) return { refused: { code: err.code, message: err.message } };
    throw err;
  }
}
