import { createClient } from 'redis';
import type { KeyCache } from './cache.ts';

export type Eviction = { keyHash: string } | { userId: string };

export const evictionChannel = (redisPrefix: string) => `${redisPrefix}key-evictions`;

/** Publish one eviction without subscribing (the admin CLI); returns how many API processes received it. */
export async function publishEviction(redisUrl: string, redisPrefix: string, e: Eviction): Promise<number> {
  // One attempt: a CLI should fail at once when Redis is down, not retry forever.
  const redis = createClient({ url: redisUrl, socket: { reconnectStrategy: false } });
  redis.on('error', () => {});
  await redis.connect();
  try {
    return await redis.publish(evictionChannel(redisPrefix), JSON.stringify(e));
  } finally {
    await redis.quit().catch(() => {});
  }
}

/**
 * Key eviction fan-out over Redis pub/sub (DESIGN "Where it goes next"): every API process
 * subscribes and drops the key from its own cache. A lost message is bounded by the cache TTL.
 */
export class EvictionBus {
  private constructor(
    private readonly pub: ReturnType<typeof createClient>,
    private readonly sub: ReturnType<typeof createClient>,
    private readonly channel: string,
  ) {}

  static async start(redisUrl: string, prefix: string, cache: KeyCache): Promise<EvictionBus> {
    const pub = createClient({ url: redisUrl });
    const sub = pub.duplicate();
    // Connection errors are retried by the client; they must not crash the process.
    pub.on('error', () => {});
    sub.on('error', () => {});
    await Promise.all([pub.connect(), sub.connect()]);
    const channel = evictionChannel(prefix);
    await sub.subscribe(channel, (message) => {
      try {
        applyEviction(cache, JSON.parse(message) as Eviction);
      } catch {
        // A malformed message is ignored; the TTL still bounds staleness.
      }
    });
    return new EvictionBus(pub, sub, channel);
  }

  /** Returns how many API processes received it. */
  async publish(e: Eviction): Promise<number> {
    return this.pub.publish(this.channel, JSON.stringify(e));
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.sub.quit(), this.pub.quit()]);
  }
}

export function applyEviction(cache: KeyCache, e: Eviction): number {
  if ('keyHash' in e && typeof e.keyHash === 'string') return cache.evictKey(e.keyHash) ? 1 : 0;
  if ('userId' in e && typeof e.userId === 'string') return cache.evictUser(e.userId);
  return 0;
}

/**
 * Drop keys from this process's cache at once and broadcast to every other API process; returns
 * how many processes the broadcast reached (0 without a bus). A failed broadcast throws, so the
 * caller can retry; the cache TTL bounds staleness meanwhile.
 */
export async function evictEverywhere(cache: KeyCache, bus: EvictionBus | undefined, e: Eviction): Promise<number> {
  applyEviction(cache, e);
  return bus ? bus.publish(e) : 0;
}
