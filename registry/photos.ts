import type { PersistedImage } from '../workflows/types.ts';
import { randomBytes } from 'node:crypto';
import { VEHICLE_SHA256S } from './references.ts';
import type { Db, DbClient } from '../db/pool.ts';
import { inTransaction } from '../db/pool.ts';
import type { BlobStore } from '../images/blobstore.ts';
import { lockBlobs } from './blob-leases.ts';
import { hashChunks, hexToSigned64, signed64ToHex } from './hashes.ts';
import { LENS_CREDITS } from '../credits/price-book.ts';

/** Latest output of one lens on one photo (docs/contract.md "Resources": photo record → lens record). */
export interface LensRecord {
  eventId: string;
  output: Record<string, unknown>;
  version: string;
  producedAt: string;
  coRunHash: string;
  provider: string;
}

export interface PhotoRecord {
  sha256: string;
  pHash: string;
  dHash: string;
  firstAnalyzedAt: string;
  lastAnalyzedAt: string;
  totalCreditsSpent: number;
  analyzeCallCount: number;
  lenses: Record<string, LensRecord>;
}

/** Internal companion of a lens record: which vendor/model produced it. */
export interface LensOrigin {
  vendor: string;
  model: string;
}

/**
 * The lens records `cachedLensesIn` and `runStartIn` read: the caller's ($1), of the photos $2,
 * among the lenses $3.
 */
const CACHED_LENS_RECORDS = 'FROM lens_records WHERE user_id = $1 AND sha256 = ANY($2) AND lens = ANY($3)';

/** Each photo's cached lenses, every photo asked for present (none cached: an empty list). */
function byPhoto(sha256s: string[], rows: Iterable<readonly [string, string]>): Record<string, string[]> {
  const cached: Record<string, string[]> = Object.fromEntries(sha256s.map((s) => [s, []]));
  for (const [sha256, lens] of rows) cached[sha256]!.push(lens);
  return cached;
}

/**
 * Where a run starts from, in one statement of the caller's transaction: whether the workflow
 * `workflowId` already persisted a run (an analysis or a vehicle report), and for each photo which
 * of `lenses` the caller's projection holds (none asked for when `lenses` is empty), as
 * `cachedLensesIn` reads them.
 */
export async function runStartIn(
  c: DbClient,
  args: { workflowId: string; accountId: string; sha256s: string[]; lenses: string[] },
): Promise<{ persisted: boolean; cached: Record<string, string[]> }> {
  const r = await c.query<{ persisted: boolean; cached: Array<[string, string]> }>(
    `SELECT EXISTS (SELECT 1 FROM analysis_runs WHERE workflow_id = $4)
              OR EXISTS (SELECT 1 FROM vehicle_reports WHERE workflow_id = $4) AS persisted,
            (SELECT coalesce(json_agg(json_build_array(sha256, lens)), '[]'::json) ${CACHED_LENS_RECORDS}) AS cached`,
    [args.accountId, args.sha256s, args.lenses, args.workflowId],
  );
  return { persisted: r.rows[0]!.persisted, cached: byPhoto(args.sha256s, r.rows[0]!.cached) };
}

/**
 * For each photo, which of `lenses` the caller's projection holds (none asked for when `lenses` is
 * empty): what the delta plan (credits/delta.ts) does not bill again. The reservation reads the
 * same rows (`runStartIn`); the console's cost preview (analysis/preview.ts) reads them here.
 */
export async function cachedLensesIn(
  c: Pick<DbClient, 'query'>,
  args: { accountId: string; sha256s: string[]; lenses: string[] },
): Promise<Record<string, string[]>> {
  const r = await c.query<{ sha256: string; lens: string }>(`SELECT sha256, lens ${CACHED_LENS_RECORDS}`, [args.accountId, args.sha256s, args.lenses]);
  return byPhoto(args.sha256s, r.rows.map((row) => [row.sha256, row.lens] as const));
}

/** The perceptual hashes the caller's registry holds for a photo, if it holds the photo. */
export async function photoFingerprint(db: Db, accountId: string, sha256: string): Promise<{ pHash: string; dHash: string } | null> {
  const r = await db.query<{ phash: string; dhash: string }>('SELECT phash::text, dhash::text FROM photos WHERE user_id = $1 AND sha256 = $2', [accountId, sha256]);
  const row = r.rows[0];
  return row ? { pHash: signed64ToHex(row.phash), dHash: signed64ToHex(row.dhash) } : null;
}

