import type { DestinationStream } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.ts';
import { KeyCache } from '../../auth/cache.ts';
import { createLogger } from '../../core/logger.ts';
import { FsBlobStore } from '../../images/blobstore.ts';
import { bearer, createTestAccount, INTERNAL_SECRET } from '../helpers/app.ts';
import { photoBase64 } from '../helpers/photos.ts';
import { startPipeline, type Pipeline } from '../helpers/pipeline.ts';
import { killAll, serviceEnv, spawnService, workerPolling, type ServiceProcess } from '../helpers/processes.ts';
import { PUBLIC_INTERNET } from '../../images/fetch.ts';
import { createApiMetrics } from '../../metrics/api.ts';
import { noRateLimits } from '../helpers/deps.ts';

let p: Pipeline;
let worker: ServiceProcess;
beforeAll(async () => {
  p = await startPipeline({ worker: false });
  worker = spawnService('worker/main.ts', serviceEnv(p.config, { LOG_LEVEL: 'debug' }));
  await workerPolling(worker);
}, 240_000);
afterAll(async () => {
  killAll();
  await p?.close();
});

describe('structured logs', () => {
  it('carry requestId (API) and workflowId (API and worker activities); keys and the internal secret never appear', async () => {
    const lines: string[] = [];
    const sink: DestinationStream = { write: (s: string) => void lines.push(s) };
    // The API's own logger (core/logger.ts) at its most verbose, writing into `lines`.
    const app = await buildApp({
      fetchPolicy: PUBLIC_INTERNET,
      rateLimiter: noRateLimits,
      metrics: createApiMetrics(),
      config: p.config,
      db: p.db,
      keyCache: new KeyCache(),
      blobs: new FsBlobStore(p.config.BLOB_DIR),
      temporal: p.temporal,
      logger: createLogger({ LOG_LEVEL: 'trace' }, 'api', sink),
    });
    try {
      const user = await createTestAccount(p.db, { community: 10 });
      const requestId = `req-logs-${Date.now()}`;
      const ok = await app.inject({
        method: 'POST',
        url: '/v1/analyze',
        headers: { ...bearer(user.liveKey), 'x-request-id': requestId, cookie: `session=${user.liveKey}` },
        payload: { imageBase64: photoBase64('gps-DSCN0021.jpg'), modules: ['dating'] },
      });
      expect(ok.statusCode, ok.body).toBe(200);
      const internal = await app.inject({ method: 'GET', url: `/v1/usage?userId=${user.userId}`, headers: { 'x-internal-secret': INTERNAL_SECRET } });
      expect(internal.statusCode).toBe(200);
      const metrics = await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${INTERNAL_SECRET}` } });
      expect(metrics.statusCode).toBe(200);
      const wrongSecret = `${INTERNAL_SECRET.slice(0, -4)}zzzz`;
      expect((await app.inject({ method: 'GET', url: `/v1/usage?userId=${user.userId}`, headers: { 'x-internal-secret': wrongSecret } })).statusCode).toBe(401);
      const wrongKey = `svc_live_${'Q'.repeat(40)}`;
      expect((await app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(wrongKey), payload: { imageBase64: 'x' } })).statusCode).toBe(401);
      expect((await app.inject({ method: 'POST', url: '/v1/analyze', headers: bearer(user.testKey), payload: { imageBase64: 'x', bogus: user.testKey.length } })).statusCode).toBe(400);

      const api = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
      const text = lines.join('');
      for (const secret of [user.liveKey, user.testKey, INTERNAL_SECRET, wrongSecret, wrongKey]) expect(text).not.toContain(secret);
      expect(api.length).toBeGreaterThanOrEqual(12); // incoming + completed per request, workflow lines

      const workflowId = `analyze:${user.userId}:${requestId}`;
      const mine = api.filter((l) => l.requestId === requestId);
      expect(mine.map((l) => l.msg)).toEqual(['incoming request', 'workflow started', 'workflow completed', 'request completed']);
      expect(mine.filter((l) => l.workflowId === workflowId).map((l) => l.msg)).toEqual(['workflow started', 'workflow completed']);
      expect(mine.every((l) => l.service === 'api' && typeof l.time === 'string')).toBe(true);
      // Every request line names its request.
      const requestLines = api.filter((l) => l.req || l.res);
      // Non-empty first: with the fields renamed, every() over nothing would pass silently.
      expect(requestLines.filter((l) => l.requestId === requestId).map((l) => l.msg)).toEqual(['incoming request', 'request completed']);
      expect(requestLines.every((l) => typeof l.requestId === 'string')).toBe(true);

      // The worker process: the vendor call and the credit steps, each with workflowId and activityType.
      await expect.poll(() => worker.logLines().filter((l) => l.workflowId === workflowId).map((l) => l.msg), { timeout: 10_000 }).toEqual(
        expect.arrayContaining(['credits reserved', 'vendor call succeeded', 'credits settled']),
      );
      const call = worker.logLines().find((l) => l.workflowId === workflowId && l.msg === 'vendor call succeeded')!;
      expect(call).toMatchObject({ service: 'worker', activityType: 'callOpenAI', vendor: 'openai', task: 'lenses', attempt: 1, workflowType: 'analyzeWorkflow' });
      const settled = worker.logLines().find((l) => l.workflowId === workflowId && l.msg === 'credits settled')!;
      expect(settled).toMatchObject({ activityType: 'persistAndSettle', charged: 1, refunded: 0 });
      for (const secret of [user.liveKey, INTERNAL_SECRET]) expect(worker.output()).not.toContain(secret);
    } finally {
      await app.close();
    }
  }, 60_000);
});
