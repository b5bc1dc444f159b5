import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { webUrl } from '../core/config.ts';
import { requestIdFrom } from '../api/request-id.ts';
import type { WebContext, WebDeps } from './deps.ts';
import { registerConsoleErrors } from './plugins/errors.ts';
import { redactedRequest, registerHardeningHeaders } from './plugins/hardening.ts';
import { registerOriginCheck } from './plugins/origin-check.ts';
import { sessionResolver, workspaceMember } from './plugins/session.ts';
import { hasBuiltUi, registerBuiltUi } from './plugins/static.ts';
import { accountRoutes } from './routes/account.ts';
import { authRoutes } from './routes/auth.ts';
import { batchRoutes } from './routes/batches.ts';
import { creditRoutes, STRIPE_WEBHOOK } from './routes/credits.ts';
import { devMailboxRoutes } from './routes/dev-mailbox.ts';
import { erasureRoutes } from './routes/erasure.ts';
import { keyRoutes } from './routes/keys.ts';
import { memberRoutes } from './routes/members.ts';
import { photoRoutes } from './routes/photos.ts';
import { playgroundRoutes } from './routes/playground.ts';
import { requestRoutes } from './routes/requests.ts';
import { uploadRoutes } from './routes/uploads.ts';
import { usageRoutes } from './routes/usage.ts';
import { workspaceRoutes } from './routes/workspaces.ts';
import { registerBodyBudget } from '../api/plugins/body-budget.ts';

export type { WebDeps } from './deps.ts';

/**
 * The console's server, in the API's shape (docs/architecture.md "The console's server"):
 * better-auth under /api/v1/auth, the console's own JSON API under /api/v1 (session cookie, never
 * a Bearer key; every state change checked for a same-origin request), and the built front end for
 * every other GET. Concerns that hold for every request are plugins (web/plugins/*); each area's
 * routes are one plugin (web/routes/*), which routes to the folders below and holds no SQL.
 */
export async function buildWebApp(deps: WebDeps): Promise<FastifyInstance> {
  const origin = new URL(webUrl(deps.config)).origin;
  const app = Fastify({
    // Requests are logged by path: query strings carry sign-in tokens (web/plugins/hardening.ts).
    ...(deps.logger ? { loggerInstance: deps.logger.child({}, { serializers: { req: redactedRequest } }) as FastifyBaseLogger } : { logger: false }),
    bodyLimit: 64 * 1024,
    trustProxy: false,
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
  });
  const serveUi = hasBuiltUi(deps.staticDir);
  registerConsoleErrors(app, { serveUi });
  registerHardeningHeaders(app);
  registerOriginCheck(app, { origin, exemptRoute: STRIPE_WEBHOOK });
  // The Playground's and the photo lookup's bodies (a photo as base64, up to ~14 MB) are read whole:
  // the bytes of such bodies held at once are bounded as on the API; beyond it, 503 + Retry-After.
  registerBodyBudget(app, deps.config.BODY_BYTES_IN_FLIGHT);

  const signedIn = sessionResolver(deps.auth);
  const ctx: WebContext = { deps, origin, payments: deps.payments ?? null, signedIn, memberOf: workspaceMember(signedIn, deps.db) };
  await app.register(authRoutes(ctx));
  await app.register(accountRoutes(ctx));
  await app.register(workspaceRoutes(ctx));
  await app.register(memberRoutes(ctx));
  await app.register(keyRoutes(ctx));
  await app.register(creditRoutes(ctx));
  await app.register(requestRoutes(ctx));
  await app.register(usageRoutes(ctx));
  await app.register(playgroundRoutes(ctx));
  await app.register(erasureRoutes(ctx));
  await app.register(uploadRoutes(ctx));
  await app.register(batchRoutes(ctx));
  await app.register(photoRoutes(ctx));
  await app.register(devMailboxRoutes(ctx));

  if (serveUi) await registerBuiltUi(app, deps.staticDir!);
  return app;
}
