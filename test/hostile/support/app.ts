import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../../api/app.ts';
import { KeyCache } from '../../../auth/cache.ts';
import type { Config } from '../../../core/config.ts';
import { getBalance, type Balance } from '../../../credits/ledger.ts';
import { createPool, type Db } from '../../../db/pool.ts';
import { closeSharedMetadataTool } from '../../../enrich/exiftool.ts';
import { FsBlobStore } from '../../../images/blobstore.ts';
import type { FetchImageOptions } from '../../../images/fetch.ts';
import { RateLimiter } from '../../../ratelimit/limiter.ts';
import { testConfig, type ConfigOverrides } from '../../harness/env.ts';
import { INTERNAL_SECRET } from '../../helpers/app.ts';
import { pipelineStub, type PipelineStub } from './pipeline-stub.ts';

/**
 * The real app, as api/server.ts builds it (real Postgres, Redis rate limits, blob store,
 * exiftool), except that the Temporal client is the pipeline stub: no worker runs, and a request
 * that gets through every check is answered 502 by the stub instead of waiting.
 */

export interface HostileApp {
  app: FastifyInstance;
  config: Config;
  db: Db;
  pipeline: PipelineStub;
  close(): Promise<void>;
}

export async function startHostileApp(
  opts: { config?: ConfigOverrides; fetchOptions?: Partial<FetchImageOptions>; rateLimits?: boolean } = {},
): Promise<HostileApp> {
  const config = testConfig({ INTERNAL_SECRET, ...opts.config });
  const db = createPool(config.DATABASE_URL, { max: 8 });
  const pipeline = pipelineStub();
  const rateLimiter = opts.rateLimits ? await RateLimiter.connect(config.REDIS_URL) : undefined;
  const app = await buildApp({
    config,
    db,
    keyCache: new KeyCache(),
    blobs: new FsBlobStore(config.BLOB_DIR),
    temporal: pipeline.client,
    vendors: ['openai'],
    simulated: [],
    ...(opts.fetchOptions ? { fetchOptions: opts.fetchOptions } : {}),
    ...(rateLimiter ? { rateLimiter } : {}),
  });
  await app.ready();
  return {
    app,
    config,
    db,
    pipeline,
    async close() {
      await app.close();
      await rateLimiter?.close();
      await db.end();
      await closeSharedMetadataTool();
    },
  };
}

export interface Footprint {
  balance: Balance;
  ledgerRows: number;
  photos: number;
  lensRecords: number;
  lensEvents: number;
  reservations: number;
  bespokeSchemas: number;
  vehicleReports: number;
}

/** Everything a request could have changed for a user: balances, ledger and registry rows. */
export async function footprint(db: Db, userId: string): Promise<Footprint> {
  const count = async (table: string) => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE user_id = $1`, [userId])).rows[0]!.n;
  return {
    balance: await getBalance(db, userId),
    ledgerRows: await count('credit_ledger'),
    photos: await count('photos'),
    lensRecords: await count('lens_records'),
    lensEvents: await count('lens_events'),
    reservations: await count('reservations'),
    bespokeSchemas: await count('bespoke_schemas'),
    vehicleReports: await count('vehicle_reports'),
  };
}
