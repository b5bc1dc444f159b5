import { newId } from '../auth/repository.ts';
import { AppError } from '../core/errors.ts';
import { inTransaction, type Db } from '../db/pool.ts';
import type { Column } from '../lenses/types.ts';
import { VEHICLE_SHA256S } from '../registry/references.ts';
import type { AnalyzeContext, ImageRef, ItemOutcome } from '../workflows/types.ts';
import { reindexReport, type Report } from '../lenses/vehicle-report-photos.ts';

/** What every photo of a batch runs with. */
export interface BatchSpec {
  stack: string | null;
  lenses: string[];
  billable: string[];
  context?: AnalyzeContext;
  moduleOptions?: Record<string, Record<string, unknown>>;
}

/** A batch's status on the wire (docs/contract.md is silent; docs/decisions.md "Batches: starting"). */
export type BatchStatus = 'running' | 'paused' | 'cancelled' | 'completed';
/**
 * As stored: also `starting`, from the moment the batch is stored until its workflow started. The
 * API shows no starting batch (404, absent from lists): until its start succeeded it may be taken
 * back, and a caller must never hold the id of a batch that then does not exist.
 */
export type StoredBatchStatus = BatchStatus | 'starting';
/** A batch of photos (one analysis each) or of vehicles (one vehicle-condition report each). */
export type BatchKind = 'photos' | 'vehicles';
export type VehicleContext = NonNullable<AnalyzeContext['vehicle']>;

/** One photo of a vehicle item, as a photo item's columns hold it. */
export interface VehiclePhoto {
  source: string;
  url?: string;
  /** An upload still arriving when the batch was submitted (awaitUploads): taken in at the vehicle's turn. */
  uploadId?: string;
  ref?: ImageRef;
}
export type PauseReason = 'requested' | 'credits';

export interface NewBatchItem {
  source: string;
  ref: ImageRef | null;
  /** A photo to fetch when its turn comes (ref stays null until then). */
  url?: string;
  /** A vehicle's photo whose upload was still arriving (ref stays null until its vehicle's turn). */
  uploadId?: string;
  /** Set when intake refused the photo: the item is failed from the start. */
  error?: { code: string; message: string };
  /** A vehicle item: its photos in submission order and its own vehicle context. */
  photos?: VehiclePhoto[];
  vehicle?: VehicleContext;
}

export interface BatchSummary {
  id: string;
  kind: BatchKind;
  status: BatchStatus;
  pauseReason: PauseReason | null;
  stack: string | null;
  lenses: string[];
  counts: { total: number; done: number; failed: number; pending: number };
  creditsCharged: number;
  /** Seconds until the pending photos are done at the pace so far; null before any photo finished or when nothing is pending. */
  etaSeconds: number | null;
  createdAt: string;
  updatedAt: string;
  completedAt: string | null;
}

export const batchNotFound = () => new AppError('NOT_FOUND', 'No such batch');

/** Store a batch and its items in one transaction (a batch never exists half-written). */
/** The batch an x-request-id already made for this account, with the fingerprint of its body. */
export async function batchOfRequest(
  db: Db,
  accountId: string,
  requestId: string,
): Promise<{ id: string; requestHash: string; status: StoredBatchStatus; startingForMs: number; kind: BatchKind; spec: BatchSpec; itemCount: number } | null> {
  const r = await db.query<{ id: string; request_hash: string; status: StoredBatchStatus; age_ms: number; kind: BatchKind; spec: BatchSpec; item_count: number }>(
    `SELECT id, request_hash, status, (extract(epoch FROM now() - created_at) * 1000)::float8 AS age_ms, kind, spec, item_count
       FROM batches WHERE user_id = $1 AND request_id = $2`,
    [accountId, requestId],
  );
  const row = r.rows[0];
  return row ? { id: row.id, requestHash: row.request_hash, status: row.status, startingForMs: row.age_ms, kind: row.kind, spec: row.spec, itemCount: row.item_count } : null;
}

/** The batch's workflow started: `starting` becomes `running` (unless the workflow already moved it on). */
export async function markBatchStarted(db: Db, batchId: string): Promise<void> {
  await db.query(`UPDATE batches SET status = 'running', updated_at = now() WHERE id = $1 AND status = 'starting'`, [batchId]);
}

