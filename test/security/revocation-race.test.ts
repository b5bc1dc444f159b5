import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_CACHE_TTL_MS, KeyCache } from '../../auth/cache.ts';
import { issueKey } from '../../auth/repository.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { bearer, buildTestApp, createTestAccount, INTERNAL_SECRET, type TestApp } from '../helpers/app.ts';
import { hostileScale } from '../hostile/sizes.ts';

/**
 * Revocation against the key cache of every API process. Each app below is one API process (its
 * own KeyCache and EvictionBus on the run's Redis); revocation goes through one of them.
 */

/** Race rounds: 25 in `npm test`, 500 with test/security/full.config.ts. */
const ROUNDS = hostileScale() === 'full' ? 500 : 25;
/**
 * How long the race rounds wait for the eviction: far below the key cache's 5 min TTL, so a
 * refusal inside it comes from the eviction (or the fill check), never from the entry expiring; and
 * far above what a loaded machine needs, so it is not a latency bound. How fast: bench/timings.ts.
 */
const EVICTED_WITHIN_MS = 30_000;

let a: TestApp;
let b: TestApp;
let gatedApp: TestApp;
let proxied: TestApp;
let proxy: RedisCutter;

/**
 * A TCP forwarder to Redis that a test can break: `cut` resets every open connection and refuses
 * new ones; `blackHole` keeps connections open but holds every byte (no error, no close) until
 * `restore` lets the held bytes through, in order.
 */
class RedisCutter {
  private readonly sockets = new Set<net.Socket>();
  private down = false;
  private holding = false;
  private held: Array<() => void> = [];
  private constructor(private readonly server: net.Server) {}

