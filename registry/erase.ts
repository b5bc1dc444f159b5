import { VEHICLE_SHA256S } from './references.ts';
import { inTransaction, type Db } from '../db/pool.ts';
import type { BlobStore } from '../images/blobstore.ts';
import { deleteUnreferencedBlobs } from './photos.ts';

/** What a batch item whose photo was erased says in its error, its export row and its JSON (docs/privacy.md). */
// The contract's own code for a photo the registry does not hold: a new value of the ErrorCode enum
// would be a breaking change of every response that carries it (docs/decisions.md).
export const ERASED_CODE = 'PHOTO_NOT_IN_REGISTRY';
export const erasedMessage = (at: Date) =>
  `The photo was erased from the registry on ${at.toISOString()} (DELETE /v1/photos/{sha256}); its results and name are no longer kept`;

export interface ErasedPhoto {
  sha256: string;
  /** Lens records removed with the photo (one per lens ever run on it). */
  lensRecords: number;
  /** Vehicle reports that included the photo, removed with it. */
  vehicleReports: number;
  /** Batch items (done or failed) that named the photo, now marked erased. */
  batchItems: number;
}

/**
 * Erase one photo from one workspace's registry (DELETE /v1/photos/{sha256}, docs/privacy.md).
 * One transaction, in this order: the photo row (its lens events and records go with it by
 * cascade), the vehicle reports that included it, the stored answers of earlier requests that
 * carry its results (analysis_requests), the workspace's uploads of the same bytes (expired),
 * and the finished batch items that named it (results, name and URL erased, `PHOTO_NOT_IN_REGISTRY`, saying it was erased).
 * Then, after the commit, its blob is deleted unless something else keeps it: another
 * workspace's registry, a pending batch item, a live upload, or a request's intake lease (an
 * analysis in flight, registry/blob-leases.ts). Null when the workspace's registry does not hold it.
 */
export async function erasePhoto(db: Db, blobs: Pick<BlobStore, 'delete'>, args: { accountId: string; sha256: string }): Promise<ErasedPhoto | null> {
  const { accountId, sha256 } = args;
  const erased = await inTransaction(db, async (c) => {
    const photo = await c.query('SELECT 1 FROM photos WHERE user_id = $1 AND sha256 = $2 FOR UPDATE', [accountId, sha256]);
    if (!photo.rowCount) return null;
    const records = await c.query<{ n: number }>('SELECT count(*)::int AS n FROM lens_records WHERE user_id = $1 AND sha256 = $2', [accountId, sha256]);
    // lens_records reference lens_events: both go with the photo (ON DELETE CASCADE), in one statement.
    await c.query('DELETE FROM photos WHERE user_id = $1 AND sha256 = $2', [accountId, sha256]);
    const reports = await c.query<{ id: string }>('DELETE FROM vehicle_reports WHERE user_id = $1 AND $2 = ANY(photo_sha256s) RETURNING id', [accountId, sha256]);
    // A stored answer is the analysis envelope, which names each photo by its SHA-256: a resend
    // under that request id must not hand the erased results out again.
    await c.query(`DELETE FROM analysis_requests WHERE user_id = $1 AND response IS NOT NULL AND strpos(response::text, $2) > 0`, [accountId, sha256]);
    await c.query('UPDATE uploads SET expired_at = now() WHERE user_id = $1 AND sha256 = $2 AND expired_at IS NULL', [accountId, sha256]);
    // Finished items of this workspace's batches that named the photo (alone, in a vehicle, or
    // through a report just removed). Pending items are left to run: their batch asked for them.
    const items = await c.query(
      `UPDATE batch_items i SET erased_at = now(), error_code = $3, error = $4, source = '[erased]', url = NULL,
              photos = CASE WHEN i.photos IS NULL THEN NULL
                            ELSE (SELECT jsonb_agg(CASE WHEN p->'ref'->>'sha256' = $2 THEN (p - 'url') || '{"source":"[erased]"}'::jsonb ELSE p END ORDER BY n)
                                    FROM jsonb_array_elements(i.photos) WITH ORDINALITY AS e(p, n)) END
         FROM batches b
        WHERE b.id = i.batch_id AND b.user_id = $1 AND i.status <> 'pending'
          AND (i.ref->>'sha256' = $2 OR ${VEHICLE_SHA256S} ? $2 OR i.report_id = ANY($5::text[]))`,
      [accountId, sha256, ERASED_CODE, erasedMessage(new Date()), reports.rows.map((r) => r.id)],
    );
    return { sha256, lensRecords: records.rows[0]!.n, vehicleReports: reports.rowCount ?? 0, batchItems: items.rowCount ?? 0 };
  });
  if (erased) await deleteUnreferencedBlobs(db, blobs, [sha256]);
  return erased;
}
