import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppDeps } from '../deps.ts';
import { buildDiscovery, buildLlmsTxt, discoverySchema, DISCOVERY_PATH } from '../llms.ts';
import { openApiDocuments } from '../openapi.ts';

export function metaRoutes(_deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    const llms = buildLlmsTxt();
    const discovery = buildDiscovery();
    const route = app.withTypeProvider<ZodTypeProvider>();
    app.get('/v1/openapi.json', { schema: { hide: true }, config: { auth: 'none' } }, async (_req, reply) =>
      reply.type('application/json; charset=utf-8').send(openApiDocuments(app).public),
    );
    // The server-to-server operations are described apart, for whoever holds the secret.
    app.get('/v1/internal/openapi.json', { schema: { hide: true }, config: { auth: 'internal' } }, async (_req, reply) =>
      reply.type('application/json; charset=utf-8').send(openApiDocuments(app).internal),
    );
    route.get(
      '/v1/llms.txt',
      {
        schema: {
          operationId: 'getLlmsTxt',
          summary: 'Plain-text description for AI agents',
          description: 'Endpoints, lenses and stacks, billing and an example call, as Markdown-flavoured plain text (llms.txt).',
          tags: ['meta'],
          response: { 200: { description: 'The description', content: { 'text/plain': { schema: z.string() } } } },
        },
        config: { auth: 'none' },
      },
      async (_req, reply) => reply.type('text/plain; charset=utf-8').send(llms),
    );
    route.get(
      DISCOVERY_PATH,
      {
        schema: { operationId: 'getDiscovery', summary: 'Discovery index', tags: ['meta'], response: { 200: discoverySchema } },
        config: { auth: 'none' },
      },
      async () => discovery,
    );
  };
}
