import { Client, Connection } from '@temporalio/client';
import { buildApp } from '../../../api/app.ts';
import { KeyCache } from '../../../auth/cache.ts';
import { loadConfig } from '../../../core/config.ts';
import { createPool } from '../../../db/pool.ts';
import { closeSharedMetadataTool } from '../../../enrich/exiftool.ts';
import { FsBlobStore } from '../../../images/blobstore.ts';
import { DEFAULT_TEMPORAL_ADDRESS } from '../../../worker/address.ts';
import { PUBLIC_INTERNET } from '../../../images/fetch.ts';
import { createApiMetrics } from '../../../metrics/api.ts';
import { noRateLimits } from '../../helpers/deps.ts';

/**
 * The API as its own process, for the image corpus: a decoder crash kills this process, not the
 * test, and its memory is measured alone. Configured from its environment like api/server.ts,
 * with a real Temporal client on the harness's server and the test file's task queue (the test
 * runs the worker for it). Talks to the parent over IPC: `ready` with the port, then answers
 * `memory` requests, and `stop`.
 */

type Request = { type: 'memory' | 'stop'; id: number };

const config = loadConfig();
const db = createPool(config.DATABASE_URL, { max: 8 });
const connection = await Connection.connect({ address: config.TEMPORAL_ADDRESS ?? DEFAULT_TEMPORAL_ADDRESS });
const app = await buildApp({
  fetchPolicy: PUBLIC_INTERNET,
  rateLimiter: noRateLimits,
  metrics: createApiMetrics(),
  config,
  db,
  keyCache: new KeyCache(),
  blobs: new FsBlobStore(config.BLOB_DIR),
  temporal: new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }),
});
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
const send = (message: unknown) => process.send?.(message);
send({ type: 'ready', port: typeof address === 'object' && address ? address.port : 0 });

process.on('message', (m: Request) => {
  if (m.type === 'memory') {
    send({ type: 'memory', id: m.id, rss: process.memoryUsage().rss, maxRss: process.resourceUsage().maxRSS * 1024 });
  } else if (m.type === 'stop') {
    void (async () => {
      await app.close();
      await connection.close();
      await db.end();
      await closeSharedMetadataTool();
      send({ type: 'stopped', id: m.id });
      process.disconnect();
    })();
  }
});
