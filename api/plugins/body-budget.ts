import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../core/errors.ts';

/** Bodies up to this size are not counted: the default route limit (1 MiB) bounds them already. */
const SMALL_BODY = 1024 * 1024;

const held = new WeakMap<FastifyRequest, number>();

/**
 * A bound on the bytes of request bodies this process holds at once. An image upload's body (up to
 * MAX_BODY_BYTES) is read into memory, parsed and kept until its answer is sent; without a bound,
 * twenty 90 MB uploads at once exhaust the heap. Decided on Content-Length before a byte is read
 * (a body without one counts as its route's whole limit); beyond the budget the caller gets 503
 * SERVICE_UNAVAILABLE with Retry-After and nothing is read. Registered after authentication and
 * the rate limiter, so refused callers never hold any of the budget.
 */
export function registerBodyBudget(app: FastifyInstance, budgetBytes: number): { inFlight(): number } {
  let inFlight = 0;
  const release = (request: FastifyRequest) => {
    const bytes = held.get(request);
    if (bytes === undefined) return;
    held.delete(request);
    inFlight -= bytes;
  };

  app.addHook('onRequest', async (request) => {
    const limit = request.routeOptions.bodyLimit ?? SMALL_BODY;
    if (limit <= SMALL_BODY || request.method === 'GET' || request.method === 'HEAD') return;
    const declared = Number(request.headers['content-length']);
    const bytes = Number.isFinite(declared) && declared >= 0 ? Math.min(declared, limit) : limit;
    if (bytes <= SMALL_BODY) return;
    if (inFlight + bytes > budgetBytes) {
      throw new AppError(
        'SERVICE_UNAVAILABLE',
        'This server is reading as many large uploads as it holds at once; send the request again in a moment',
        { headers: { 'retry-after': '2' } },
      );
    }
    inFlight += bytes;
    held.set(request, bytes);
  });
  app.addHook('onResponse', async (request) => release(request));
  app.addHook('onRequestAbort', async (request) => release(request));
  return { inFlight: () => inFlight };
}
