import { LRUCache } from 'lru-cache';
import type { Db } from '../db/pool.ts';

/**
 * When each key was last used, for the console's key list ("last used"), at minute resolution:
 * one UPDATE per key per process per minute at most, sent without holding up the request. A lost
 * write (a crash, a failing database) only makes "last used" a minute older.
 */
export class KeyUsage {
  private readonly written = new LRUCache<string, number>({ max: 50_000 });

  constructor(
    private readonly db: Db,
    private readonly onError: (err: unknown) => void = () => {},
    private readonly intervalMs = 60_000,
  ) {}

  seen(keyId: string, now = Date.now()): void {
    const last = this.written.get(keyId);
    if (last !== undefined && now - last < this.intervalMs) return;
    this.written.set(keyId, now);
    this.db
      .query(`UPDATE api_keys SET last_used_at = now() WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`, [keyId])
      .catch(this.onError);
  }
}
