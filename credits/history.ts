import type { Db } from '../db/pool.ts';

/** One ledger row as an account's owner may see it (no reservation ids, no idempotency keys). */
export interface LedgerEntry {
  at: string;
  kind: 'grant' | 'purchase' | 'reserve' | 'settle' | 'release';
  /** Change of the spendable balance (community + purchased). */
  credits: number;
  /** Credits charged by this row (settlements). */
  charged: number;
  note: string | null;
}

/** The newest ledger rows of an account, newest first. */
export async function ledgerHistory(db: Db, accountId: string, limit = 50): Promise<LedgerEntry[]> {
  const r = await db.query<{ created_at: Date; kind: LedgerEntry['kind']; spendable: string; charged: string; note: string | null }>(
    `SELECT created_at, kind, community_delta + purchased_delta AS spendable, charged_delta AS charged, note
       FROM credit_ledger WHERE user_id = $1 ORDER BY id DESC LIMIT $2`,
    [accountId, limit],
  );
  return r.rows.map((row) => ({ at: row.created_at.toISOString(), kind: row.kind, credits: Number(row.spendable), charged: Number(row.charged), note: row.note }));
}

/** Credits charged per UTC day over the last `days` days, oldest first, days without charges as 0. */
export async function chargedPerDay(db: Db, accountId: string, days = 30, now = new Date()): Promise<Array<{ day: string; charged: number }>> {
  const r = await db.query<{ day: string; charged: string }>(
    `SELECT to_char(d.day, 'YYYY-MM-DD') AS day, coalesce(sum(l.charged_delta), 0) AS charged
       FROM generate_series(($2::timestamptz AT TIME ZONE 'UTC')::date - ($3::int - 1), ($2::timestamptz AT TIME ZONE 'UTC')::date, interval '1 day') AS d(day)
       LEFT JOIN credit_ledger l ON l.user_id = $1 AND (l.created_at AT TIME ZONE 'UTC')::date = d.day::date
      GROUP BY d.day ORDER BY d.day`,
    [accountId, now, days],
  );
  return r.rows.map((row) => ({ day: row.day, charged: Number(row.charged) }));
}