/** Take back a batch whose start failed, while it is still starting; false when it is not (started meanwhile). */
export async function takeBackStartingBatch(db: Db, batchId: string): Promise<boolean> {
  return ((await db.query(`DELETE FROM batches WHERE id = $1 AND status = 'starting'`, [batchId])).rowCount ?? 0) > 0;
}

/**
 * Batches still `starting` after `olderThanMs` (the API that stored them died before or during the
 * start, and no resend came): cancelled, their pending photos failed as never started, so their
 * bytes are let go and the caller who lists them sees why. A workflow that did start meanwhile
 * finds nothing pending and completes. Returns how many.
 */
export async function cancelNeverStarted(db: Db, olderThanMs: number): Promise<number> {
  return inTransaction(db, async (c) => {
    const r = await c.query<{ id: string }>(
      `UPDATE batches SET status = 'cancelled', updated_at = now(), completed_at = now()
        WHERE status = 'starting' AND created_at < now() - make_interval(secs => $1) RETURNING id`,
      [olderThanMs / 1000],
    );
    const ids = r.rows.map((row) => row.id);
    if (ids.length) {
      const error = endedItemError({ reason: 'never-started' });
      await c.query(`UPDATE batch_items SET status = 'failed', error_code = $2, error = $3, finished_at = now() WHERE batch_id = ANY($1) AND status = 'pending'`, [ids, error.code, error.message]);
    }
    return ids.length;
  });
}

/** Thrown by createBatch when a concurrent submission made the batch of this x-request-id first. */
export class RequestIdTaken extends Error {}

export async function createBatch(
  db: Db,
  args: { accountId: string; kind: BatchKind; spec: BatchSpec; columns: Column[] | null; items: NewBatchItem[]; request?: { id: string; hash: string } },
): Promise<string> {
  const id = newId('bat');
  await inTransaction(db, async (c) => {
    await c
      .query(`INSERT INTO batches (id, user_id, kind, status, spec, columns, item_count, request_id, request_hash) VALUES ($1, $2, $3, 'starting', $4, $5, $6, $7, $8)`, [
        id,
        args.accountId,
        args.kind,
        args.spec,
        args.columns === null ? null : JSON.stringify(args.columns),
        args.items.length,
        args.request?.id ?? null,
        args.request?.hash ?? null,
      ])
      .catch((err: unknown) => {
        if ((err as { code?: string; constraint?: string }).constraint === 'batches_user_request') throw new RequestIdTaken();
        throw err;
      });
    // In slices, so 10,000 items are a few statements rather than one huge parameter list.
    for (let start = 0; start < args.items.length; start += 1000) {
      const slice = args.items.slice(start, start + 1000);
      await c.query(
        `INSERT INTO batch_items (batch_id, index, source, url, ref, status, error_code, error, finished_at, photos, vehicle)
         SELECT $1, t.i, t.source, t.url, t.ref, CASE WHEN t.code IS NULL THEN 'pending' ELSE 'failed' END, t.code, t.message,
                CASE WHEN t.code IS NULL THEN NULL ELSE now() END, t.photos, t.vehicle
           FROM unnest($2::int[], $3::text[], $4::jsonb[], $5::text[], $6::text[], $7::text[], $8::jsonb[], $9::jsonb[])
             AS t(i, source, ref, code, message, url, photos, vehicle)`,
        [
          id,
          slice.map((_, k) => start + k),
          slice.map((it) => it.source),
          slice.map((it) => (it.ref ? JSON.stringify(it.ref) : null)),
          slice.map((it) => it.error?.code ?? null),
          slice.map((it) => it.error?.message ?? null),
          slice.map((it) => it.url ?? null),
          slice.map((it) => (it.photos ? JSON.stringify(it.photos) : null)),
          slice.map((it) => (it.vehicle ? JSON.stringify(it.vehicle) : null)),
        ],
      );
    }
  });
  return id;
}

