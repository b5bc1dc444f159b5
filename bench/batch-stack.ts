/**
 * The stack the batch benches run against, in one process as `npm start` runs it: a fresh
 * database, a Temporal dev server, the simulated vendors, an in-process worker and the API on a
 * free port, with one account holding plenty of credits. `close()` stops and removes all of it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { buildApp } from '../api/app.ts';
import { KeyCache } from '../auth/cache.ts';
import { issueKey } from '../auth/repository.ts';
import { createBillingAccount } from '../accounts/billing-accounts.ts';
import { loadConfig, type Config } from '../core/config.ts';
import { grant } from '../credits/ledger.ts';
import { createDatabaseIfMissing, dropDatabase, migrate } from '../db/migrate.ts';
import { createPool, type Db } from '../db/pool.ts';
import { FsBlobStore } from '../images/blobstore.ts';
import { PUBLIC_INTERNET } from '../images/fetch.ts';
import { startTemporalDevServer } from '../tools/scripts/temporal.ts';
import { startSimVendor, type SimVendor } from '../tools/sim/index.ts';
import { startWorker } from '../worker/main.ts';
import { createApiMetrics } from '../metrics/api.ts';
import { noRateLimits } from '../test/helpers/deps.ts';

export interface BatchStack {
  config: Config;
  db: Db;
  temporal: Client;
  sim: SimVendor;
  /** The API's base URL. */
  base: string;
  accountId: string;
  /** A live key of that account. */
  key: string;
  close(): Promise<void>;
}

export async function startBatchStack(name: string): Promise<BatchStack> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const dbName = `lenstack_bench_${name}_${process.pid}`;
  const blobDir = await mkdtemp(path.join(os.tmpdir(), 'lenstack-bench-'));
  const temporalServer = await startTemporalDevServer({});
  const sim = await startSimVendor({ port: 0 });
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${dbName}`,
    TEMPORAL_ADDRESS: temporalServer.address,
    TEMPORAL_TASK_QUEUE: `bench-${process.pid}`,
    REDIS_PREFIX: `lenstack-bench-${process.pid}:`,
    BLOB_DIR: blobDir,
    SIM_VENDOR_URL: sim.url,
    LOG_LEVEL: 'silent',
    OPENAI_API_KEY: '',
    ANTHROPIC_API_KEY: '',
    GEMINI_API_KEY: '',
  });
  await createDatabaseIfMissing(config.DATABASE_URL);
  await migrate(config.DATABASE_URL);
  const db = createPool(config.DATABASE_URL, { max: 20 });
  const worker = await startWorker(config, { log: () => {} });
  const connection = await Connection.connect({ address: temporalServer.address });
  const temporal = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  const app = await buildApp({ fetchPolicy: PUBLIC_INTERNET, config, db, keyCache: new KeyCache(), blobs: new FsBlobStore(blobDir), temporal, rateLimiter: noRateLimits, metrics: createApiMetrics() });
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  const close = async () => {
    await app.close();
    await worker.shutdown();
    await connection.close();
    await db.end();
    await sim.close();
    await temporalServer.stop();
    await dropDatabase(config.DATABASE_URL);
    await rm(blobDir, { recursive: true, force: true });
  };
  try {
    const { accountId } = await createBillingAccount(db, `bench-${name}@example.test`);
    const { key } = await issueKey(db, accountId, 'live');
    await grant(db, { accountId, pool: 'purchased', amount: 1_000_000, idempotencyKey: 'bench' });
    return { config, db, temporal, sim, base, accountId, key, close };
  } catch (err) {
    await close();
    throw err;
  }
}
