import type { Logger } from 'pino';
import type { Config } from '../core/config.ts';
import type { Db } from '../db/pool.ts';
import type { KeyCache } from '../auth/cache.ts';
import type { EvictionBus } from '../auth/eviction-bus.ts';
import type { Client } from '@temporalio/client';
import type { BlobStore } from '../images/blobstore.ts';
import type { FetchPolicy } from '../images/fetch.ts';
import type { MetadataTool } from '../enrich/exiftool.ts';
import type { RequestLimiter } from '../ratelimit/limiter.ts';
import type { ApiMetrics } from '../metrics/api.ts';
import type { Drain } from './drain.ts';
import type { Limiter } from '../core/limiter.ts';
import type { PaymentGateway } from '../payments/gateway.ts';
import type { Uploads } from '../uploads/service.ts';
import type { RequestLog } from '../requestlog/buffer.ts';

/** Everything the HTTP app needs, built once by api/server.ts (or a test) and passed in. */
export interface AppDeps {
  config: Config;
  db: Db;
  keyCache: KeyCache;
  /** Fans evictions out to every API process; absent in single-process tests. */
  evictionBus?: EvictionBus;
  logger?: Logger | boolean;
  blobs: BlobStore;
  /** Temporal client (api/server.ts connects it at start; a Temporal away later is answered 503 with Retry-After). */
  temporal: Client;
  /** How caller-supplied image URLs are fetched: PUBLIC_INTERNET in server.ts; tests inject their own. */
  fetchPolicy: FetchPolicy;
  /** exiftool handle for /v2/enrich; absent = buildApp takes the process-wide one (enrich/exiftool.ts), started on first use. */
  metadata?: MetadataTool;
  /** The process's bound on concurrent enrichments; absent = buildApp makes enrich/service.ts's default. */
  enrichLimiter?: Limiter;
  /** The gateway packs are sold through; null = purchases refused; absent = the one PAYMENTS_GATEWAY names. */
  payments?: PaymentGateway | null;
  /** Counts requests against the rate limits (api/plugins/rate-limit.ts): Redis in server.ts, shared by every replica. */
  rateLimiter: RequestLimiter;
  /** This process's metrics (GET /metrics). */
  metrics: ApiMetrics;
  /** Graceful-shutdown state shared with server.ts; absent = buildApp makes its own. */
  drain?: Drain;
  /** Resumable uploads (tus) into the configured store; absent = buildApp makes them from the config. */
  uploads?: Uploads;
  /** The console's request log (requestlog/buffer.ts); absent = buildApp makes one over `db`. */
  requestLog?: RequestLog;
}
