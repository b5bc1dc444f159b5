/**
 * The API alone in its own process for bench/upload-storm.ts, so its memory is measured alone:
 * configured from its environment, no Temporal (the storm uses a sandbox key, which never starts
 * a workflow). Tells the parent its port over IPC, answers `memory`, exits on `stop`.
 */
import { buildApp } from '../api/app.ts';
import { KeyCache } from '../auth/cache.ts';
import { loadConfig } from '../core/config.ts';
import { createPool } from '../db/pool.ts';
import { FsBlobStore } from '../images/blobstore.ts';
import { PUBLIC_INTERNET } from '../images/fetch.ts';
import { createApiMetrics } from '../metrics/api.ts';
import { noRateLimits, unreachableTemporal } from '../test/helpers/deps.ts';

const config = loadConfig();
const db = createPool(config.DATABASE_URL, { max: 8 });
const app = await buildApp({ fetchPolicy: PUBLIC_INTERNET, config, db, keyCache: new KeyCache(), blobs: new FsBlobStore(config.BLOB_DIR), temporal: unreachableTemporal(), rateLimiter: noRateLimits, metrics: createApiMetrics() });
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
process.send?.({ type: 'ready', port: typeof address === 'object' && address ? address.port : 0 });
process.on('message', (m: { type: string }) => {
  if (m.type === 'memory') process.send?.({ type: 'memory', rss: process.memoryUsage().rss, maxRss: process.resourceUsage().maxRSS * 1024 });
  if (m.type === 'stop') void app.close().then(() => db.end()).then(() => process.exit(0));
});
