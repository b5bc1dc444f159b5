import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { evictEverywhere, type Eviction } from '../../auth/eviction-bus.ts';
import { validationFailed } from '../../core/errors.ts';
import type { AppDeps } from '../deps.ts';
import { errorResponses } from '../schemas/common.ts';

const evictBody = z.object({
  userId: z.string().min(1).max(128).optional(),
  keyHash: z.string().regex(/^[0-9a-f]{64}$/, 'must be the lowercase hex SHA-256 of the key').optional(),
});

export function internalRoutes(deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    app.withTypeProvider<ZodTypeProvider>().post(
      '/v1/internal/evict',
      {
        config: { auth: 'internal' },
        schema: {
          operationId: 'evictKeys',
          summary: 'Evict cached API keys',
          description: 'Drops one key (`keyHash`) or every key of a user (`userId`) from the key cache of every API process.',
          tags: ['keys'],
          security: [{ internalSecret: [] }],
          body: evictBody,
          response: { 200: z.object({ ok: z.literal(true) }), ...errorResponses(400, 401) },
        },
      },
      async (request) => {
        const { userId: accountId, keyHash } = request.body;
        if ((accountId === undefined) === (keyHash === undefined)) throw validationFailed('body: provide exactly one of userId or keyHash');
        const eviction: Eviction = keyHash !== undefined ? { keyHash } : { userId: accountId! };
        await evictEverywhere(deps.keyCache, deps.evictionBus, eviction);
        return { ok: true as const };
      },
    );
  };
}
