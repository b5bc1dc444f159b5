import type { KeyRecord } from './repository.ts';

export const KEY_CACHE_TTL_MS = 5 * 60 * 1000;

/**
 * In-process API-key cache (SPEC "Authentication" 7): entries live 5 minutes unless evicted.
 * Only positive lookups are cached so a newly issued key works at once.
 */
export class KeyCache {
  private readonly entries = new Map<string, { record: KeyRecord; expiresAt: number }>();

  constructor(
    private readonly ttlMs: number = KEY_CACHE_TTL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  get(keyHash: string): KeyRecord | undefined {
    const e = this.entries.get(keyHash);
    if (!e) return undefined;
    if (e.expiresAt <= this.now()) {
      this.entries.delete(keyHash);
      return undefined;
    }
    return e.record;
  }

  set(record: KeyRecord): void {
    this.entries.set(record.keyHash, { record, expiresAt: this.now() + this.ttlMs });
  }

  evictKey(keyHash: string): boolean {
    return this.entries.delete(keyHash);
  }

  evictUser(userId: string): number {
    let n = 0;
    for (const [hash, e] of this.entries) {
      if (e.record.userId === userId) {
        this.entries.delete(hash);
        n++;
      }
    }
    return n;
  }

  get size(): number {
    return this.entries.size;
  }
}
