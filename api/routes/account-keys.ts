import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { issueAccountKey, listAccountKeys, revokeAccountKey } from '../../accounts/keys.ts';
import type { AppDeps } from '../deps.ts';
import { issueKeyBody, issuedKeySchema, keyListingSchema, keyParams, revokedKeySchema, userIdParams, internalDoc, internalRoute } from '../schemas/accounts.ts';
import { errorResponses } from '../schemas/common.ts';

/** An account's API keys: issue (shown once), list (prefix and last 4), revoke (evicted everywhere). */
export function accountKeyRoutes(deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();

    r.post(
      '/v1/internal/accounts/:userId/keys',
      {
        ...internalRoute,
        schema: {
          ...internalDoc,
          operationId: 'issueApiKey',
          summary: 'Issue an API key',
          description: '`live` or `test` (sandbox). The response carries the full key this once; only its SHA-256 is stored.',
          params: userIdParams,
          body: issueKeyBody,
          response: { 201: issuedKeySchema, ...errorResponses(400, 401, 404) },
        },
      },
      async (request, reply) =>
        reply.code(201).send(await issueAccountKey(deps.db, { accountId: request.params.userId, kind: request.body.kind, name: request.body.name ?? null })),
    );

    r.get(
      '/v1/internal/accounts/:userId/keys',
      {
        ...internalRoute,
        schema: {
          ...internalDoc,
          operationId: 'listApiKeys',
          summary: "List a user's API keys",
          description: 'Prefix and last 4 characters only, revoked keys included (with `revokedAt`).',
          params: userIdParams,
          response: { 200: z.object({ keys: z.array(keyListingSchema) }), ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => ({ keys: await listAccountKeys(deps.db, request.params.userId) }),
    );

    r.delete(
      '/v1/internal/accounts/:userId/keys/:keyId',
      {
        ...internalRoute,
        schema: {
          ...internalDoc,
          operationId: 'revokeApiKey',
          summary: 'Revoke an API key',
          description:
            'Revokes the key and broadcasts its eviction over Redis to every API process, which refuse it at once; were the broadcast lost, the 5-minute key cache lifetime still bounds it. Repeating it re-sends the eviction.',
          params: keyParams,
          response: { 200: revokedKeySchema, ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => revokeAccountKey(deps, { accountId: request.params.userId, keyId: request.params.keyId }),
    );
  };
}
