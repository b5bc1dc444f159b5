import { pathToFileURL } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { KeyCache } from '../auth/cache.ts';
import { EvictionBus } from '../auth/eviction-bus.ts';
import { loadConfig, type Config } from '../core/config.ts';
import { createPool } from '../db/pool.ts';
import { closeSharedMetadataTool } from '../enrich/exiftool.ts';
import { Client, Connection } from '@temporalio/client';
import { FsBlobStore } from '../images/blobstore.ts';
import { RateLimiter } from '../ratelimit/limiter.ts';
import { createVisionClients } from '../vendors/index.ts';
import { DEFAULT_TEMPORAL_ADDRESS } from '../worker/address.ts';
import { buildApp } from './app.ts';

export interface RunningApi {
  app: FastifyInstance;
  url: string;
  close(): Promise<void>;
}

/** Build the dependencies once, listen, and return a handle whose close() drains in-flight requests. */
export async function startApi(config: Config, opts: { logger?: boolean } = {}): Promise<RunningApi> {
  const db = createPool(config.DATABASE_URL, { application: 'lenstack-api' });
  const keyCache = new KeyCache();
  const evictionBus = await EvictionBus.start(config.REDIS_URL, config.REDIS_PREFIX, keyCache);
  const rateLimiter = await RateLimiter.connect(config.REDIS_URL);
  const connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS ?? DEFAULT_TEMPORAL_ADDRESS });
  const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const vision = createVisionClients(config);
  const app = await buildApp({
    config,
    db,
    keyCache,
    evictionBus,
    logger: opts.logger ?? true,
    blobs: new FsBlobStore(config.BLOB_DIR),
    temporal,
    vendors: vision.clients.map((c) => c.vendor),
    simulated: vision.simulated,
    rateLimiter,
  });
  for (const w of vision.warnings) app.log.warn(w);
  const address = await app.listen({ host: config.HOST, port: config.PORT });
  return {
    app,
    url: address,
    async close() {
      await app.close();
      await rateLimiter.close();
      await evictionBus.close();
      await connection.close();
      await db.end();
      await closeSharedMetadataTool();
    },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const config = loadConfig();
  const api = await startApi(config);
  const stop = async () => {
    await api.close();
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
