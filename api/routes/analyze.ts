import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { analyze } from '../../analysis/service.ts';
import type { AppDeps } from '../deps.ts';
import { principalOf } from '../plugins/auth.ts';
import { analysisSchema, analyzeBodyV1, analyzeBodyV2 } from '../schemas/analyze.ts';
import { errorResponses } from '../schemas/common.ts';

export function analyzeRoutes(deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    const route = app.withTypeProvider<ZodTypeProvider>();
    for (const version of ['v1', 'v2'] as const) {
      route.post(
        `/${version}/analyze`,
        {
          config: { auth: 'key' },
          bodyLimit: deps.config.MAX_BODY_BYTES,
          schema: {
            summary: version === 'v1' ? 'Analyze a photo (or up to 50)' : 'Analyze, with bespoke extraction',
            description:
              'Runs the requested lenses. Lenses already run on the same photo (same SHA-256, same account) are served from the registry and bill 0 credits unless `refresh` is true. `moderation` always runs and is free.',
            tags: ['analyze'],
            security: [{ bearer: [] }],
            body: version === 'v1' ? analyzeBodyV1 : analyzeBodyV2,
            response: { 200: analysisSchema, ...errorResponses(...(version === 'v1' ? [400, 401, 402, 413, 415, 422, 429, 502] : [400, 401, 402, 404, 413, 415, 422, 429, 502])) },
          },
        },
        async (request) => {
          const startedAt = performance.now();
          return analyze(
            { config: deps.config, db: deps.db, blobs: deps.blobs, ...(deps.temporal ? { temporal: deps.temporal } : {}), vendors: deps.vendors, simulated: deps.simulated, ...(deps.fetchOptions ? { fetchOptions: deps.fetchOptions } : {}) },
            principalOf(request),
            request.body,
            request.id,
            startedAt,
          );
        },
      );
    }
  };
}
