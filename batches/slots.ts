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
 * The people who own a workspace (an API account). A person may own several workspaces (their own
 * and any team workspace they made, which costs nothing), so what one account is allowed, the
 * person behind it is allowed once, not once per workspace. An account no person owns (made with
 * `npm run admin`) has no one to count.
 */
export async function ownersOf(db: Db, accountId: string): Promise<string[]> {
  const r = await db.query<{ console_user_id: string }>(`SELECT console_user_id FROM workspace_members WHERE workspace_id = $1 AND role = 'owner' ORDER BY console_user_id`, [accountId]);
  return r.rows.map((row) => row.console_user_id);
}

/** Event streams on batches one account may hold open on one API process. */
export const MAX_STREAMS_PER_ACCOUNT = 5;
/** … and one person, over every workspace they own. */
export const MAX_STREAMS_PER_PERSON = 5;
/** How long a caller refused a stream or an export is told to wait before asking again. */
export const SLOT_RETRY_AFTER_S = 5;

/** A 429 (this caller's share) or 503 (the process's) with Retry-After, as header and in the envelope. */
export function slotsFull(code: 'RATE_LIMITED' | 'SERVICE_UNAVAILABLE', message: string): AppError {
  return new AppError(code, message, { headers: { 'retry-after': String(SLOT_RETRY_AFTER_S) }, details: { retryAfterSeconds: SLOT_RETRY_AFTER_S } });
}
