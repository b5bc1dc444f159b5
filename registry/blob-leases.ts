import { randomBytes } from 'node:crypto';
import type { Db, DbClient } from '../db/pool.ts';
import { inTransaction } from '../db/pool.ts';

/**
 * Intake leases (docs/reliability.md "Intake leases"): a request holds each blob it is about to
 * store, or finds stored, from before its `put` until the registry (or a batch item, an upload)
 * names it. Every delete of a blob (a failed request's clean-up, the collector) checks leases and
 * the registry under the same per-blob lock and skips a leased blob, so bytes one request found
 * stored cannot be deleted by another request that stored them first and failed.
 */

/** A new lease holder: one per request, batch submission or batch step. */
export const newLeaseHolder = (kind: string): string => `${kind}:${randomBytes(9).toString('base64url')}`;

/**
 * The per-blob transaction lock every delete takes before it checks, and every lease before it is
 * written: a lease either commits before a delete checks (the delete skips the blob) or after the
 * delete finished (the intake's `put` then writes the blob again).
 */
export async function lockBlobs(c: DbClient, sha256s: string[]): Promise<void> {
  // Sorted, one statement at a time: two deleters never wait on each other in a cycle.
  for (const sha256 of [...new Set(sha256s)].sort()) await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`blob:${sha256}`]);
}

/** Hold `sha256` for `holder` until released, or for `ttlMs` if the holder never releases it (it died). */
export async function leaseBlob(db: Db, args: { holder: string; sha256: string; ttlMs: number }): Promise<void> {
  await inTransaction(db, async (c) => {
    await lockBlobs(c, [args.sha256]);
    await c.query(
      `INSERT INTO blob_leases (sha256, holder, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3))
       ON CONFLICT (sha256, holder) DO UPDATE SET expires_at = EXCLUDED.expires_at`,
      [args.sha256, args.holder, args.ttlMs / 1000],
    );
  });
}

/** End `holder`'s leases: all of them, or those of `sha256s`. */
export async function releaseLeases(db: Db, holder: string, sha256s?: string[]): Promise<void> {
  if (sha256s) await db.query('DELETE FROM blob_leases WHERE holder = $1 AND sha256 = ANY($2)', [holder, sha256s]);
  else await db.query('DELETE FROM blob_leases WHERE holder = $1', [holder]);
}

/** Forget leases whose holder died (the collector's pass): they expired, nothing holds them. */
export async function dropExpiredLeases(db: Db): Promise<number> {
  return (await db.query('DELETE FROM blob_leases WHERE expires_at <= now()')).rowCount ?? 0;
}
