import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ERRORS, type Lock, type Locker, type RequestRelease } from '@tus/utils';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import type { Db } from '../db/pool.ts';

/**
 * tus's lock on one upload, shared by every process (docs/decisions.md, "One writer per upload").
 * @tus/server takes a lock for each HEAD, PATCH, DELETE and creation; its default lives in one
 * process's memory. Here the lock is a lease on the upload's row: taken when free or run out,
 * renewed while held, and a request that finds it held marks the row so the holder, watching it,
 * lets go — tus then ends the holder's request after storing what it received, which is what a
 * resumed upload's HEAD must see before it sends the rest.
 *
 * An id with no row yet (a creation, or an id nobody made) has nothing to guard: the lock is
 * granted and tus answers as it would.
 */
export interface LockerTimings {
  /** How long a request waits for the lock before tus answers it 500 (tus's default: 30 s). */
  acquireTimeoutMs: number;
  /** How long a held lock lasts without renewal (a holder that died frees it after this). */
  leaseMs: number;
  /** How often a waiter asks again, and a holder renews and looks for a waiter. */
  pollMs: number;
}

const DEFAULTS: LockerTimings = { acquireTimeoutMs: 30_000, leaseMs: 15_000, pollMs: 250 };

/** The database away while locking: 503 with Retry-After (uploads/tus.ts adds it), as everywhere else. */
const unavailable = { status_code: 503, body: 'The database is unreachable right now; send the same request again in a moment' };

export function rowLocker(db: Db, timings: Partial<LockerTimings> = {}): Locker {
  const t = { ...DEFAULTS, ...timings };
  return { newLock: (id) => new RowLock(db, id, t) };
}

class RowLock implements Lock {
  private readonly token = randomBytes(12).toString('hex');
  private held = false;
  private watching: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Db,
    private readonly id: string,
    private readonly t: LockerTimings,
  ) {}

  async lock(signal: AbortSignal, requestRelease: RequestRelease): Promise<void> {
    const deadline = Date.now() + this.t.acquireTimeoutMs;
    try {
      for (;;) {
        if (signal.aborted) throw ERRORS.ABORTED;
        const took = await this.db.query(
          `UPDATE uploads SET lock_token = $2, lock_until = now() + make_interval(secs => $3), release_wanted = false
            WHERE id = $1 AND (lock_token IS NULL OR lock_until < now()) RETURNING 1`,
          [this.id, this.token, this.t.leaseMs / 1000],
        );
        if (took.rowCount) break;
        // Held by another request (here or in another process): ask it to let go, then wait.
        const asked = await this.db.query('UPDATE uploads SET release_wanted = true WHERE id = $1 RETURNING 1', [this.id]);
        if (!asked.rowCount) return; // no such row: nothing to guard
        if (Date.now() > deadline) throw ERRORS.ERR_LOCK_TIMEOUT;
        await sleep(this.t.pollMs, undefined, { signal }).catch(() => undefined);
      }
    } catch (err) {
      if (isDatabaseUnavailable(err)) throw unavailable;
      throw err;
    }
    this.held = true;
    let asked = false;
    this.watching = setInterval(() => {
      void this.db
        .query<{ release_wanted: boolean }>(
          `UPDATE uploads SET lock_until = now() + make_interval(secs => $3) WHERE id = $1 AND lock_token = $2 RETURNING release_wanted`,
          [this.id, this.token, this.t.leaseMs / 1000],
        )
        .then((r) => {
          // Someone waits, or the lease was lost (this process stalled past it): let go.
          if (!asked && (!r.rowCount || r.rows[0]!.release_wanted)) {
            asked = true;
            void requestRelease();
          }
        })
        .catch(() => undefined); // the next tick asks again; the lease covers a short outage
    }, this.t.pollMs);
    this.watching.unref();
  }

  async unlock(): Promise<void> {
    clearInterval(this.watching);
    if (!this.held) return;
    this.held = false;
    await this.db
      .query('UPDATE uploads SET lock_token = NULL, lock_until = NULL, release_wanted = false WHERE id = $1 AND lock_token = $2', [this.id, this.token])
      .catch(() => undefined); // unreachable: the lease runs out instead
  }
}
