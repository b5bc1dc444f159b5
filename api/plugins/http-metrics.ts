import type { FastifyInstance, FastifyRequest } from 'fastify';
import { processCpuShares } from '../../core/cpu-shares.ts';
import type { ApiMetrics } from '../../metrics/api.ts';

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Each finished request's share of the process's CPU (core/cpu-shares.ts), for the routes that report it. */
const cpuMs = new WeakMap<FastifyRequest, number>();

/** The request's CPU milliseconds, from its arrival to its answer; undefined before it ended. */
export const requestCpuMs = (request: FastifyRequest): number | undefined => cpuMs.get(request);

/**
 * Request count, latency and in-flight gauge for every request, registered before everything
 * else so refusals by auth, limits and validation are counted too. The route label is the
 * pattern (`/v2/lookup/:sha256`), never the URL; unknown paths share `unmatched`.
 */
export function registerHttpMetrics(app: FastifyInstance, metrics: ApiMetrics): void {
  const started = new WeakMap<FastifyRequest, number>();
  // Whichever comes first, the response or the socket's close, ends the request's CPU unit.
  const endCpuUnit = (request: FastifyRequest) => {
    if (!cpuMs.has(request)) cpuMs.set(request, processCpuShares.stop(request));
  };
  const record = (request: FastifyRequest, status: string) => {
    const t0 = started.get(request);
    if (t0 === undefined) return;
    started.delete(request); // once per request, whichever of response and abort comes first
    endCpuUnit(request);
    const method = METHODS.has(request.method) ? request.method : 'OTHER';
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.httpRequests.inc({ method, route, status });
    metrics.httpDuration.observe({ method, route }, (performance.now() - t0) / 1000);
  };
  app.addHook('onRequest', async (request, reply) => {
    started.set(request, performance.now());
    // Every request is a unit, so an analysis shares the CPU with whatever else is in flight.
    processCpuShares.start(request);
    metrics.httpInFlight.inc({});
    // 'close' fires once whether the response finished or the client went away.
    reply.raw.once('close', () => {
      metrics.httpInFlight.dec({});
      endCpuUnit(request);
    });
  });
  app.addHook('onResponse', async (request, reply) => record(request, String(reply.statusCode)));
  // A client that hangs up before its answer (say, timing out on a slow analysis) is counted as such.
  app.addHook('onRequestAbort', async (request) => record(request, 'aborted'));
}