/**
 * Which of `sha256s` must keep their bytes. A registry entry of a live workspace, within its
 * retention (users.retention_days: bytes kept that many days after the workspace last sent the
 * photo; NULL keeps them while the entry exists), a finished upload not expired
 * (uploads/service.ts), a batch photo (alone or of a vehicle) still waiting to be analyzed in a
 * batch that may still run it (a cancelled or expired batch fails them, batches/repository.ts
 * setBatchStatus), or a request's intake lease not expired (registry/blob-leases.ts: an analysis
 * in flight reads the bytes after its intake, whatever was erased meanwhile).
 */
async function referencedPhotos(c: Db | DbClient, sha256s: string[]): Promise<Set<string>> {
  if (!sha256s.length) return new Set();
  const r = await c.query<{ sha256: string }>(
    `SELECT p.sha256 FROM photos p JOIN users u ON u.id = p.user_id
      WHERE p.sha256 = ANY($1) AND u.deleted_at IS NULL
        AND (u.retention_days IS NULL OR p.last_analyzed_at > now() - make_interval(days => u.retention_days))
     UNION SELECT sha256 FROM uploads WHERE expired_at IS NULL AND sha256 = ANY($1)
     UNION SELECT sha256 FROM blob_leases WHERE expires_at > now() AND sha256 = ANY($1)
     UNION SELECT i.ref->>'sha256' FROM batch_items i JOIN batches b ON b.id = i.batch_id AND b.status <> 'cancelled'
            WHERE i.status = 'pending' AND i.ref->>'sha256' = ANY($1)
     UNION SELECT s FROM batch_items i JOIN batches b ON b.id = i.batch_id AND b.status <> 'cancelled', jsonb_array_elements_text(${VEHICLE_SHA256S}) s
            WHERE i.status = 'pending' AND ${VEHICLE_SHA256S} ?| $1::text[] AND s = ANY($1)`,
    [sha256s],
  );
  return new Set(r.rows.map((row) => row.sha256));
}

/**
 * Delete the blobs of those of `sha256s` nothing holds (referencedPhotos: no registry within its
 * retention, upload, pending batch photo or intake lease); returns the ones deleted. The check and
 * the deletes happen under each blob's lock (registry/blob-leases.ts), so a lease or an upload
 * committed meanwhile is never outrun. Every delete path (a failed request, erasure, the collector)
 * comes through here: a request releases its own leases first, so it still honours everyone else's.
 */
export async function deleteUnreferencedBlobs(db: Db, blobs: Pick<BlobStore, 'delete'>, sha256s: string[]): Promise<string[]> {
  if (!sha256s.length) return [];
  return inTransaction(db, async (c) => {
    await lockBlobs(c, sha256s);
    const kept = await referencedPhotos(c, sha256s);
    const gone = [...new Set(sha256s)].filter((sha) => !kept.has(sha));
    await Promise.all(gone.map((sha) => blobs.delete(sha)));
    // A thumbnail is a small copy of the photo (images/thumbnail.ts): it goes with the bytes.
    if (gone.length) await c.query('DELETE FROM thumbnails WHERE sha256 = ANY($1)', [gone]);
    return gone;
  });
}

/** A photo of the registry projection with the vendor and model behind each lens record. */
export type RegistryPhoto = PhotoRecord & { origins: Record<string, LensOrigin> };

