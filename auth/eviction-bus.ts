import { randomUUID } from 'node:crypto';
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

/** Every API process publishes a heartbeat of its own on the eviction channel this often… */
const HEARTBEAT_EVERY_MS = 100;
/** …and trusts its key cache only while the last one it heard back is at most this old. */
const HEARTBEAT_STALE_MS = 400;

/**
 * Key eviction fan-out over Redis pub/sub (docs/architecture.md): every API process
 * subscribes and drops the key from its own cache.
 *
 * Pub/sub does not replay what a subscriber missed, so the cache is trusted only while evictions
 * provably arrive: each process hears its own heartbeat come back on the channel, and Redis
 * delivers a channel's messages in order, so an eviction published before a heartbeat it heard has
 * reached it too. When the subscriber errors, reconnects, or hears nothing for 400 ms (a dead or
 * silently black-holed connection), the cache is suspended: emptied, every request reads its key
 * from the database. The first heartbeat heard again resumes it, empty.
 */
export class EvictionBus {
  private constructor(
    private readonly pub: ReturnType<typeof createClient>,
    private readonly sub: ReturnType<typeof createClient>,
    private readonly channel: string,
    private readonly heartbeat: NodeJS.Timeout,
  ) {}

  static async start(redisUrl: string, prefix: string, cache: KeyCache): Promise<EvictionBus> {
    const pub = createClient({ url: redisUrl });
    const sub = pub.duplicate();
    const channel = evictionChannel(prefix);
    const self = randomUUID();
    // Connection errors are retried by the client; they must not crash the process.
    pub.on('error', () => {});

    let trusted = true;
    let heardAt = Date.now();
    const distrust = () => {
      if (!trusted) return;
      trusted = false;
      cache.suspend();
    };
    sub.on('error', distrust);
    sub.on('reconnecting', distrust);

    await Promise.all([pub.connect(), sub.connect()]);
    await sub.subscribe(channel, (message) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(message);
      } catch {
        return; // a malformed message is ignored
      }
      if (typeof parsed === 'object' && parsed !== null && 'heartbeat' in parsed) {
        if (parsed.heartbeat !== self) return;
        heardAt = Date.now();
        if (!trusted) {
          trusted = true;
          cache.resume();
        }
        return;
      }
      applyEviction(cache, parsed as Eviction);
    });
    heardAt = Date.now();
    const heartbeat = setInterval(() => {
      if (Date.now() - heardAt > HEARTBEAT_STALE_MS) distrust();
      if (pub.isReady) void pub.publish(channel, JSON.stringify({ heartbeat: self })).catch(() => {});
    }, HEARTBEAT_EVERY_MS);
    heartbeat.unref();
    return new EvictionBus(pub, sub, channel, heartbeat);
  }

  /** Returns how many API processes received it. */
  async publish(e: Eviction): Promise<number> {
    return this.pub.publish(this.channel, JSON.stringify(e));
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    // quit() would wait for a reconnection that may never come.
    await Promise.allSettled([this.sub, this.pub].map((c) => (c.isReady ? c.quit() : c.destroy())));
  }
}

export function applyEviction(cache: KeyCache, e: Eviction): number {
  if (typeof e !== 'object' || e === null) return 0;
  if ('keyHash' in e && typeof e.keyHash === 'string') return cache.evictKey(e.keyHash) ? 1 : 0;
  if ('userId' in e && typeof e.userId === 'string') return cache.evictAccount(e.userId);
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
