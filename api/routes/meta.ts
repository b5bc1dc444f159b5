import type { FastifyPluginAsync } from 'fastify';
import type { AppDeps } from '../deps.ts';
import { buildDiscovery, buildLlmsTxt, DISCOVERY_PATH } from '../llms.ts';

export function metaRoutes(_deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    const llms = buildLlmsTxt();
    const discovery = buildDiscovery();
    app.get('/v1/openapi.json', { schema: { hide: true }, config: { auth: 'none' } }, async (_req, reply) =>
      reply.type('application/json; charset=utf-8').send(app.swagger()),
    );
    app.get('/v1/llms.txt', { schema: { summary: 'Plain-text description for AI agents', tags: ['meta'] }, config: { auth: 'none' } }, async (_req, reply) =>
      reply.type('text/plain; charset=utf-8').send(llms),
    );
    app.get(DISCOVERY_PATH, { schema: { summary: 'Discovery index', tags: ['meta'] }, config: { auth: 'none' } }, async () => discovery);
  };
}
