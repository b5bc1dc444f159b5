import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { analyze } from '../../analysis/service.ts';
import { connectionSignal } from '../connection.ts';
import type { AppDeps } from '../deps.ts';
import { toAppError } from '../plugins/errors.ts';
import { requestCpuMs } from '../plugins/http-metrics.ts';
import { principalOf } from '../plugins/auth.ts';
import { noteRequestOutcome } from '../plugins/request-log.ts';
import { analysisSchema, analyzeBodyV1, analyzeBodyV2, type Analysis } from '../../analysis/contract.ts';
import { errorResponses } from '../schemas/common.ts';
import { registerMultipartAnalyze } from './analyze-multipart.ts';

type Outcome = 'analyzed' | 'cache_hit' | 'sandbox';
const outcomeOf = (a: Analysis): Outcome => (a.meta.provider === 'sandbox' ? 'sandbox' : a.meta.cacheHit ? 'cache_hit' : 'analyzed');

export function analyzeRoutes(deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    // lenstack_analyses_total: every analyze request once, refusals before the handler included.
    const outcomes = new WeakMap<FastifyRequest, Outcome>();
    const codes = new WeakMap<FastifyRequest, string>();
    app.addHook('onError', async (request, _reply, err) => {
      codes.set(request, toAppError(err).code);
    });
    app.addHook('onResponse', async (request, reply) => {
      const outcome = outcomes.get(request);
      const ok = outcome !== undefined && reply.statusCode < 400;
      if (ok) deps.metrics.analyses.inc({ outcome, code: 'OK' });
      else deps.metrics.analyses.inc({ outcome: 'failed', code: codes.get(request) ?? String(reply.statusCode) });
      // Measured by the HTTP metrics plugin, whose onResponse (the app's) ran before this one.
      const cpuMs = requestCpuMs(request);
      if (cpuMs !== undefined) deps.metrics.analysisCpu.observe({ outcome: ok ? outcome : 'failed' }, cpuMs);
    });

    await registerMultipartAnalyze(app, deps);
    const route = app.withTypeProvider<ZodTypeProvider>();
    for (const version of ['v1', 'v2'] as const) {
      route.post(
        `/${version}/analyze`,
        {
          config: { auth: 'key' },
          bodyLimit: deps.config.MAX_BODY_BYTES,
          schema: {
            operationId: version === 'v1' ? 'analyzeV1' : 'analyzeV2',
            summary: version === 'v1' ? 'Analyze a photo (or up to 50)' : 'Analyze, with bespoke extraction',
            description:
              'Runs the requested lenses. Lenses already run on the same photo (same SHA-256, same account) are served from the registry and bill 0 credits unless `refresh` is true. `moderation` always runs and is free.\n\n' +
              'The body is JSON (below), or `multipart/form-data` for a few photos sent as files: each file part is one photo (up to 50), and one optional part named `request` holds the other JSON fields (`curl -F photo=@car.jpg -F \'request={"modules":["dating"]}\'`). For many or large photos, upload them first (`POST /v1/uploads`) and name them by `uploadId`.',
            tags: ['analyze'],
            security: [{ bearer: [] }],
            body: version === 'v1' ? analyzeBodyV1 : analyzeBodyV2,
            response: { 200: analysisSchema, ...errorResponses(...(version === 'v1' ? [400, 401, 402, 409, 413, 415, 422, 429, 502, 503] : [400, 401, 402, 404, 409, 413, 415, 422, 429, 502, 503])) },
          },
        },
        async (request, reply) => {
          const startedAt = performance.now();
          const result = await analyze(
            {
              config: deps.config,
              db: deps.db,
              blobs: deps.blobs,
              temporal: deps.temporal,
              fetchPolicy: deps.fetchPolicy,
              log: request.log,
              metrics: deps.metrics,
              ...(deps.drain ? { abandon: deps.drain.signal } : {}),
              ...(deps.uploads ? { uploads: deps.uploads } : {}),
              // A client that disconnects before its answer takes its image decodes out of the queue.
              signal: connectionSignal(reply),
            },
            principalOf(request),
            request.body,
            request.id,
            startedAt,
          );
          outcomes.set(request, outcomeOf(result));
          noteRequestOutcome(request, { credits: result.usage.creditsCharged ?? 0, analysisId: result.id });
          return result;
        },
      );
    }
  };
}