interface BatchRow {
  id: string;
  user_id: string;
  kind: BatchKind;
  status: StoredBatchStatus;
  pause_reason: PauseReason | null;
  spec: BatchSpec;
  columns: Column[] | null;
  item_count: number;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

export interface Batch {
  id: string;
  userId: string;
  kind: BatchKind;
  status: BatchStatus;
  pauseReason: PauseReason | null;
  spec: BatchSpec;
  columns: Column[] | null;
}

/** The batch when it is the caller's; 404 otherwise (whether another account's exists is not theirs to learn). */
export async function getBatch(db: Db, accountId: string, batchId: string): Promise<Batch> {
  const r = await db.query<BatchRow>(`SELECT * FROM batches WHERE id = $1 AND user_id = $2 AND status <> 'starting'`, [batchId, accountId]);
  const row = r.rows[0];
  if (!row) throw batchNotFound();
  return { id: row.id, userId: row.user_id, kind: row.kind, status: row.status as BatchStatus, pauseReason: row.pause_reason, spec: row.spec, columns: row.columns };
}

export async function batchSummary(db: Db, accountId: string, batchId: string): Promise<BatchSummary> {
  const r = await db.query<BatchRow & { done: number; failed: number; pending: number; credits: number; ran: number; ran_seconds: number | null }>(
    `SELECT b.*, count(*) FILTER (WHERE i.status = 'done')::int AS done, count(*) FILTER (WHERE i.status = 'failed')::int AS failed,
            count(*) FILTER (WHERE i.status = 'pending')::int AS pending, coalesce(sum(i.credits), 0)::int AS credits,
            count(*) FILTER (WHERE i.status <> 'pending' AND i.attempts > 0)::int AS ran,
            extract(epoch FROM max(i.finished_at) FILTER (WHERE i.attempts > 0) - b.created_at)::float8 AS ran_seconds
       FROM batches b JOIN batch_items i ON i.batch_id = b.id
      WHERE b.id = $1 AND b.user_id = $2 AND b.status <> 'starting' GROUP BY b.id`,
    [batchId, accountId],
  );
  const row = r.rows[0];
  if (!row) throw batchNotFound();
  return {
    id: row.id,
    kind: row.kind,
    status: row.status as BatchStatus,
    pauseReason: row.pause_reason,
    stack: row.spec.stack,
    lenses: row.spec.lenses,
    counts: { total: row.item_count, done: row.done, failed: row.failed, pending: row.pending },
    creditsCharged: row.credits,
    // The pace so far: photos that ran over the time since submission (a paused batch has no ETA).
    etaSeconds: row.status === 'running' && row.pending > 0 && row.ran > 0 && row.ran_seconds !== null ? Math.ceil((row.ran_seconds / row.ran) * row.pending) : null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    completedAt: row.completed_at?.toISOString() ?? null,
  };
}

/** The next pending items after `afterIndex`, in order, with the attempt number they run under now. */
export async function claimPendingItems(db: Db, args: { batchId: string; afterIndex: number; limit: number }): Promise<Array<{ index: number; ref: ImageRef | null; attempt: number }>> {
  const r = await db.query<{ index: number; ref: ImageRef | null; attempts: number }>(
    `UPDATE batch_items SET attempts = attempts + 1
      WHERE (batch_id, index) IN (SELECT batch_id, index FROM batch_items WHERE batch_id = $1 AND status = 'pending' AND index > $2 ORDER BY index LIMIT $3)
      RETURNING index, ref, attempts`,
    [args.batchId, args.afterIndex, args.limit],
  );
  return r.rows.sort((a, b) => a.index - b.index).map((row) => ({ index: row.index, ref: row.ref, attempt: row.attempts }));
}

export type { ItemOutcome };

/** An item's outcome, once: a retried step finds it finished and changes nothing. */
export async function finishItem(db: Db, args: { batchId: string; index: number; outcome: ItemOutcome }): Promise<void> {
  const o = args.outcome;
  const done = 'credits' in o;
  await db.query(
    `UPDATE batch_items SET status = $3, credits = $4, error_code = $5, error = $6, report_id = $7, finished_at = now()
      WHERE batch_id = $1 AND index = $2 AND status = 'pending'`,
    [args.batchId, args.index, done ? 'done' : 'failed', done ? o.credits : 0, done ? null : o.code, done ? null : o.message, done ? (o.reportId ?? null) : null],
  );
}

/**
 * Why a batch ended with items that never ran: the caller cancelled it, or it stayed paused past
 * BATCH_PAUSED_EXPIRY_MS (`pausedForMs`) and expired.
 */
export type BatchEnd = { reason: 'cancelled' } | { reason: 'expired'; pausedForMs: number } | { reason: 'never-started' };

/** The error of an item a batch ended without running (its bytes are no longer kept). */
export function endedItemError(end: BatchEnd): { code: 'BATCH_FINISHED'; message: string } {
  const why =
    end.reason === 'cancelled' ? 'the batch was cancelled'
    : end.reason === 'never-started' ? 'the batch could not be started'
    : `the batch stayed paused for ${duration(end.pausedForMs)} without a resume and expired`;
  return { code: 'BATCH_FINISHED', message: `Not run: ${why}; its bytes are not kept. Send it again in a new batch` };
}

function duration(ms: number): string {
  const unit = (n: number, name: string) => `${n} ${name}${n === 1 ? '' : 's'}`;
  if (ms % 86_400_000 === 0) return unit(ms / 86_400_000, 'day');
  if (ms % 3_600_000 === 0) return unit(ms / 3_600_000, 'hour');
  if (ms % 60_000 === 0) return unit(ms / 60_000, 'minute');
  return unit(Math.round(ms / 1000), 'second');
}

/**
 * Move the batch's status (the workflow is its only writer besides the request that made it). A
 * batch that is cancelled fails its pending items in the same transaction (`end` says why): they
 * will never run, and the blob collector keeps only the bytes of pending items.
 */
export async function setBatchStatus(db: Db, args: { batchId: string; status: BatchStatus; pauseReason?: PauseReason; end?: BatchEnd }): Promise<void> {
  await inTransaction(db, async (c) => {
    await c.query(
      `UPDATE batches SET status = $2, pause_reason = $3, updated_at = now(),
              completed_at = CASE WHEN $2 IN ('completed', 'cancelled') THEN coalesce(completed_at, now()) ELSE completed_at END
        WHERE id = $1`,
      [args.batchId, args.status, args.status === 'paused' ? (args.pauseReason ?? 'requested') : null],
    );
    if (args.status !== 'cancelled') return;
    const error = endedItemError(args.end ?? { reason: 'cancelled' });
    await c.query(
      `UPDATE batch_items SET status = 'failed', error_code = $2, error = $3, finished_at = now() WHERE batch_id = $1 AND status = 'pending'`,
      [args.batchId, error.code, error.message],
    );
  });
}

export interface BatchItemRow {
  index: number;
  source: string;
  sha256: string | null;
  status: 'pending' | 'done' | 'failed';
  errorCode: string | null;
  error: string | null;
  credits: number;
  /**
   * A photo item: its lens outputs from the registry (done items), merged as an analysis `output`.
   * A vehicle item: its report, as POST /v1/analyze answers it (`reportId` and the report).
   */
  output: Record<string, unknown> | null;
  /** A done photo item's lens outputs by lens (what each lens answered), null otherwise. */
  byLens: Record<string, unknown> | null;
  /** A vehicle item's photos in submission order (null for a photo item). */
  photos: Array<{ source: string; sha256: string | null }> | null;
}

/**
 * The batch's items in order, `pageSize` at a time (keyset pages: memory stays flat however many
 * there are), each done item with its lens outputs read from the caller's registry, or its report;
 * with `status`, only the items in that state.
 */
export async function* batchItems(db: Db, args: { accountId: string; batchId: string; lenses: string[]; afterIndex?: number; limit?: number; pageSize?: number; status?: BatchItemRow['status'] }): AsyncIterable<BatchItemRow> {
  let after = args.afterIndex ?? -1;
  let left = args.limit ?? Number.POSITIVE_INFINITY;
  const pageSize = args.pageSize ?? 500;
  while (left > 0) {
    const r = await db.query<{
      index: number; source: string; sha256: string | null; status: BatchItemRow['status']; error_code: string | null; error: string | null; credits: number;
      outputs: Record<string, unknown> | null; photos: VehiclePhoto[] | null; report_id: string | null; report: Record<string, unknown> | null; report_sha256s: string[] | null;
    }>(
      `SELECT i.index, i.source, i.ref->>'sha256' AS sha256, i.status, i.error_code, i.error, i.credits, i.photos, i.report_id,
              v.output AS report, v.photo_sha256s AS report_sha256s,
              (SELECT jsonb_object_agg(l.lens, l.output) FROM lens_records l
                WHERE i.status = 'done' AND i.ref IS NOT NULL AND l.user_id = $4 AND l.sha256 = i.ref->>'sha256' AND l.lens = ANY($5::text[])) AS outputs
         FROM batch_items i LEFT JOIN vehicle_reports v ON v.id = i.report_id AND v.user_id = $4
        WHERE i.batch_id = $1 AND i.index > $2 AND ($6::text IS NULL OR i.status = $6) ORDER BY i.index LIMIT $3`,
      [args.batchId, after, Math.min(pageSize, left), args.accountId, args.lenses, args.status ?? null],
    );
    for (const row of r.rows) {
      const photos = row.photos?.map((p) => ({ source: p.source, sha256: p.ref?.sha256 ?? null })) ?? null;
      let output: Record<string, unknown> | null = null;
      if (row.report && row.report_id && photos) {
        // A report reused from an earlier request numbers its photos in that request's order.
        output = { reportId: row.report_id, ...reindexReport(row.report as Report, row.report_sha256s ?? [], photos.map((p) => p.sha256 ?? '')) };
      } else if (row.outputs) {
        output = Object.assign({}, ...Object.values(row.outputs)) as Record<string, unknown>;
      }
      yield { index: row.index, source: row.source, sha256: row.sha256, status: row.status, errorCode: row.error_code, error: row.error, credits: row.credits, output, byLens: row.report ? null : row.outputs, photos };
    }
    if (r.rows.length < Math.min(pageSize, left)) return;
    after = r.rows[r.rows.length - 1]!.index;
    left -= r.rows.length;
  }
}

/**
 * An item that can run again: its image is stored or it has a URL to fetch again; for a vehicle,
 * every photo is. A photo intake refused has neither.
 */
const RUNNABLE = `(i.ref IS NOT NULL OR i.url IS NOT NULL OR (i.photos IS NOT NULL AND NOT EXISTS (
  SELECT 1 FROM jsonb_array_elements(i.photos) p WHERE NOT (p ? 'ref' OR p ? 'url' OR p ? 'uploadId'))))`;

/**
 * A failed photo back to pending, to run again (a fetch that failed, a vendor outage). A photo
 * intake refused (nothing stored) cannot run again: send it in a new batch. True when it changed.
 */
export async function retryItem(db: Db, args: { batchId: string; index: number }): Promise<'retried' | 'not-failed' | 'no-image'> {
  const r = await db.query<{ status: string; runnable: boolean }>(`SELECT status, ${RUNNABLE} AS runnable FROM batch_items i WHERE batch_id = $1 AND index = $2`, [args.batchId, args.index]);
  const row = r.rows[0];
  if (!row) throw new AppError('NOT_FOUND', `No item ${args.index} in this batch`);
  if (row.status !== 'failed') return 'not-failed';
  if (!row.runnable) return 'no-image';
  const u = await db.query(
    `UPDATE batch_items i SET status = 'pending', error_code = NULL, error = NULL, finished_at = NULL WHERE batch_id = $1 AND index = $2 AND status = 'failed' AND ${RUNNABLE}`,
    [args.batchId, args.index],
  );
  return u.rowCount === 1 ? 'retried' : 'not-failed';
}

/**
 * Mark the batch completed only when no photo is pending: a photo retried at that very moment
 * either keeps the workflow going or finds the batch completed and starts it again.
 */
export async function completeBatch(db: Db, batchId: string): Promise<boolean> {
  const r = await db.query(
    `UPDATE batches SET status = 'completed', pause_reason = NULL, updated_at = now(), completed_at = now()
      WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM batch_items WHERE batch_id = $1 AND status = 'pending')`,
    [batchId],
  );
  return r.rowCount === 1;
}

/** The URL of a pending photo not taken in yet, with the batch's owner; null when it has its image. */
export async function urlToTake(db: Db, args: { batchId: string; index: number }): Promise<{ userId: string; url: string; ref: ImageRef | null } | null> {
  const r = await db.query<{ user_id: string; url: string | null; ref: ImageRef | null }>(
    `SELECT b.user_id, i.url, i.ref FROM batch_items i JOIN batches b ON b.id = i.batch_id WHERE i.batch_id = $1 AND i.index = $2`,
    [args.batchId, args.index],
  );
  const row = r.rows[0];
  return row?.url ? { userId: row.user_id, url: row.url, ref: row.ref } : null;
}

/** A pending vehicle item's photos and context, with the batch's owner; null when it is not pending. */
export async function vehicleToTake(db: Db, args: { batchId: string; index: number }): Promise<{ userId: string; photos: VehiclePhoto[]; vehicle: VehicleContext | null } | null> {
  const r = await db.query<{ user_id: string; photos: VehiclePhoto[] | null; vehicle: VehicleContext | null }>(
    `SELECT b.user_id, i.photos, i.vehicle FROM batch_items i JOIN batches b ON b.id = i.batch_id WHERE i.batch_id = $1 AND i.index = $2 AND i.status = 'pending'`,
    [args.batchId, args.index],
  );
  const row = r.rows[0];
  return row?.photos ? { userId: row.user_id, photos: row.photos, vehicle: row.vehicle } : null;
}

/** The image one photo of a pending vehicle gave, kept at once (a retried step fetches only what is missing). */
export async function setVehiclePhotoRef(db: Db, args: { batchId: string; index: number; at: number; ref: ImageRef }): Promise<void> {
  await db.query(
    `UPDATE batch_items SET photos = jsonb_set(photos, ARRAY[$3::text, 'ref'], $4::jsonb) WHERE batch_id = $1 AND index = $2 AND status = 'pending'`,
    [args.batchId, args.index, String(args.at), JSON.stringify(args.ref)],
  );
}

/** The hashes of an item's images: its photo, or its vehicle's photos taken in. */
export async function itemSha256s(db: Db, args: { batchId: string; index: number }): Promise<string[]> {
  const r = await db.query<{ sha256s: string[] }>(
    `SELECT CASE WHEN ref IS NOT NULL THEN ARRAY[ref->>'sha256']
                 ELSE ARRAY(SELECT jsonb_array_elements_text(coalesce(${VEHICLE_SHA256S}, '[]'))) END AS sha256s
       FROM batch_items WHERE batch_id = $1 AND index = $2`,
    [args.batchId, args.index],
  );
  return r.rows[0]?.sha256s ?? [];
}

/** The image a pending photo's URL gave, kept with the photo (and its blob kept while it is pending). */
export async function setItemRef(db: Db, args: { batchId: string; index: number; ref: ImageRef }): Promise<void> {
  await db.query(`UPDATE batch_items SET ref = $3 WHERE batch_id = $1 AND index = $2 AND status = 'pending'`, [args.batchId, args.index, JSON.stringify(args.ref)]);
}

/** A workspace's most recent batches, newest first, as summaries. */
export async function recentBatches(db: Db, accountId: string, limit = 20): Promise<BatchSummary[]> {
  const r = await db.query<{ id: string }>(`SELECT id FROM batches WHERE user_id = $1 AND status <> 'starting' ORDER BY created_at DESC, id LIMIT $2`, [accountId, limit]);
  return Promise.all(r.rows.map((row) => batchSummary(db, accountId, row.id)));
}

/**
 * How many photos each of a workspace's running batches may analyze at once: the workspace's cap
 * shared among them (at least one each), so many batches of one workspace together stay near the
 * cap and cannot take every worker slot from other workspaces.
 */
export async function workspaceShare(db: Db, args: { accountId: string; cap: number }): Promise<number> {
  const r = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM batches WHERE user_id = $1 AND status = 'running'`, [args.accountId]);
  return Math.max(1, Math.floor(args.cap / Math.max(1, r.rows[0]!.n)));
}

/** The account (workspace) a batch belongs to; null when there is no such batch. */
export async function batchOwner(db: Db, batchId: string): Promise<string | null> {
  const r = await db.query<{ user_id: string }>('SELECT user_id FROM batches WHERE id = $1', [batchId]);
  return r.rows[0]?.user_id ?? null;
}

/**
 * Whether the workspace holds the photo: in its registry, or in one of its batches (an item or a
 * vehicle's photo whose bytes were not erased). Decides who may see its thumbnail.
 */
export async function workspaceHoldsPhoto(db: Db, workspaceId: string, sha256: string): Promise<boolean> {
  const held = await db.query(
    `SELECT 1 FROM photos WHERE user_id = $1 AND sha256 = $2
     UNION ALL
     SELECT 1 FROM batch_items i JOIN batches b ON b.id = i.batch_id
      WHERE b.user_id = $1 AND i.erased_at IS NULL AND (i.ref->>'sha256' = $2 OR i.photos @> jsonb_build_array(jsonb_build_object('ref', jsonb_build_object('sha256', $2::text))))
     LIMIT 1`,
    [workspaceId, sha256],
  );
  return Boolean(held.rowCount);
}
