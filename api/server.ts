import { pathToFileURL } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { KeyCache } from '../auth/cache.ts';
import { EvictionBus } from '../auth/eviction-bus.ts';
import { loadConfig, type Config } from '../core/config.ts';
import { createLogger } from '../core/logger.ts';
import { createPool } from '../db/pool.ts';
import { closeSharedMetadataTool, sharedMetadataTool } from '../enrich/exiftool.ts';
import { enrichLimiter } from '../enrich/service.ts';
import { configuredPaymentGateway } from '../payments/configured.ts';
import { Client } from '@temporalio/client';
import { connectTemporal } from '../core/temporal-connection.ts';
import { createApiMetrics } from '../metrics/api.ts';
import { blobStoreFromConfig } from '../images/blobstore-from-config.ts';
import { RateLimiter } from '../ratelimit/limiter.ts';
import { DEFAULT_TEMPORAL_ADDRESS } from '../worker/address.ts';
import { buildApp } from './app.ts';
import { Drain } from './drain.ts';
import { PUBLIC_INTERNET } from '../images/fetch.ts';
import { simulatorNotice } from '../vendors/index.ts';

export interface RunningApi {
  app: FastifyInstance;
  url: string;
  /** Graceful: stop accepting, let in-flight requests finish (bounded), then close the pools. Idempotent. */
  close(): Promise<void>;
}

/** Past the grace time, this long more for requests that stopped waiting to answer, then sockets are cut. */
const FORCE_CLOSE_AFTER_GRACE_MS = 5_000;

/** Build the dependencies once, listen, and return a handle whose close() drains in-flight requests. */
export async function startApi(config: Config, opts: { logger?: boolean } = {}): Promise<RunningApi> {
  const db = createPool(config.DATABASE_URL, { application: 'lenstack-api' });
  const keyCache = new KeyCache();
  const evictionBus = await EvictionBus.start(config.REDIS_URL, config.REDIS_PREFIX, keyCache);
  const rateLimiter = await RateLimiter.connect(config.REDIS_URL, { commandTimeoutMs: config.RATE_LIMIT_TIMEOUT_MS });
  const connection = await connectTemporal(config.TEMPORAL_ADDRESS ?? DEFAULT_TEMPORAL_ADDRESS);
  const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const drain = new Drain();
  const app = await buildApp({
    config,
    db,
    keyCache,
    evictionBus,
    logger: opts.logger === false ? false : createLogger(config, 'api'),
    blobs: blobStoreFromConfig(config),
    fetchPolicy: PUBLIC_INTERNET,
    metadata: sharedMetadataTool(),
    enrichLimiter: enrichLimiter(),
    payments: configuredPaymentGateway(config, db),
    temporal,
    rateLimiter,
    metrics: createApiMetrics(),
    drain,
  });
  const address = await app.listen({ host: config.HOST, port: config.PORT });
  const simulated = simulatorNotice(config);
  if (simulated) app.log.warn(simulated);
  let closing: Promise<void> | undefined;
  async function drainAndClose(): Promise<void> {
    const t0 = performance.now();
    app.log.info({ graceMs: config.SHUTDOWN_GRACE_MS }, 'shutting down: no new connections, finishing in-flight requests');
    drain.begin();
    // Requests still awaiting a workflow after the grace time answer 503 (the workflow goes on).
    const abandon = setTimeout(() => drain.abandonWaits(), config.SHUTDOWN_GRACE_MS);
    const force = setTimeout(() => {
      app.log.warn('shutting down: requests still open past the grace time, closing their connections');
      app.server.closeAllConnections();
    }, config.SHUTDOWN_GRACE_MS + FORCE_CLOSE_AFTER_GRACE_MS);
    try {
      await app.close();
    } finally {
      clearTimeout(abandon);
      clearTimeout(force);
    }
    await rateLimiter.close();
    await evictionBus.close();
    await connection.close();
    await db.end();
    await closeSharedMetadataTool();
    app.log.info({ durationMs: Math.round(performance.now() - t0) }, 'shut down');
  }
  return {
    app,
    url: address,
    close() {
      closing ??= drainAndClose();
      return closing;
    },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const config = loadConfig();
  const api = await startApi(config);
  // Repeated signals (npm start forwards SIGTERM after the terminal's SIGINT) join the one drain.
  const stop = (signal: NodeJS.Signals) => {
    api.app.log.info({ signal }, 'signal received');
    api.close().then(
      () => process.exit(0),
      (err: unknown) => {
        api.app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
