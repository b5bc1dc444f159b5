import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { bearerToken, internalSecretMatches } from '../../auth/authenticate.ts';
import { authFailed } from '../../core/errors.ts';
import type { ApiMetrics } from '../../metrics/api.ts';
import type { AppDeps } from '../deps.ts';

/**
 * The internal secret as `x-internal-secret`, or as `Authorization: Bearer <secret>`: the one
 * credential every Prometheus version can send (`authorization.credentials_file`).
 */
function providedSecret(request: FastifyRequest): string | undefined {
  const header = request.headers['x-internal-secret'];
  if (header !== undefined) return Array.isArray(header) ? header[0] : header;
  return bearerToken(request.headers.authorization);
}

/** GET /metrics in the Prometheus text format (API_METRICS: internal | public | off). */
export function metricsRoutes(deps: AppDeps, metrics: ApiMetrics): FastifyPluginAsync {
  return async (app) => {
    const mode = deps.config.API_METRICS;
    if (mode === 'off') return;
    app.get('/metrics', { schema: { hide: true }, config: { auth: 'none' } }, async (request, reply) => {
      if (mode === 'internal' && !internalSecretMatches(providedSecret(request), deps.config.INTERNAL_SECRET)) {
        throw authFailed('Missing or invalid internal secret');
      }
      const body = await metrics.registry.metrics();
      return reply.header('cache-control', 'no-store').type(metrics.registry.contentType).send(body);
    });
  };
}
