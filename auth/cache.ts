import type { KeyRecord } from './repository.ts';

export const KEY_CACHE_TTL_MS = 5 * 60 * 1000;

/**
 * In-process API-key cache (docs/contract.md "Authentication" 5): entries live 5 minutes unless evicted.
 * Only positive lookups are cached so a newly issued key works at once.
 *
 * A fill must not outlive an eviction it raced: the caller reads `epoch` before reading the key
 * from the database and passes it to `set`, which caches nothing if any eviction (or suspension)
 * happened in between. While evictions may be missed (the eviction bus is cut off from Redis) the
 * cache is suspended: empty, and every request reads the database.
 */
export class KeyCache {
  private readonly entries = new Map<string, { record: KeyRecord; expiresAt: number }>();
  private evictions = 0;
  private suspended = false;

  constructor(
    private readonly ttlMs: number = KEY_CACHE_TTL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Changes with every eviction, suspension and resumption. */
  get epoch(): number {
    return this.evictions;
  }

  get(keyHash: string): KeyRecord | undefined {
    const e = this.entries.get(keyHash);
    if (!e) return undefined;
    if (e.expiresAt <= this.now()) {
      this.entries.delete(keyHash);
      return undefined;
    }
    return e.record;
  }

  /** Caches a record read from the database when `epoch` was current; false when it was not cached. */
  set(record: KeyRecord, epoch: number = this.evictions): boolean {
    if (this.suspended || epoch !== this.evictions) return false;
    this.entries.set(record.keyHash, { record, expiresAt: this.now() + this.ttlMs });
    return true;
  }

  evictKey(keyHash: string): boolean {
    this.evictions++;
    return this.entries.delete(keyHash);
  }

  evictAccount(accountId: string): number {
    this.evictions++;
    let n = 0;
    for (const [hash, e] of this.entries) {
      if (e.record.accountId === accountId) {
        this.entries.delete(hash);
        n++;
      }
    }
    return n;
  }

  /** Evictions may be lost from now on: forget everything and cache nothing until `resume`. */
  suspend(): void {
    this.evictions++;
    this.suspended = true;
    this.entries.clear();
  }

  /** Evictions arrive again: start from empty (any sent meanwhile were missed). */
  resume(): void {
    this.evictions++;
    this.suspended = false;
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
