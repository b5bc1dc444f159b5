import { buildApp } from '../../../api/app.ts';
import { KeyCache } from '../../../auth/cache.ts';
import { loadConfig } from '../../../core/config.ts';
import { createPool } from '../../../db/pool.ts';
import { closeSharedMetadataTool } from '../../../enrich/exiftool.ts';
import { FsBlobStore } from '../../../images/blobstore.ts';
import { pipelineStub } from './pipeline-stub.ts';

/**
 * The API as its own process, for the image corpus: a decoder crash kills this process, not the
 * test, and its memory is measured alone. Configured from its environment like api/server.ts;
 * the Temporal client is the pipeline stub (no worker runs). Talks to the parent over IPC:
 * `ready` with the port, then answers `memory` and `pipeline` requests, and `stop`.
 */

type Request = { type: 'memory' | 'pipeline' | 'stop'; id: number };

const config = loadConfig();
const db = createPool(config.DATABASE_URL, { max: 8 });
const pipeline = pipelineStub();
const app = await buildApp({
  config,
  db,
  keyCache: new KeyCache(),
  blobs: new FsBlobStore(config.BLOB_DIR),
  temporal: pipeline.client,
  vendors: ['openai'],
  simulated: [],
});
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
const send = (message: unknown) => process.send?.(message);
send({ type: 'ready', port: typeof address === 'object' && address ? address.port : 0 });

process.on('message', (m: Request) => {
  if (m.type === 'memory') {
    send({ type: 'memory', id: m.id, rss: process.memoryUsage().rss, maxRss: process.resourceUsage().maxRSS * 1024 });
  } else if (m.type === 'pipeline') {
    send({ type: 'pipeline', id: m.id, requestIds: [...pipeline.requestIds()] });
  } else if (m.type === 'stop') {
    void (async () => {
      await app.close();
      await db.end();
      await closeSharedMetadataTool();
      send({ type: 'stopped', id: m.id });
      process.disconnect();
    })();
  }
});
