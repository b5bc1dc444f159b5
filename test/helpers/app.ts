import { request as httpRequest } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../api/app.ts';
import type { AppDeps } from '../../api/deps.ts';
import { KeyCache } from '../../auth/cache.ts';
import { EvictionBus } from '../../auth/eviction-bus.ts';
import { issueKey } from '../../auth/repository.ts';
import { createBillingAccount } from '../../accounts/billing-accounts.ts';
import type { Config } from '../../core/config.ts';
import { grant } from '../../credits/ledger.ts';
import { createPool, type Db } from '../../db/pool.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { testConfig, type ConfigOverrides } from '../harness/env.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { createApiMetrics } from '../../metrics/api.ts';
import { noRateLimits, unreachableTemporal } from './deps.ts';

export const INTERNAL_SECRET = 'test-internal-secret-0123456789abcdef0123456789';

export interface TestApp {
  app: FastifyInstance;
  config: Config;
  db: Db;
  keyCache: KeyCache;
  close(): Promise<void>;
}

/** The real app on the run's Postgres/Redis, driven with app.inject (fastify/demo's test helper). */
export async function buildTestApp(
  opts: { config?: ConfigOverrides; deps?: Partial<AppDeps>; withEvictionBus?: boolean; keyCache?: KeyCache } = {},
): Promise<TestApp> {
  const config = testConfig({ INTERNAL_SECRET, ...opts.config });
  const db = createPool(config.DATABASE_URL, { max: 5 });
  const keyCache = opts.keyCache ?? new KeyCache();
  const evictionBus = opts.withEvictionBus ? await EvictionBus.start(config.REDIS_URL, config.REDIS_PREFIX, keyCache) : undefined;
  const app = await buildApp({
    config,
    db,
    keyCache,
    blobs: new FsBlobStore(config.BLOB_DIR),
    fetchPolicy: PUBLIC_INTERNET,
    temporal: unreachableTemporal(),
    rateLimiter: noRateLimits,
    metrics: createApiMetrics(),
    ...(evictionBus ? { evictionBus } : {}),
    ...opts.deps,
  });
  await app.ready();
  return {
    app,
    config,
    db,
    keyCache,
    async close() {
      await app.close();
      await evictionBus?.close();
      await db.end();
    },
  };
}

export interface TestAccount {
  userId: string;
  liveKey: string;
  testKey: string;
}

let counter = 0;
/** A billing account with a live and a test key, and optional credits in each pool. */
export async function createTestAccount(db: Db, credits: { community?: number; purchased?: number } = {}): Promise<TestAccount> {
  const email = `user${process.pid}-${Date.now()}-${counter++}@example.test`;
  const { accountId } = await createBillingAccount(db, email);
  const live = await issueKey(db, accountId, 'live');
  const test = await issueKey(db, accountId, 'test');
  if (credits.community) await grant(db, { accountId, pool: 'community', amount: credits.community, idempotencyKey: 'test-community' });
  if (credits.purchased) await grant(db, { accountId, pool: 'purchased', amount: credits.purchased, idempotencyKey: 'test-purchased' });
  return { userId: accountId, liveKey: live.key, testKey: test.key };
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** One tus creation-with-upload under an id the client chose (Upload-Metadata `uploadId`): the photo in the POST. */
export const uploadUnderId = (app: FastifyInstance, key: string, id: string, bytes: Buffer) =>
  app.inject({
    method: 'POST',
    url: '/v1/uploads',
    headers: { ...bearer(key), 'tus-resumable': '1.0.0', 'upload-length': String(bytes.length), 'upload-metadata': `uploadId ${Buffer.from(id).toString('base64')}`, 'content-type': 'application/offset+octet-stream' },
    payload: bytes,
  });

/**
 * A request that announces every byte of `bytes` (Content-Length) but sends only the first `cutAt`,
 * then drops its connection: an upload cut off mid-body. Settles once the connection is gone.
 */
export const sendCut = (url: string, opts: { method: 'POST' | 'PATCH'; headers: Record<string, string>; bytes: Buffer; cutAt: number }) =>
  new Promise<void>((resolve) => {
    const req = httpRequest(url, { method: opts.method, headers: { ...opts.headers, 'content-type': 'application/offset+octet-stream', 'content-length': String(opts.bytes.length) } });
    req.on('error', () => resolve());
    req.on('close', () => resolve());
    req.write(opts.bytes.subarray(0, opts.cutAt), () => setImmediate(() => req.destroy()));
  });

/** Asserts the error envelope of docs/contract.md and returns its `error`. */
export function expectEnvelope(body: unknown): { code: string; message: string; retryable: boolean; requestId: string } & Record<string, unknown> {
  const e = (body as { error?: unknown }).error as Record<string, unknown> | undefined;
  if (!e || typeof e.code !== 'string' || typeof e.message !== 'string' || typeof e.retryable !== 'boolean' || typeof e.requestId !== 'string') {
    throw new Error(`not an error envelope: ${JSON.stringify(body)}`);
  }
  return e as never;
}