/** The registry projection of photos, scoped to one account. Missing photos are absent from the map. */
export async function getPhotos(db: Db, accountId: string, sha256s: string[]): Promise<Map<string, RegistryPhoto>> {
  const result = new Map<string, RegistryPhoto>();
  if (!sha256s.length) return result;
  const photos = await db.query<{
    sha256: string; phash: string; dhash: string; first_analyzed_at: Date; last_analyzed_at: Date;
    total_credits_spent: number; analyze_call_count: number;
  }>(
    `SELECT sha256, phash::text, dhash::text, first_analyzed_at, last_analyzed_at, total_credits_spent, analyze_call_count
       FROM photos WHERE user_id = $1 AND sha256 = ANY($2)`,
    [accountId, sha256s],
  );
  for (const p of photos.rows) {
    result.set(p.sha256, {
      sha256: p.sha256,
      pHash: signed64ToHex(p.phash),
      dHash: signed64ToHex(p.dhash),
      firstAnalyzedAt: p.first_analyzed_at.toISOString(),
      lastAnalyzedAt: p.last_analyzed_at.toISOString(),
      totalCreditsSpent: p.total_credits_spent,
      analyzeCallCount: p.analyze_call_count,
      lenses: {},
      origins: {},
    });
  }
  if (!result.size) return result;
  const lenses = await db.query<{
    sha256: string; lens: string; event_id: string; output: Record<string, unknown>; version: string;
    produced_at: Date; co_run_hash: string; provider: string; vendor: string; model: string;
  }>(
    `SELECT sha256, lens, event_id, output, version, produced_at, co_run_hash, provider, vendor, model
       FROM lens_records WHERE user_id = $1 AND sha256 = ANY($2) ORDER BY lens`,
    [accountId, [...result.keys()]],
  );
  for (const l of lenses.rows) {
    const photo = result.get(l.sha256)!;
    photo.lenses[l.lens] = {
      eventId: l.event_id,
      output: l.output,
      version: l.version,
      producedAt: l.produced_at.toISOString(),
      coRunHash: l.co_run_hash,
      provider: l.provider,
    };
    photo.origins[l.lens] = { vendor: l.vendor, model: l.model };
  }
  return result;
}

/** A full cache hit still counts as an analyze call on each photo. */
export async function recordCacheHit(db: Db, accountId: string, sha256s: string[]): Promise<void> {
  await db.query(
    `UPDATE photos SET analyze_call_count = analyze_call_count + 1, last_analyzed_at = now()
      WHERE user_id = $1 AND sha256 = ANY($2)`,
    [accountId, [...new Set(sha256s)]],
  );
}

/** One image of a run as persisted: the workflow's (workflows/types.ts) with which lenses ran together. */
export type PersistImage = Omit<PersistedImage, 'lenses'> & {
  /** coRunHash of the lenses that ran together (activities/billing.ts). */
  coRunHash: string;
};

export const newEventId = () => `evt_${randomBytes(12).toString('hex')}`;

/** Whether the workflow `workflowId` has persisted its analysis (it ran, and charged what it found). */
export async function analysisPersisted(db: Db, workflowId: string): Promise<boolean> {
  const r = await db.query('SELECT 1 FROM analysis_runs WHERE workflow_id = $1', [workflowId]);
  return (r.rowCount ?? 0) > 0;
}

/**
 * Persist one analysis: photos upserted, one event per lens run, latest records replaced,
 * counters bumped. Exactly once per workflow id (analysis_runs), whatever Temporal retries.
 *
 * Returns what to charge. A lens that another request recorded for this photo while this one
 * was running (two concurrent requests for the same new photo) is not billed a second time,
 * unless this request asked for `refresh`.
 */
export async function persistAnalysis(
  db: Db,
  args: PersistArgs,
): Promise<Persisted> {
  return inTransaction(db, (c) => persistAnalysisIn(c, args));
}

export interface PersistArgs {
  workflowId: string;
  requestId: string;
  accountId: string;
  refresh: boolean;
  images: PersistImage[];
}

export interface Persisted {
  /** False when this workflow had persisted before (a retry): the figures are the first run's. */
  applied: boolean;
  charged: number;
  chargedPerImage: number[];
}

