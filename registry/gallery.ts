import type { Db } from '../db/pool.ts';
import { AppError } from '../core/errors.ts';
import { getPhotos, type RegistryPhoto } from './photos.ts';

/** One lens record of a listed photo: the run that made it, when it was billed and for how much. */
export interface BilledLens {
  lens: string;
  credits: number;
  billedAt: string;
}

/** A photo of the console's Photos section (docs/decisions.md "The console's Photos"). */
export interface GalleryPhoto {
  sha256: string;
  firstAnalyzedAt: string;
  lastAnalyzedAt: string;
  totalCreditsSpent: number;
  analyzeCallCount: number;
  lenses: BilledLens[];
}

export interface GalleryPage {
  photos: GalleryPhoto[];
  /** Give it back as `cursor` for the next page; null on the last. */
  next: string | null;
}

// The cursor is the last row's analysis time in microseconds (Postgres' own precision: a
// millisecond Date would skip or repeat rows analyzed within the same millisecond) and its SHA-256.
const CURSOR = /^(\d{1,20})\.([0-9a-f]{64})$/;
const MICROS = '(extract(epoch FROM p.last_analyzed_at) * 1000000)::bigint';

/**
 * One workspace's registry, newest analyzed first, a keyset page at a time: each photo with its
 * lens records, each record with the credits its run charged and when (lens_events). A photo
 * whose bytes retention removed is listed all the same: its records stay.
 */
export async function galleryPage(db: Db, accountId: string, page: { limit: number; cursor?: string }): Promise<GalleryPage> {
  let after: [string, string] | null = null;
  if (page.cursor !== undefined) {
    const m = CURSOR.exec(page.cursor);
    if (!m) throw new AppError('VALIDATION_FAILED', 'query.cursor: not a cursor this list gave');
    after = [m[1]!, m[2]!];
  }
  const rows = await db.query<{
    sha256: string; first_analyzed_at: Date; last_analyzed_at: Date; total_credits_spent: string; analyze_call_count: string; micros: string;
    lenses: Array<{ lens: string; credits: number; billed_at: string }> | null;
  }>(
    `SELECT p.sha256, p.first_analyzed_at, p.last_analyzed_at, p.total_credits_spent, p.analyze_call_count, ${MICROS}::text AS micros,
            (SELECT json_agg(json_build_object('lens', r.lens, 'credits', e.credits, 'billed_at', e.produced_at) ORDER BY r.lens)
               FROM lens_records r JOIN lens_events e ON e.id = r.event_id
              WHERE r.user_id = p.user_id AND r.sha256 = p.sha256) AS lenses
       FROM photos p
      WHERE p.user_id = $1 AND ($2::bigint IS NULL OR (${MICROS}, p.sha256) < ($2::bigint, $3::text))
      ORDER BY p.last_analyzed_at DESC, p.sha256 DESC
      LIMIT $4`,
    [accountId, after?.[0] ?? null, after?.[1] ?? null, page.limit + 1],
  );
  const more = rows.rows.length > page.limit;
  const shown = rows.rows.slice(0, page.limit);
  const last = shown.at(-1);
  return {
    photos: shown.map((p) => ({
      sha256: p.sha256,
      firstAnalyzedAt: p.first_analyzed_at.toISOString(),
      lastAnalyzedAt: p.last_analyzed_at.toISOString(),
      totalCreditsSpent: Number(p.total_credits_spent),
      analyzeCallCount: Number(p.analyze_call_count),
      lenses: (p.lenses ?? []).map((l) => ({ lens: l.lens, credits: l.credits, billedAt: new Date(l.billed_at).toISOString() })),
    })),
    next: more && last ? `${last.micros}.${last.sha256}` : null,
  };
}

/** One photo of the workspace's registry with its lens records (the contract's shape) and their billing; null when it holds none. */
export async function galleryPhoto(db: Db, accountId: string, sha256: string): Promise<(Omit<RegistryPhoto, 'origins'> & { billing: BilledLens[] }) | null> {
  const photo = (await getPhotos(db, accountId, [sha256])).get(sha256);
  if (!photo) return null;
  const billing = await db.query<{ lens: string; credits: number; billed_at: Date }>(
    `SELECT r.lens, e.credits, e.produced_at AS billed_at FROM lens_records r JOIN lens_events e ON e.id = r.event_id
      WHERE r.user_id = $1 AND r.sha256 = $2 ORDER BY r.lens`,
    [accountId, sha256],
  );
  const { origins: _origins, ...record } = photo;
  return { ...record, billing: billing.rows.map((b) => ({ lens: b.lens, credits: b.credits, billedAt: b.billed_at.toISOString() })) };
}
