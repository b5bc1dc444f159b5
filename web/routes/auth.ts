import { fromNodeHeaders } from 'better-auth/node';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { nameProblem } from '../../accounts/names.ts';
import { keepNewestMagicLink } from '../../accounts/console-people.ts';
import { validationFailed } from '../../core/errors.ts';
import { clientAddress, ipBucket, parseTrustedProxies } from '../../ratelimit/client-ip.ts';
import { workspacesOf } from '../../accounts/workspaces.ts';
import { CLIENT_IP_HEADER, handleAuthRequest } from '../auth.ts';
import type { WebContext } from '../deps.ts';
import { withoutTokens } from '../plugins/hardening.ts';
import { signInThrottle } from '../plugins/throttle.ts';
import { configuredProviders } from '../identity-providers.ts';

/**
 * Signing in: better-auth under /api/v1/auth (its answers passed on, with our throttle around
 * password attempts, names bounded, and no session token in any body), which sign-in buttons to
 * show, and who is signed in with their workspaces.
 */
export function authRoutes(ctx: WebContext): FastifyPluginAsync {
  const { deps, origin } = ctx;
  return async (app) => {
    const trusted = parseTrustedProxies(deps.config.TRUSTED_PROXIES);
    const clientIp = (request: FastifyRequest) => ipBucket(clientAddress(request.socket.remoteAddress, request.headers['x-forwarded-for'], trusted));
    const throttle = signInThrottle({
      limiter: deps.limiter,
      prefix: deps.config.REDIS_PREFIX,
      log: app.log,
      sendSignInLink: async (email) => void (await deps.auth.api.signInMagicLink({ body: { email, callbackURL: '/' }, headers: new Headers() })),
    });

    // better-auth answers its own routes with a Fetch Response.
    app.route({
      method: ['GET', 'POST'],
      url: '/api/v1/auth/*',
      async handler(request, reply) {
        const url = new URL(request.url, origin);
        const ip = clientIp(request);
        const body = request.body as { email?: unknown; name?: unknown } | undefined;
        if (request.method === 'POST') await throttle.before({ path: url.pathname, ip, email: body?.email });
        // Display names go into other people's mail and pages: bounded (accounts/names.ts).
        const badName = request.method === 'POST' && typeof body?.name === 'string' ? nameProblem(body.name, 'name') : null;
        if (badName) throw validationFailed(badName);
        const headers = fromNodeHeaders(request.headers);
        // better-auth reads the client's address (sessions, its own checks) from this header only.
        headers.set(CLIENT_IP_HEADER, ip);
        const init: RequestInit = { method: request.method, headers };
        if (request.method === 'POST' && request.body !== undefined) init.body = JSON.stringify(request.body);
        const { response, databaseAway } = await handleAuthRequest(deps.auth, new Request(url, init));
        // A route that lost the database: 503 with Retry-After (api/plugins/errors.ts), not better-auth's bare 500.
        if (databaseAway !== undefined) throw databaseAway;
        if (request.method === 'POST') await throttle.after({ path: url.pathname, ip, email: body?.email, status: response.status });
        reply.status(response.status);
        response.headers.forEach((value, key) => {
          if (key !== 'set-cookie') reply.header(key, value);
        });
        const cookies = response.headers.getSetCookie();
        if (cookies.length) reply.header('set-cookie', cookies);
        const text = await response.text();
        if (url.pathname === '/api/v1/auth/sign-in/magic-link' && response.ok && typeof body?.email === 'string') await keepNewestMagicLink(deps.db, body.email);
        // The session token travels in the httpOnly cookie only, never in a body a script can read.
        if (text.length && (response.headers.get('content-type') ?? '').includes('application/json')) {
          try {
            return reply.send(JSON.stringify(withoutTokens(JSON.parse(text))));
          } catch {
            // Not JSON after all: passed on as it came.
          }
        }
        return reply.send(text.length ? text : null);
      },
    });

    // Which sign-in buttons to show: a provider without credentials is hidden, not broken.
    const providers = configuredProviders(deps.config).map((id) => ({ id, name: id === 'github' ? 'GitHub' : 'Google' }));
    app.get('/api/v1/auth-methods', async () => ({ password: true, magicLink: true, providers }));

    app.get('/api/v1/session', async (request) => {
      const person = await ctx.signedIn(request);
      return { user: { id: person.id, email: person.email, name: person.name }, workspaces: await workspacesOf(deps.db, person.id) };
    });
  };
}
