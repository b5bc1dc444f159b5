import { pathToFileURL } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { KeyCache } from '../auth/cache.ts';
import { EvictionBus } from '../auth/eviction-bus.ts';
import { loadConfig, type Config } from '../core/config.ts';
import { createPool } from '../db/pool.ts';
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
  const app = await buildApp({ config, db, keyCache, evictionBus, logger: opts.logger ?? true });
  const address = await app.listen({ host: config.HOST, port: config.PORT });
  return {
    app,
    url: address,
    async close() {
      await app.close();
      await evictionBus.close();
      await db.end();
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
