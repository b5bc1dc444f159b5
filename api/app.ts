import Fastify, { type FastifyInstance } from 'fastify';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import {
  jsonSchemaTransform,
  jsonSchemaTransformObject,
  serializerCompiler,
  validatorCompiler,
} from 'fastify-type-provider-zod';
import type { AppDeps } from './deps.ts';
import { registerAuth } from './plugins/auth.ts';
import { registerErrorHandling } from './plugins/errors.ts';
import { registerAuthFailureGuard, registerRateLimit } from './plugins/rate-limit.ts';
import { requestIdFrom } from './request-id.ts';
import { accountRoutes } from './routes/accounts.ts';
import { analyzeRoutes } from './routes/analyze.ts';
import { enrichRoutes } from './routes/enrich.ts';
import { healthRoutes } from './routes/health.ts';
import { internalRoutes } from './routes/internal.ts';
import { lookupRoutes } from './routes/lookup.ts';
import { metaRoutes } from './routes/meta.ts';
import { modulesRoutes } from './routes/modules.ts';
import { usageRoutes } from './routes/usage.ts';

export const OPENAPI_VERSION = '1.1.0';

/** Build the HTTP app from its dependencies (listening and shutdown live in server.ts). */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger:
      deps.logger === undefined || deps.logger === false
        ? false
        : deps.logger === true
          ? {
              level: deps.config.LOG_LEVEL,
              // Keys and secrets never reach the logs.
              redact: ['req.headers.authorization', 'req.headers["x-internal-secret"]', 'req.headers.cookie'],
            }
          : { level: deps.config.LOG_LEVEL, redact: ['req.headers.authorization', 'req.headers["x-internal-secret"]'] },
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
    // Per-route limits raise this for image uploads; everything else stays small.
    bodyLimit: 1024 * 1024,
    trustProxy: false,
    return503OnClosing: true,
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  registerErrorHandling(app);
  registerAuthFailureGuard(app, deps);
  registerAuth(app, deps);
  registerRateLimit(app, deps);

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Lenstack API',
        version: OPENAPI_VERSION,
        description:
          'Photo analysis with AI vision: lenses and stacks, a per-user photo registry with delta billing, free lookup, metadata enrichment and prepaid credits.',
      },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'API key: svc_live_… or svc_test_…' },
          internalSecret: { type: 'apiKey', in: 'header', name: 'x-internal-secret' },
        },
      },
    },
    transform: jsonSchemaTransform,
    transformObject: jsonSchemaTransformObject,
  });
  await app.register(fastifySwaggerUi, {
    routePrefix: '/v1/docs',
    uiConfig: { deepLinking: true, tryItOutEnabled: true },
    staticCSP: true,
  });

  await app.register(healthRoutes);
  await app.register(metaRoutes(deps));
  await app.register(modulesRoutes);
  await app.register(usageRoutes(deps));
  await app.register(internalRoutes(deps));
  await app.register(accountRoutes(deps));
  await app.register(analyzeRoutes(deps));
  await app.register(enrichRoutes(deps));
  await app.register(lookupRoutes(deps));
  return app;
}
