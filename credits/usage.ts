import { stringify } from 'csv-stringify/sync';
import type { Db } from '../db/pool.ts';
import { AppError } from '../core/errors.ts';
import { neutralise } from '../exports/table.ts';
import { FIRST_PACK_BONUS_KEY } from './packs.ts';

/**
 * The console's Usage & billing rows (docs/decisions.md "Usage & billing: one row per thing
 * bought or run"), read from the ledger: one row per analysis, vehicle report or enrichment (its
 * reservation's closing row: what was charged, 0 when it was released; the hold that preceded it
 * is not a row of its own), one per batch (every item's closing row summed), one per purchase
 * (its first-pack bonus included) and one per free grant. Holds still open (work running) are
 * not rows yet: the balance shows them as reserved.
 */
export interface UsageRow {
  id: string;
  at: string;
  kind: 'analysis' | 'vehicle-report' | 'enrichment' | 'batch' | 'purchase' | 'grant' | 'other';
  /** The request id of an analysis, report or enrichment; the batch or purchase id. */
  reference: string | null;
  /** Photos (or vehicles) of a batch that were settled or released. */
  items: number;
  charged: number;
  added: number;
  /** Work released without a charge (failed, cancelled). */
  released: boolean;
}

/**
 * How each ledger row (but holds) is grouped: batch items by their batch (the reservation id of a
 * batch item's child workflow is `res:analyze:<workspace>:batch-<batch id>-<index>-<attempt>`,
 * workflows/batch.ts), a purchase with its first-pack bonus by the purchase id in their notes
 * (credits/packs.ts), anything else alone.
 */
const GROUPED = `
  SELECT l.id, l.created_at, l.kind, l.charged_delta, l.community_delta + l.purchased_delta AS spendable, l.reservation_id,
         CASE
           WHEN l.reservation_id ~ ':batch-bat_[0-9a-f]+-' THEN 'batch:' || substring(l.reservation_id from ':batch-(bat_[0-9a-f]+)-')
           WHEN (l.kind = 'purchase' OR l.idempotency_key = $2) AND l.note ~ 'pur_[0-9a-f]+' THEN 'purchase:' || substring(l.note from '(pur_[0-9a-f]+)')
           ELSE 'row:' || l.id
         END AS grp
    FROM credit_ledger l
   WHERE l.user_id = $1 AND l.kind <> 'reserve'`;

const ROWS = `
  SELECT max(g.id)::text AS id, max(g.created_at) AS at, g.grp,
         bool_or(g.kind = 'purchase') AS purchase, bool_or(g.kind = 'grant') AS grant_row,
         min(g.reservation_id) AS reservation_id, count(*)::int AS items,
         sum(g.charged_delta)::bigint AS charged,
         coalesce(sum(g.spendable) FILTER (WHERE g.kind IN ('grant', 'purchase')), 0)::bigint AS added,
         bool_and(g.kind = 'release') AS released
    FROM (${GROUPED}) g
   GROUP BY g.grp`;

interface DbRow {
  id: string;
  at: Date;
  grp: string;
  purchase: boolean;
  grant_row: boolean;
  reservation_id: string | null;
  items: number;
  charged: string;
  added: string;
  released: boolean;
}

function toRow(row: DbRow): UsageRow {
  const res = row.reservation_id ?? '';
  const batch = row.grp.startsWith('batch:') ? row.grp.slice(6) : null;
  const kind: UsageRow['kind'] = batch
    ? 'batch'
    : row.purchase
      ? 'purchase'
      : row.grant_row
        ? 'grant'
        : res.startsWith('res:analyze:')
          ? 'analysis'
          : res.startsWith('res:vehicle:')
            ? 'vehicle-report'
            : res.startsWith('enrich:')
              ? 'enrichment'
              : 'other';
  // The request id is the reservation id's tail: res:analyze:<workspace>:<request id>.
  const requestId = kind === 'analysis' || kind === 'vehicle-report' ? res.split(':').slice(3).join(':') || null : kind === 'enrichment' ? res.split(':')[2] ?? null : null;
  return {
    id: row.id,
    at: row.at.toISOString(),
    kind,
    reference: batch ?? (row.grp.startsWith('purchase:') ? row.grp.slice(9) : requestId),
    items: batch ? row.items : 1,
    charged: Number(row.charged),
    added: Number(row.added),
    released: row.released,
  };
}

