import type { FastifyInstance } from 'fastify';
import { AppError } from '../../core/errors.ts';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * CSRF: a state-changing call must come from the console's own pages. Browsers send Origin on
 * every cross-site (and same-origin) POST/PATCH/DELETE; a request without one must say it is
 * same-origin through Fetch Metadata. Cookies are SameSite=Lax besides. Every unsafe method is
 * checked whatever its path: the raw URL is not what the router matches (`/%61pi/…` is routed
 * as `/api/…`), so the one exemption (`exemptRoute`, Stripe's signed webhook) is named by the
 * route that matched, not by the URL's text.
 */
export function registerOriginCheck(app: FastifyInstance, opts: { origin: string; exemptRoute: string }): void {
  const { origin, exemptRoute } = opts;
  app.addHook('onRequest', async (request) => {
    if (SAFE_METHODS.has(request.method) || request.routeOptions.url === exemptRoute) return;
    const from = request.headers.origin;
    const site = request.headers['sec-fetch-site'];
    const ok = from !== undefined ? from === origin : site === 'same-origin';
    if (!ok) throw new AppError('FORBIDDEN', `Cross-site request refused: state changes are accepted only from ${origin}`);
  });
}
