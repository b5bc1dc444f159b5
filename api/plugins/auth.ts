import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authenticate, internalSecretMatches, type Principal } from '../../auth/authenticate.ts';
import { AppError, authFailed } from '../../core/errors.ts';
import type { AppDeps } from '../deps.ts';
import { KeyUsage } from '../../auth/key-usage.ts';

/** How a route authenticates (route `config.auth`). */
export type AuthMode = 'none' | 'key' | 'internal' | 'key-or-internal';

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthMode;
  }
  interface FastifyRequest {
    principal: Principal | null;
    internal: boolean;
  }
}

export function registerAuth(app: FastifyInstance, deps: AppDeps): void {
  const usage = new KeyUsage(deps.db, (err) => app.log.warn({ err }, 'could not record when a key was last used'));
  app.decorateRequest('principal', null);
  app.decorateRequest('internal', false);
  // onRequest runs before the body is read, so an unauthenticated 60 MB upload is refused unread.
  app.addHook('onRequest', async (request) => {
    const mode = request.routeOptions.config?.auth ?? 'none';
    if (mode === 'none') return;
    const secretHeader = request.headers['x-internal-secret'];
    if (mode === 'internal' || (mode === 'key-or-internal' && secretHeader !== undefined)) {
      const provided = Array.isArray(secretHeader) ? secretHeader[0] : secretHeader;
      if (!internalSecretMatches(provided, deps.config.INTERNAL_SECRET)) throw authFailed('Missing or invalid internal secret');
      request.internal = true;
      return;
    }
    request.principal = await authenticate(request.headers.authorization, { db: deps.db, cache: deps.keyCache });
    if (!request.principal.anonymous) usage.seen(request.principal.keyId);
  });
}

/** The authenticated principal of a key-authenticated route. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new AppError('INTERNAL_ERROR', 'route used without key authentication');
  return request.principal;
}