/** A page of usage rows, newest first, keyset by the group's newest ledger id. */
export async function usageRows(db: Db, workspaceId: string, page: { limit: number; cursor?: string }): Promise<{ rows: UsageRow[]; next: string | null }> {
  const params: unknown[] = [workspaceId, FIRST_PACK_BONUS_KEY];
  let having = '';
  if (page.cursor) {
    if (!/^\d{1,19}$/.test(page.cursor)) throw new AppError('VALIDATION_FAILED', 'cursor: not a cursor this list gave');
    params.push(page.cursor);
    having = `HAVING max(g.id) < $${params.length}::bigint`;
  }
  params.push(page.limit + 1);
  const r = await db.query<DbRow>(`${ROWS} ${having} ORDER BY max(g.id) DESC LIMIT $${params.length}`, params);
  const rows = r.rows.slice(0, page.limit).map(toRow);
  return { rows, next: r.rows.length > page.limit ? rows.at(-1)!.id : null };
}

const KIND_LABEL: Record<UsageRow['kind'], string> = {
  analysis: 'Analysis',
  'vehicle-report': 'Vehicle report',
  enrichment: 'Enrichment',
  batch: 'Batch',
  purchase: 'Purchase',
  grant: 'Free credits',
  other: 'Other',
};

/** Rows in one CSV at most (the newest); older ones page through the console. */
export const USAGE_CSV_MAX_ROWS = 100_000;

/**
 * The usage rows as CSV (RFC 4180, a BOM, every field quoted), text cells through the batch
 * exports' one rule against formula injection (exports/table.ts `neutralise`).
 */
export async function usageCsv(db: Db, workspaceId: string): Promise<string> {
  const r = await db.query<DbRow>(`${ROWS} ORDER BY max(g.id) DESC LIMIT $3`, [workspaceId, FIRST_PACK_BONUS_KEY, USAGE_CSV_MAX_ROWS]);
  const records = r.rows.map(toRow).map((u) => [u.at, neutralise(KIND_LABEL[u.kind]), neutralise(u.reference ?? ''), u.items, u.charged, u.added, u.released ? 'released' : '']);
  return stringify([['Time (UTC)', 'What', 'Reference', 'Items', 'Credits charged', 'Credits added', 'Note'], ...records], {
    bom: true,
    record_delimiter: 'windows',
    quoted: true,
    quoted_empty: true,
    cast: { number: (n) => String(n) },
  });
}

/**
 * Credits charged per UTC day over the last `days` days, split by lens (lens_events' credits), and
 * `other` for what the ledger charged that no lens event names (bespoke extraction, vehicle
 * reports, enrichment; lens events of erased photos). Oldest day first; days without charges are 0.
 */
export async function chargedPerDayByLens(db: Db, workspaceId: string, days = 30, now = new Date()): Promise<Array<{ day: string; total: number; lenses: Record<string, number> }>> {
  const r = await db.query<{ day: string; lens: string | null; credits: string }>(
    `WITH span AS (
       SELECT ($2::timestamptz AT TIME ZONE 'UTC')::date - ($3::int - 1) AS first, ($2::timestamptz AT TIME ZONE 'UTC')::date AS last
     ), lens AS (
       SELECT (e.produced_at AT TIME ZONE 'UTC')::date AS day, e.lens, sum(e.credits) AS credits
         FROM lens_events e, span
        WHERE e.user_id = $1 AND e.credits > 0 AND e.produced_at >= span.first::timestamp AT TIME ZONE 'UTC'
        GROUP BY 1, 2
     ), ledger AS (
       SELECT (l.created_at AT TIME ZONE 'UTC')::date AS day, sum(l.charged_delta) AS credits
         FROM credit_ledger l, span
        WHERE l.user_id = $1 AND l.charged_delta <> 0 AND l.created_at >= span.first::timestamp AT TIME ZONE 'UTC'
        GROUP BY 1
     )
     SELECT to_char(day, 'YYYY-MM-DD') AS day, lens, credits FROM lens
     UNION ALL
     SELECT to_char(day, 'YYYY-MM-DD'), NULL, credits FROM ledger`,
    [workspaceId, now, days],
  );
  const out = new Map<string, { day: string; total: number; lenses: Record<string, number> }>();
  const last = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  for (let i = days - 1; i >= 0; i--) {
    const day = new Date(last.getTime() - i * 86_400_000).toISOString().slice(0, 10);
    out.set(day, { day, total: 0, lenses: {} });
  }
  const lensSum = new Map<string, number>();
  for (const row of r.rows) {
    const d = out.get(row.day);
    if (!d) continue;
    if (row.lens === null) d.total = Number(row.credits);
    else {
      d.lenses[row.lens] = Number(row.credits);
      lensSum.set(row.day, (lensSum.get(row.day) ?? 0) + Number(row.credits));
    }
  }
  for (const d of out.values()) {
    const other = d.total - (lensSum.get(d.day) ?? 0);
    if (other > 0) d.lenses.other = other;
    // Lens events of a day whose charge settled after midnight: the day's total is what lenses say.
    if (other < 0) d.total = lensSum.get(d.day) ?? 0;
  }
  return [...out.values()];
}