/** `persistAnalysis` inside a caller's transaction (the settlement commits with it). */
export async function persistAnalysisIn(c: DbClient, args: PersistArgs): Promise<Persisted> {
  const run = await c.query(
    `INSERT INTO analysis_runs (workflow_id, user_id, request_id, image_count, credits)
     VALUES ($1, $2, $3, $4, 0) ON CONFLICT (workflow_id) DO NOTHING`,
    [args.workflowId, args.accountId, args.requestId, args.images.length],
  );
  if (!run.rowCount) {
    const prior = await c.query<{ credits: number; per_image: number[] }>(
      'SELECT credits, per_image FROM analysis_runs WHERE workflow_id = $1',
      [args.workflowId],
    );
    return { applied: false, charged: prior.rows[0]!.credits, chargedPerImage: prior.rows[0]!.per_image };
  }
  // Lock photos in a stable order so concurrent analyses of the same photos cannot deadlock.
  const order = args.images.map((img, i) => ({ img, i })).sort((a, b) => a.img.sha256.localeCompare(b.img.sha256));
  const chargedPerImage = args.images.map(() => 0);
  const seen = new Set<string>();
  for (const { img, i } of order) {
    const [c0, c1, c2, c3] = hashChunks(img.pHash);
    // The same photo twice in one request counts as one call.
    const calls = seen.has(img.sha256) ? 0 : 1;
    seen.add(img.sha256);
    await c.query(
      `INSERT INTO photos (user_id, sha256, phash, dhash, phash_c0, phash_c1, phash_c2, phash_c3, analyze_call_count)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (user_id, sha256) DO UPDATE SET
         last_analyzed_at = now(),
         analyze_call_count = photos.analyze_call_count + EXCLUDED.analyze_call_count`,
      [args.accountId, img.sha256, hexToSigned64(img.pHash), hexToSigned64(img.dHash), c0, c1, c2, c3, calls],
    );
    // One statement for all lenses of the photo: which billed lenses a concurrent run recorded
    // first (not billed again), the events, the latest records taken from them, and the photo's
    // spend. The photo row is locked by the statement above, so this statement's snapshot sees
    // every concurrent run's records. Events already there mean the same photo twice in one
    // request: the first copy won, and records come only from events this statement inserted.
    const entries = Object.entries(img.outputs).sort(([a], [b]) => a.localeCompare(b));
    if (!entries.length) continue;
    const names = entries.map(([lens]) => lens);
    const r = await c.query<{ charged: number }>(
      `WITH already AS (
         SELECT lens FROM lens_records WHERE user_id = $1 AND sha256 = $2 AND lens = ANY($12::text[]) AND NOT $13::boolean
       ), ev AS (
         INSERT INTO lens_events (id, user_id, sha256, lens, workflow_id, output, version, co_run_hash, provider, vendor, model, credits)
         SELECT e.id, $1, $2, e.lens, $3, e.output, e.version, $4, $5, $6, $7,
                CASE WHEN e.lens = ANY($12::text[]) AND e.lens NOT IN (SELECT lens FROM already) THEN $14::int ELSE 0 END
           FROM unnest($8::text[], $9::text[], $10::jsonb[], $11::text[]) AS e(id, lens, output, version)
         ON CONFLICT (workflow_id, sha256, lens) DO NOTHING
         RETURNING id, lens, output, version, produced_at, credits
       ), rec AS (
         INSERT INTO lens_records (user_id, sha256, lens, event_id, output, version, co_run_hash, provider, vendor, model, produced_at)
         SELECT $1, $2, ev.lens, ev.id, ev.output, ev.version, $4, $5, $6, $7, ev.produced_at FROM ev
         ON CONFLICT (user_id, sha256, lens) DO UPDATE SET
           event_id = EXCLUDED.event_id, output = EXCLUDED.output, version = EXCLUDED.version,
           co_run_hash = EXCLUDED.co_run_hash, provider = EXCLUDED.provider, vendor = EXCLUDED.vendor,
           model = EXCLUDED.model, produced_at = EXCLUDED.produced_at
       ), spend AS (
         UPDATE photos SET total_credits_spent = total_credits_spent + (SELECT sum(credits) FROM ev)
          WHERE user_id = $1 AND sha256 = $2 AND (SELECT sum(credits) FROM ev) > 0
       )
       SELECT coalesce(sum(credits), 0)::int AS charged FROM ev`,
      [
        args.accountId, img.sha256, args.workflowId, img.coRunHash, img.provider, img.vendor, img.model,
        names.map(() => newEventId()),
        names,
        entries.map(([, output]) => JSON.stringify(output)),
        names.map((l) => img.versions[l] ?? '0'),
        img.billed,
        args.refresh,
        LENS_CREDITS,
      ],
    );
    chargedPerImage[i] = r.rows[0]!.charged;
  }
  const charged = chargedPerImage.reduce((n, x) => n + x, 0);
  await c.query('UPDATE analysis_runs SET credits = $2, per_image = $3 WHERE workflow_id = $1', [args.workflowId, charged, chargedPerImage]);
  return { applied: true, charged, chargedPerImage };
}
