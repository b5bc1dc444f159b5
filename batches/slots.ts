import { AppError } from '../core/errors.ts';
import type { Db } from '../db/pool.ts';

/**
 * Long-lived work one process admits per key: event streams and exports. Each holder is counted
 * under several keys at once (an account, the person who owns it, the whole process), each with its
 * own cap; a take is all or nothing, and the release is idempotent (a stream that ends and a
 * connection that closes both release it).
 */
export class Slots {
  private readonly open = new Map<string, number>();

  /** Takes one slot under every key, or none: the first key at its cap is returned instead. */
  take(keys: ReadonlyArray<{ key: string; max: number }>): { release(): void } | { full: string } {
    for (const k of keys) if ((this.open.get(k.key) ?? 0) >= k.max) return { full: k.key };
    for (const k of keys) this.open.set(k.key, (this.open.get(k.key) ?? 0) + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        for (const k of keys) {
          const left = (this.open.get(k.key) ?? 1) - 1;
          if (left > 0) this.open.set(k.key, left);
          else this.open.delete(k.key);
        }
      },
    };
  }
}

/**
 * The person who made this key in the console (`api_keys.created_by`), or null for a key made with
 * `npm run admin` or before creators were recorded. A stream counts against its account and
 * against this person: a person may own several free workspaces, so what one account is allowed,
 * the person making keys for them is allowed once, not once per workspace. Not against every owner
 * of the account: a co-owner's streams in a shared team would use up the other owner's share in
 * all their workspaces (docs/decisions.md).
 */
export async function keyCreatorOf(db: Db, keyId: string): Promise<string | null> {
  const r = await db.query<{ created_by: string | null }>('SELECT created_by FROM api_keys WHERE id = $1', [keyId]);
  return r.rows[0]?.created_by ?? null;
}

/** Event streams on batches one account may hold open on one API process. */
export const MAX_STREAMS_PER_ACCOUNT = 5;
/** … and one person, over the keys they made in every workspace. */
export const MAX_STREAMS_PER_PERSON = 5;
/** How long a caller refused a stream or an export is told to wait before asking again. */
export const SLOT_RETRY_AFTER_S = 5;

/** A 429 (this caller's share) or 503 (the process's) with Retry-After, as header and in the envelope. */
export function slotsFull(code: 'RATE_LIMITED' | 'SERVICE_UNAVAILABLE', message: string): AppError {
  return new AppError(code, message, { headers: { 'retry-after': String(SLOT_RETRY_AFTER_S) }, details: { retryAfterSeconds: SLOT_RETRY_AFTER_S } });
}
