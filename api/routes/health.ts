import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';

export const healthSchema = z.object({
  status: z.literal('ok'),
  service: z.string(),
  version: z.string(),
  timestamp: z.string().describe('ISO 8601'),
}).meta({ id: 'Health' });

export const healthRoutes: FastifyPluginAsync = async (app) => {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v1/health',
    { schema: { operationId: 'getHealth', summary: 'Health', tags: ['meta'], response: { 200: healthSchema } }, config: { auth: 'none' } },
    async () => ({ status: 'ok' as const, service: 'lenstack', version: 'v1', timestamp: new Date().toISOString() }),
  );
};
