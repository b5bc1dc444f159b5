import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { buildCatalog, catalogResponseSchema } from '../../lenses/catalog.ts';
import { errorResponses } from '../schemas/common.ts';

export const modulesRoutes: FastifyPluginAsync = async (app) => {
  const catalog = buildCatalog();
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v1/modules',
    {
      config: { auth: 'key' },
      schema: {
        operationId: 'getCatalog',
        summary: 'Lens and stack catalog',
        tags: ['catalog'],
        security: [{ bearer: [] }],
        response: { 200: catalogResponseSchema, ...errorResponses(401, 429) },
      },
    },
    async () => catalog,
  );
};