  static async start(target: URL): Promise<RedisCutter> {
    const server = net.createServer();
    const cutter = new RedisCutter(server);
    server.on('connection', (client) => {
      if (cutter.down) return client.resetAndDestroy();
      const upstream = net.connect(Number(target.port || 6379), target.hostname);
      for (const s of [client, upstream]) {
        cutter.sockets.add(s);
        s.on('close', () => cutter.sockets.delete(s));
        s.on('error', () => {});
      }
      const forward = (from: net.Socket, to: net.Socket) =>
        from.on('data', (chunk) => {
          if (cutter.holding) cutter.held.push(() => to.write(chunk));
          else to.write(chunk);
        });
      forward(client, upstream);
      forward(upstream, client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return cutter;
  }

  get url(): string {
    return `redis://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  cut(): void {
    this.down = true;
    for (const s of this.sockets) s.resetAndDestroy();
  }

  blackHole(): void {
    this.holding = true;
  }

  restore(): void {
    this.down = false;
    this.holding = false;
    for (const write of this.held.splice(0)) write();
  }

  close(): Promise<void> {
    this.restore();
    this.cut();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** `db` that awaits `hook` after each key-row read, before the answer reaches the caller. */
function onKeyRead(db: Db, hook: () => Promise<unknown>): Db {
  return new Proxy(db, {
    get(target, prop) {
      if (prop !== 'query') {
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === 'function' ? v.bind(target) : v;
      }
      return async (...args: Parameters<Db['query']>) => {
        const result = await (target.query as (...a: unknown[]) => Promise<unknown>)(...args);
        if (typeof args[0] === 'string' && args[0].includes('FROM api_keys WHERE key_hash')) await hook();
        return result;
      };
    },
  });
}

/** The key-row read of `db`, held until `release` is called; `read` resolves once the row is read. */
function gateKeyReads(db: Db) {
  let release!: () => void;
  let markRead!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const read = new Promise<void>((r) => (markRead = r));
  const gated = onKeyRead(db, () => {
    markRead();
    return released;
  });
  return { db: gated, read, release };
}

/**
 * `db` whose key-row answers arrive late (0 to 28 ms, varying per read), as from a loaded database
 * across a network: the window in which a read from before the revocation returns after its
 * eviction grows from microseconds to what production sees.
 */
function slowKeyReads(db: Db): Db {
  let reads = 0;
  return onKeyRead(db, () => new Promise((resolve) => setTimeout(resolve, (reads++ * 7) % 29)));
}

let gate: ReturnType<typeof gateKeyReads>;
let slowDb: Db;
let gatedCache: KeyCache;

beforeAll(async () => {
  a = await buildTestApp({ withEvictionBus: true });
  slowDb = slowKeyReads(createPool(a.config.DATABASE_URL, { max: 4 }));
  b = await buildTestApp({ withEvictionBus: true, deps: { db: slowDb } });
  gate = gateKeyReads(createPool(a.config.DATABASE_URL, { max: 2 }));
  gatedCache = new KeyCache();
  gatedApp = await buildTestApp({ withEvictionBus: true, keyCache: gatedCache, deps: { db: gate.db } });
  proxy = await RedisCutter.start(new URL(a.config.REDIS_URL));
  proxied = await buildTestApp({ withEvictionBus: true, config: { REDIS_URL: proxy.url } });
}, 60_000);
afterAll(async () => {
  proxy?.restore();
  await Promise.all([a, b, gatedApp, proxied].map((t) => t?.close()));
  await gate?.db.end();
  await slowDb?.end();
  await proxy?.close();
});

const usage = (t: TestApp, key: string) => t.app.inject({ method: 'GET', url: '/v1/usage', headers: bearer(key) }).then((r) => r.statusCode);
const revoke = (accountId: string, keyId: string) =>
  a.app.inject({ method: 'DELETE', url: `/v1/internal/accounts/${accountId}/keys/${keyId}`, headers: { 'x-internal-secret': INTERNAL_SECRET } });

describe('a revoked key cannot be cached as valid by a racing first use', () => {
  it('a key row read before the revocation and cached after its eviction landed: the next request is refused', async () => {
    const user = await createTestAccount(a.db);
    const key = await issueKey(a.db, user.userId, 'live');
    // Evictions from here on release the held read, so the cache fill lands after the eviction.
    const evictKey = gatedCache.evictKey.bind(gatedCache);
    gatedCache.evictKey = (hash) => {
      const r = evictKey(hash);
      if (hash === key.keyHash) gate.release();
      return r;
    };

    const first = usage(gatedApp, key.key);
    await gate.read; // the row is read: not revoked yet
    const res = await revoke(user.userId, key.keyId);
    expect(res.statusCode, res.body).toBe(200);
    // Admitted: it was authenticated before the revocation committed.
    expect(await first).toBe(200);
    expect(await usage(gatedApp, key.key)).toBe(401);
  });

  it(`${ROUNDS} rounds of first use racing the revocation on two processes (one with a slow database): refused by both every time, well before the cache would expire`, async () => {
    expect(EVICTED_WITHIN_MS * 10).toBeLessThanOrEqual(KEY_CACHE_TTL_MS);
    const user = await createTestAccount(a.db);
    for (let round = 0; round < ROUNDS; round++) {
      const key = await issueKey(a.db, user.userId, 'live');
      const racing = [a, b, a, b].map((t) => usage(t, key.key));
      // Revoke while those first uses are between their key read and their cache fill.
      await new Promise((resolve) => setImmediate(resolve));
      const res = await revoke(user.userId, key.keyId);
      expect(res.statusCode, res.body).toBe(200);
      const statuses = await Promise.all(racing);
      expect(statuses.every((s) => s === 200 || s === 401)).toBe(true);
      for (const t of [a, b]) await expect.poll(() => usage(t, key.key), { timeout: EVICTED_WITHIN_MS, interval: 10 }).toBe(401);
      // And it stays refused: nothing cached it as valid behind the eviction.
      for (const t of [a, b]) expect(await usage(t, key.key)).toBe(401);
    }
  });
});

describe('an eviction lost while a process is cut off from Redis', () => {
  it('a silently black-holed connection (no error, no close): the process refuses the revoked key long before its cache entry would expire', async () => {
    const user = await createTestAccount(a.db);
    const key = await issueKey(a.db, user.userId, 'live');
    await expect.poll(async () => (await usage(proxied, key.key)) === 200 && proxied.keyCache.get(key.keyHash) !== undefined, { timeout: 5_000, interval: 50 }).toBe(true);

    proxy.blackHole();
    const res = await revoke(user.userId, key.keyId);
    expect(res.statusCode, res.body).toBe(200);
    const revokedAt = performance.now();
    // Far below the 5 min TTL, so the refusal is the bus's suspension, not expiry; the latency is
    // a figure (printed here, measured in bench/timings.ts), not a bound a loaded machine could miss.
    await expect.poll(() => usage(proxied, key.key), { timeout: EVICTED_WITHIN_MS, interval: 10 }).toBe(401);
    process.stderr.write(`black-holed eviction bus: revoked key refused ${(performance.now() - revokedAt).toFixed(0)} ms after the revoke answered\n`);

    proxy.restore();
    const fresh = await issueKey(a.db, user.userId, 'live');
    await expect.poll(async () => (await usage(proxied, fresh.key)) === 200 && proxied.keyCache.get(fresh.keyHash) !== undefined, { timeout: 5_000, interval: 50 }).toBe(true);
    expect(await usage(proxied, key.key)).toBe(401);
  });

  it('is not trusted to arrive: the cut-off process refuses the revoked key long before its cache entry would expire, and caches again once back', async () => {
    const user = await createTestAccount(a.db);
    const key = await issueKey(a.db, user.userId, 'live');
    expect(await usage(proxied, key.key)).toBe(200); // cached in that process

    proxy.cut();
    const res = await revoke(user.userId, key.keyId);
    expect(res.statusCode, res.body).toBe(200);
    await expect.poll(() => usage(proxied, key.key), { timeout: EVICTED_WITHIN_MS, interval: 10 }).toBe(401);

    proxy.restore();
    const fresh = await issueKey(a.db, user.userId, 'live');
    // Back on Redis, the process caches keys again (and still refuses the revoked one).
    await expect.poll(async () => (await usage(proxied, fresh.key)) === 200 && proxied.keyCache.get(fresh.keyHash) !== undefined, { timeout: 5_000, interval: 50 }).toBe(true);
    expect(await usage(proxied, key.key)).toBe(401);
  });
});
