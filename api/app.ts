import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { loggerOptions } from '../core/logger.ts';
import type { AppDeps } from './deps.ts';
import { Drain } from './drain.ts';
import { openApiDocuments, swaggerOptions } from './openapi.ts';
import { registerAuth } from './plugins/auth.ts';
import { registerDrain } from './plugins/drain.ts';
import { registerHttpMetrics } from './plugins/http-metrics.ts';
import { clientErrorHandler, frameworkErrorHandler, registerErrorHandling } from './plugins/errors.ts';
import { registerAuthFailureGuard, registerRateLimit } from './plugins/rate-limit.ts';
import { registerBodyBudget } from './plugins/body-budget.ts';
import { registerTextGuard } from './plugins/text-guard.ts';
import { registerRequestLog, requestLogFor } from './plugins/request-log.ts';
import { requestIdFrom } from './request-id.ts';
import { accountRoutes } from './routes/accounts.ts';
import { analyzeRoutes } from './routes/analyze.ts';
import { enrichRoutes } from './routes/enrich.ts';
import { healthRoutes } from './routes/health.ts';
import { internalRoutes } from './routes/internal.ts';
import { batchRoutes } from './routes/batches.ts';
import { lookupRoutes } from './routes/lookup.ts';
import { photoRoutes } from './routes/photos.ts';
import { metaRoutes } from './routes/meta.ts';
import { metricsRoutes } from './routes/metrics.ts';
import { modulesRoutes } from './routes/modules.ts';
import { usageRoutes } from './routes/usage.ts';
import { sharedMetadataTool } from '../enrich/exiftool.ts';
import { enrichLimiter } from '../enrich/service.ts';
import { configuredPaymentGateway } from '../payments/configured.ts';
import { createUploads } from '../uploads/service.ts';
import { signalUploadWaiters } from '../batches/upload-waits.ts';
import { uploadRoutes } from './routes/uploads.ts';
import { configureHeicDecoder, heicDecoderNotice } from '../images/heic-native.ts';

/** Build the HTTP app from its dependencies (listening and shutdown live in server.ts). */
export async function buildApp(input: AppDeps): Promise<FastifyInstance> {
  const metrics = input.metrics;
  const drain = input.drain ?? new Drain();
  const deps: AppDeps = {
    ...input,
    drain,
    // The process-wide exiftool starts its processes on the first enrichment, not here.
    metadata: input.metadata ?? sharedMetadataTool(),
    enrichLimiter: input.enrichLimiter ?? enrichLimiter(),
    payments: input.payments !== undefined ? input.payments : configuredPaymentGateway(input.config, input.db),
    // A finished upload wakes the vehicle batches waiting for it (awaitUploads).
    uploads: input.uploads ?? createUploads({ db: input.db, blobs: input.blobs, config: input.config, onSettled: signalUploadWaiters(input) }),
  };
  const requestLog = input.requestLog ?? requestLogFor(input.db, metrics, (err, rows) => app.log.warn({ err, rows }, 'request log rows dropped: the database did not take them'));
  const app = Fastify({
    // Keys and secrets never reach the logs (core/logger.ts redacts); a given pino logger is used as is.
    ...(typeof deps.logger === 'object'
      ? { loggerInstance: deps.logger as FastifyBaseLogger }
      : { logger: deps.logger === true ? loggerOptions(deps.config, 'api') : false }),
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
    // Log lines name the request id `requestId`, as every response and error envelope does.
    logController: new LogController({ requestIdLogLabel: 'requestId' }),
    // Per-route limits raise this for image uploads; everything else stays small.
    bodyLimit: 1024 * 1024,
    trustProxy: false,
    // Refusals made before any route runs (router, HTTP parser) answer in our envelope too.
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
    // While closing, registerDrain answers 503 in our envelope instead of fastify's own body.
    return503OnClosing: false,
  });
  // Tests flush the request log instead of waiting for its timer.
  app.decorate('requestLog', requestLog);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  registerErrorHandling(app);
  registerTextGuard(app);
  registerHttpMetrics(app, metrics);
  registerRequestLog(app, requestLog);
  registerDrain(app, drain);
  registerAuthFailureGuard(app, deps);
  registerAuth(app, deps);
  registerRateLimit(app, deps);
  registerBodyBudget(app, deps.config.BODY_BYTES_IN_FLIGHT);

  await app.register(fastifySwagger, swaggerOptions());
  await app.register(fastifySwaggerUi, {
    routePrefix: '/v1/docs',
    uiConfig: { deepLinking: true, tryItOutEnabled: true },
    staticCSP: true,
    // The page shows the public document, as GET /v1/openapi.json serves it.
    // "Try it out" calls the deployment serving the page: its own origin, not the document's template.
    transformSpecification: () => ({ ...openApiDocuments(app).public, servers: [{ url: '/', description: 'This deployment' }] }),
    transformSpecificationClone: false,
  });

  await app.register(healthRoutes);
  await app.register(metaRoutes(deps));
  await app.register(metricsRoutes(deps, metrics));
  await app.register(modulesRoutes);
  await app.register(usageRoutes(deps));
  await app.register(internalRoutes(deps));
  await app.register(accountRoutes(deps));
  await app.register(analyzeRoutes(deps));
  await app.register(enrichRoutes(deps));
  await app.register(lookupRoutes(deps));
  await app.register(photoRoutes(deps));
  await app.register(batchRoutes(deps));
  await app.register(uploadRoutes(deps));
  // Once per process: which decoder this server's HEICs go to (HEIC_DECODER).
  const heic = heicDecoderNotice(await configureHeicDecoder(deps.config));
  app.log[heic.level](heic.message);
  return app;
}
