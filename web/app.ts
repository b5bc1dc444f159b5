import { existsSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { ExportSlots, prepareBatchExport, sendBatchExport } from '../batches/export.ts';
import { recentBatches } from '../batches/repository.ts';
import type { AnalyzeDeps } from '../analysis/service.ts';
import type { Client } from '@temporalio/client';
import type { Uploads } from '../uploads/service.ts';
import { registerConsoleBatches } from './batch-routes.ts';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import { fromNodeHeaders } from 'better-auth/node';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { z } from 'zod';
import { issueAccountKey, listAccountKeys, revokeAccountKey } from '../accounts/keys.ts';
import type { KeyCache } from '../auth/cache.ts';
import type { EvictionBus } from '../auth/eviction-bus.ts';
import { webUrl, type Config } from '../core/config.ts';
import { AppError, validationFailed } from '../core/errors.ts';
import { chargedPerDay, ledgerHistory } from '../credits/history.ts';
import { getBalance } from '../credits/ledger.ts';
import type { Db } from '../db/pool.ts';
import { registerErrorHandling, sendError } from '../api/plugins/errors.ts';
import { newRequestId } from '../api/request-id.ts';
import { CLIENT_IP_HEADER, handleAuthRequest, type ConsoleAuth } from './auth.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import { signInThrottle } from './throttle.ts';
import { registerAccountSecurity } from './account-security.ts';
import { configuredProviders } from './identity-providers.ts';
import type { RateLimiter } from '../ratelimit/limiter.ts';
import { clientAddress, ipBucket, parseTrustedProxies } from '../ratelimit/client-ip.ts';
import type { MailCatcher } from './mail.ts';
import { keysByCreator, recordKeyCreator } from './members.ts';
import { CONTENT_SECURITY_POLICY, keepNewestMagicLink, redactedRequest, withoutTokens } from './hardening.ts';
import { mailSafe, nameProblem } from '../accounts/names.ts';
import { registerMemberRoutes } from './member-routes.ts';
import { registerErasureRoutes } from './erasure-routes.ts';
import { registerUsageRoutes } from './usage-routes.ts';
import { registerPlaygroundRoutes } from './playground-routes.ts';
import { registerPhotoRoutes } from './photo-routes.ts';
import { acceptInvitation, createTeamWorkspace, inviteMember, listInvitations, listMembers, requireMember, workspacesOf } from '../accounts/workspaces.ts';
import type { Mailer } from './mail.ts';
import { firstPackBonusAvailable } from '../credits/packs.ts';
import { PACK_NAMES, PACKS, packGrant } from '../credits/price-book.ts';
import type { PaymentGateway } from '../payments/gateway.ts';
import { purchasePack } from '../payments/purchase.ts';
import { registerPaymentWebhook } from '../payments/webhook.ts';
import { cardOnFileStatus } from '../accounts/card-on-file.ts';

export interface WebDeps {
  config: Config;
  db: Db;
  auth: ConsoleAuth;
  /** Invitations are mailed from the console's routes. */
  mailer: Mailer;
  keyCache: KeyCache;
  /** Revocations reach every API process through it (absent in tests that need no fan-out). */
  evictionBus?: EvictionBus;
  /** The development mailbox: set only when `npm start` runs the local mail catcher. */
  devMailbox?: MailCatcher;
  /** The built front end (web/ui/dist); its absence leaves only the API. */
  staticDir?: string;
  logger?: Logger | false;
  /** Sign-in throttling in Redis (web/throttle.ts); absent = not throttled (tests of other things). */
  limiter?: RateLimiter;
  /**
   * The payments interface (payments/configured.ts, the API's too): Stripe Checkout when configured
   * (its webhooks grant), else the development (recording) gateway, else none.
   */
  payments?: PaymentGateway | null;
  /** Batches submitted from the console: uploads through the API's upload service, then the same submission as the API's. */
  batches?: { pipeline: AnalyzeDeps & { temporal: Client; uploads: Uploads } };
}

/** Stripe's events arrive here, authenticated by their signature (not by cookie or origin). */
const STRIPE_WEBHOOK = '/api/v1/stripe/webhook';

interface Person {
  id: string;
  email: string;
  name: string;
  emailVerified: boolean;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const workspaceParams = z.object({ workspaceId: z.string().min(1).max(100) });

/**
 * The console's server: better-auth under /api/v1/auth, the console's own JSON API under
 * /api/v1 (session cookie, never a Bearer key; every state change checked for a same-origin
 * request), and the built front end for every other GET.
 */
export async function buildWebApp(deps: WebDeps): Promise<FastifyInstance> {
  const origin = new URL(webUrl(deps.config)).origin;
  const payments = deps.payments ?? null;
  const app = Fastify({
    // Requests are logged by path: query strings carry sign-in tokens (web/hardening.ts).
    ...(deps.logger ? { loggerInstance: deps.logger.child({}, { serializers: { req: redactedRequest } }) as FastifyBaseLogger } : { logger: false }),
    bodyLimit: 64 * 1024,
    trustProxy: false,
    genReqId: () => newRequestId(),
  });
  const serveUi = deps.staticDir !== undefined && existsSync(path.join(deps.staticDir, 'index.html'));
  registerErrorHandling(app, {
    // Every page of the single-page app is index.html; unknown /api paths stay 404 in the envelope.
    notFound: (request, reply) => {
      if (serveUi && request.method === 'GET' && !request.url.startsWith('/api/')) {
        return reply.header('cache-control', 'no-cache').type('text/html; charset=utf-8').sendFile('index.html');
      }
      return sendError(reply, request, new AppError('NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0]}`));
    },
  });
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'same-origin');
    reply.header('x-frame-options', 'DENY');
    reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
  });

  // CSRF: a state-changing call must come from the console's own pages. Browsers send Origin on
  // every cross-site (and same-origin) POST/PATCH/DELETE; a request without one must say it is
  // same-origin through Fetch Metadata. Cookies are SameSite=Lax besides. Every unsafe method is
  // checked whatever its path: the raw URL is not what the router matches (`/%61pi/…` is routed
  // as `/api/…`), so the one exemption is named by the route that matched, not by the URL's text.
  app.addHook('onRequest', async (request) => {
    if (SAFE_METHODS.has(request.method) || request.routeOptions.url === STRIPE_WEBHOOK) return;
    const from = request.headers.origin;
    const site = request.headers['sec-fetch-site'];
    const ok = from !== undefined ? from === origin : site === 'same-origin';
    if (!ok) throw new AppError('FORBIDDEN', `Cross-site request refused: state changes are accepted only from ${origin}`);
  });

  const trusted = parseTrustedProxies(deps.config.TRUSTED_PROXIES);
  const clientIp = (request: FastifyRequest) => ipBucket(clientAddress(request.socket.remoteAddress, request.headers['x-forwarded-for'], trusted));
  const throttle = deps.limiter
    ? signInThrottle({
        limiter: deps.limiter,
        prefix: deps.config.REDIS_PREFIX,
        log: app.log,
        sendSignInLink: async (email) => void (await deps.auth.api.signInMagicLink({ body: { email, callbackURL: '/' }, headers: new Headers() })),
      })
    : null;

  // better-auth answers its own routes with a Fetch Response.
  app.route({
    method: ['GET', 'POST'],
    url: '/api/v1/auth/*',
    async handler(request, reply) {
      const url = new URL(request.url, origin);
      const ip = clientIp(request);
      const body = request.body as { email?: unknown; name?: unknown } | undefined;
      if (request.method === 'POST') await throttle?.before({ path: url.pathname, ip, email: body?.email });
      // Display names go into other people's mail and pages: bounded (accounts/names.ts).
      const badName = request.method === 'POST' && typeof body?.name === 'string' ? nameProblem(body.name, 'name') : null;
      if (badName) throw validationFailed(badName);
      const headers = fromNodeHeaders(request.headers);
      // better-auth reads the client's address (sessions, its own checks) from this header only.
      headers.set(CLIENT_IP_HEADER, ip);
      const init: RequestInit = { method: request.method, headers };
      if (request.method === 'POST' && request.body !== undefined) init.body = JSON.stringify(request.body);
      const { response, error } = await handleAuthRequest(deps.auth, new Request(url, init));
      // A route that lost the database: 503 with Retry-After (api/plugins/errors.ts), not better-auth's bare 500.
      if (response.status >= 500 && isDatabaseUnavailable(error)) throw error;
      if (request.method === 'POST') await throttle?.after({ path: url.pathname, ip, email: body?.email, status: response.status });
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

  const signedIn = async (request: FastifyRequest): Promise<Person> => {
    const session = await deps.auth.api.getSession({ headers: fromNodeHeaders(request.headers) });
    if (!session) throw new AppError('AUTH_FAILED', 'Sign in to use the console');
    return { id: session.user.id, email: session.user.email, name: session.user.name, emailVerified: session.user.emailVerified };
  };

  // The person's sign-in methods and sessions, each removable (web/account-security.ts).
  registerAccountSecurity(app, { db: deps.db, auth: deps.auth });

  // Which sign-in buttons to show: a provider without credentials is hidden, not broken.
  const providers = configuredProviders(deps.config).map((id) => ({ id, name: id === 'github' ? 'GitHub' : 'Google' }));
  app.get('/api/v1/auth-methods', async () => ({ password: true, magicLink: true, providers }));

  app.get('/api/v1/session', async (request) => {
    const person = await signedIn(request);
    return { user: { id: person.id, email: person.email, name: person.name }, workspaces: await workspacesOf(deps.db, person.id) };
  });

  const newWorkspaceBody = z.object({ name: z.string().trim().min(1).max(80) });
  app.post('/api/v1/workspaces', async (request, reply) => {
    const person = await signedIn(request);
    if (!person.emailVerified) throw new AppError('FORBIDDEN', 'Confirm your e-mail address before creating workspaces');
    const body = parseBody(newWorkspaceBody, request.body);
    return reply.code(201).send(await createTeamWorkspace(deps.db, person, body.name));
  });

  app.get('/api/v1/workspaces/:workspaceId/members', async (request) => {
    const person = await signedIn(request);
    const { workspaceId } = workspaceParams.parse(request.params);
    const role = await requireMember(deps.db, person.id, workspaceId);
    // With each person, how many active keys they made: what removing them would keep or revoke.
    const keys = await keysByCreator(deps.db, workspaceId);
    const members = (await listMembers(deps.db, workspaceId)).map((m) => ({ ...m, activeKeysCreated: keys.get(m.personId) ?? 0 }));
    return { members, invitations: role === 'member' ? [] : await listInvitations(deps.db, workspaceId) };
  });
  registerMemberRoutes(app, { db: deps.db, keyCache: deps.keyCache, ...(deps.evictionBus ? { evictionBus: deps.evictionBus } : {}) }, signedIn);
  // The Requests and Usage & billing sections (web/usage-routes.ts).
  registerUsageRoutes(app, deps.db, signedIn);
  // The Playground: a cost preview by photo hash, and a run through the analyze use case (web/playground-routes.ts).
  registerPlaygroundRoutes(app, { db: deps.db, ...(deps.batches ? { pipeline: deps.batches.pipeline } : {}) }, signedIn);
  // Erasure and retention (docs/privacy.md): the blob store and Temporal come with the console's batch pipeline.
  registerErasureRoutes(
    app,
    deps.batches
      ? {
          db: deps.db,
          keyCache: deps.keyCache,
          ...(deps.evictionBus ? { evictionBus: deps.evictionBus } : {}),
          blobs: deps.batches.pipeline.blobs,
          temporal: deps.batches.pipeline.temporal,
        }
      : null,
    signedIn,
  );

  const inviteBody = z.object({ email: z.string().trim().min(3).max(320), role: z.enum(['admin', 'member']).default('member') });
  app.post('/api/v1/workspaces/:workspaceId/invitations', async (request, reply) => {
    const person = await signedIn(request);
    const { workspaceId } = workspaceParams.parse(request.params);
    const role = await requireMember(deps.db, person.id, workspaceId, ['owner', 'admin']);
    const body = parseBody(inviteBody, request.body);
    const { token, invitation, workspaceName } = await inviteMember(deps.db, { workspaceId, inviter: { id: person.id, role }, email: body.email, role: body.role });
    // People's names go in neutralised (no line breaks, links or addresses of their making); the
    // inviter is named by their confirmed address as well.
    const inviter = mailSafe(person.name);
    try {
      await deps.mailer.send({
        to: invitation.email,
        subject: `You are invited to ${mailSafe(workspaceName)} on Lenstack`,
        text: `Hello,\n\n${inviter ? `${inviter} <${person.email}>` : person.email} invited you to the Lenstack workspace "${mailSafe(workspaceName)}" as ${invitation.role}.\nAccept within 7 days (sign in, or create an account, with this address):\n\n${origin}/invitations/accept?token=${token}\n\nIf you did not expect this, ignore this mail.\n`,
      });
    } catch (err) {
      // An invitation nobody was told about is not left behind.
      await deps.db.query('DELETE FROM workspace_invitations WHERE id = $1', [invitation.id]);
      request.log.warn({ err }, 'invitation mail not sent');
      throw new AppError('SERVICE_UNAVAILABLE', 'The invitation mail could not be sent; no invitation was kept. Try again in a moment.');
    }
    return reply.code(201).send({ invitation });
  });

  const acceptBody = z.object({ token: z.string().min(1).max(200) });
  app.post('/api/v1/invitations/accept', async (request) => {
    const person = await signedIn(request);
    const { token } = parseBody(acceptBody, request.body);
    return { workspace: await acceptInvitation(deps.db, { token, person }) };
  });

  app.get('/api/v1/workspaces/:workspaceId/keys', async (request) => {
    const person = await signedIn(request);
    const { workspaceId } = workspaceParams.parse(request.params);
    await requireMember(deps.db, person.id, workspaceId);
    return { keys: await listAccountKeys(deps.db, workspaceId) };
  });

  const newKeyBody = z.object({ kind: z.enum(['live', 'test']), name: z.string().trim().min(1).max(100).optional() });
  function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
    const parsed = schema.safeParse(body ?? {});
    if (!parsed.success) throw validationFailed(`body: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
    return parsed.data;
  }
  app.post('/api/v1/workspaces/:workspaceId/keys', async (request, reply) => {
    const person = await signedIn(request);
    const { workspaceId } = workspaceParams.parse(request.params);
    await requireMember(deps.db, person.id, workspaceId, ['owner', 'admin']);
    const data = parseBody(newKeyBody, request.body);
    const issued = await issueAccountKey(deps.db, { userId: workspaceId, kind: data.kind, name: data.name ?? null });
    await recordKeyCreator(deps.db, issued.id, person.id);
    return reply.code(201).header('cache-control', 'no-store').send(issued);
  });

  app.delete('/api/v1/workspaces/:workspaceId/keys/:keyId', async (request) => {
    const person = await signedIn(request);
    const { workspaceId, keyId } = workspaceParams.extend({ keyId: z.string().min(1).max(100) }).parse(request.params);
    await requireMember(deps.db, person.id, workspaceId, ['owner', 'admin']);
    const revoked = await revokeAccountKey(
      { db: deps.db, keyCache: deps.keyCache, ...(deps.evictionBus ? { evictionBus: deps.evictionBus } : {}) },
      { userId: workspaceId, keyId },
    ).catch((err: unknown) => {
      throw err instanceof AppError && err.code === 'NOT_FOUND' ? new AppError('NOT_FOUND', 'No such key in this workspace') : err;
    });
    return revoked;
  });

  app.get('/api/v1/workspaces/:workspaceId/credits', async (request) => {
    const person = await signedIn(request);
    const { workspaceId } = workspaceParams.parse(request.params);
    await requireMember(deps.db, person.id, workspaceId);
    const [balance, ledger, usage, card] = await Promise.all([
      getBalance(deps.db, workspaceId),
      ledgerHistory(deps.db, workspaceId),
      chargedPerDay(deps.db, workspaceId),
      cardOnFileStatus(deps.db, workspaceId),
    ]);
    return {
      balance: { community: balance.community, purchased: balance.purchased, reserved: balance.reserved },
      ledger,
      usage,
      // Adding a card is offered where it can still earn the signup credits and Stripe is configured.
      // Offered until the credits are earned: a card that earned nothing (used elsewhere) can be replaced.
      card: { onFileSince: card.at, offer: card.creditsAvailable && Boolean(payments?.startCardSetup) },
    };
  });

  // Card on file: a hosted Checkout page in setup mode (a SetupIntent); nothing is charged, now or
  // later. The 4,000 credits come with Stripe's signed setup_intent.succeeded event, not with the
  // return to this page.
  app.post('/api/v1/workspaces/:workspaceId/card', async (request, reply) => {
    const person = await signedIn(request);
    const { workspaceId } = workspaceParams.parse(request.params);
    await requireMember(deps.db, person.id, workspaceId, ['owner']);
    if (!payments?.startCardSetup) throw new AppError('SERVICE_UNAVAILABLE', 'Cards cannot be added on this server: it has no payment processor configured (STRIPE_SECRET_KEY)');
    const status = await cardOnFileStatus(deps.db, workspaceId);
    if (!status.creditsAvailable) {
      if (status.at !== null) return reply.code(200).send({ card: { onFileSince: status.at } });
      throw new AppError('FORBIDDEN', 'The card-on-file credits belong to a person’s own workspace; team workspaces buy packs');
    }
    const checkout = await payments.startCardSetup({ workspaceId, email: person.email, successUrl: `${origin}/?card=added`, cancelUrl: `${origin}/?card=cancelled` });
    return reply.code(201).send({ checkoutUrl: checkout.url });
  });

  // Packs and purchases, through the one purchase path (payments/purchase.ts) the API uses too.
  const purchaseMode = !payments ? 'unavailable' : payments.name === 'stripe' ? 'stripe' : 'development';
  app.get('/api/v1/workspaces/:workspaceId/packs', async (request) => {
    const person = await signedIn(request);
    const { workspaceId } = workspaceParams.parse(request.params);
    await requireMember(deps.db, person.id, workspaceId);
    const first = await firstPackBonusAvailable(deps.db, workspaceId);
    return {
      purchases: purchaseMode,
      packs: PACK_NAMES.map((n) => ({ name: n, label: PACKS[n].label, credits: PACKS[n].credits, priceCents: PACKS[n].priceCents, bonusCredits: packGrant(PACKS[n], first).bonusCredits })),
    };
  });

  const purchaseBody = z.object({ pack: z.enum(PACK_NAMES), idempotencyKey: z.string().min(8).max(100) });
  app.post('/api/v1/workspaces/:workspaceId/purchases', async (request, reply) => {
    const person = await signedIn(request);
    const { workspaceId } = workspaceParams.parse(request.params);
    await requireMember(deps.db, person.id, workspaceId, ['owner', 'admin']);
    const body = parseBody(purchaseBody, request.body);
    const idempotencyKey = `console:${body.idempotencyKey}`;
    if (!payments) throw new AppError('SERVICE_UNAVAILABLE', 'Purchases are not available on this server: it has no payment processor configured (STRIPE_SECRET_KEY)');
    const { purchase, checkoutUrl } = await purchasePack(
      { db: deps.db, payments },
      {
        userId: workspaceId,
        pack: body.pack,
        idempotencyKey,
        email: person.email,
        returnTo: { success: (purchaseId) => `${origin}/?purchase=${purchaseId}`, cancel: `${origin}/?purchase=cancelled` },
      },
    );
    if (checkoutUrl) return reply.code(201).send({ checkoutUrl, purchase });
    // Paid at once (the development gateway) is 201 as often as it is asked; a hosted purchase
    // already settled is answered as it stands.
    return reply.code(payments.name === 'recording' ? 201 : 200).send({ purchase });
  });

  // The processor's events (Stripe's), through the one webhook handler the API mounts too.
  await registerPaymentWebhook(app, STRIPE_WEBHOOK, { db: deps.db, payments });

  // The workspace's batches, and the same list pushed as server-sent events while any of them runs
  // (checked every second, sent when it changes; at most 3 open streams per person and process).
  app.get('/api/v1/workspaces/:workspaceId/batches', async (request) => {
    const person = await signedIn(request);
    const { workspaceId } = workspaceParams.parse(request.params);
    await requireMember(deps.db, person.id, workspaceId);
    return { batches: await recentBatches(deps.db, workspaceId) };
  });
  const streams = new Map<string, number>();
  app.get('/api/v1/workspaces/:workspaceId/batches/events', async (request, reply) => {
    const person = await signedIn(request);
    const { workspaceId } = workspaceParams.parse(request.params);
    await requireMember(deps.db, person.id, workspaceId);
    const open = streams.get(person.id) ?? 0;
    if (open >= 3) throw new AppError('RATE_LIMITED', 'At most 3 live batch lists at once; close another tab');
    streams.set(person.id, open + 1);
    const body = new PassThrough();
    let closed = false;
    request.raw.once('close', () => {
      closed = true;
    });
    void (async () => {
      let last = '';
      let quietSince = Date.now();
      try {
        for (;;) {
          // A person removed from the workspace stops hearing about it at once, open stream or not.
          if (!(await requireMember(deps.db, person.id, workspaceId).then(() => true, () => false))) break;
          const batches = await recentBatches(deps.db, workspaceId);
          const text = JSON.stringify(batches);
          if (text !== last) {
            body.write(`event: batches\ndata: ${text}\n\n`);
            last = text;
            quietSince = Date.now();
          } else if (Date.now() - quietSince > 15_000) {
            body.write(': nothing new\n\n');
            quietSince = Date.now();
          }
          if (closed) break;
          if (!batches.some((b) => b.status === 'running')) {
            body.write(`event: end\ndata: ${JSON.stringify({ reason: 'none-running' })}\n\n`);
            break;
          }
          await new Promise((r) => setTimeout(r, 1000));
        }
      } catch (err) {
        request.log.warn({ err }, 'batch list stream stopped');
      } finally {
        const left = (streams.get(person.id) ?? 1) - 1;
        if (left > 0) streams.set(person.id, left);
        else streams.delete(person.id);
        body.end();
      }
    })();
    return reply.type('text/event-stream; charset=utf-8').header('cache-control', 'no-store').header('x-accel-buffering', 'no').send(body);
  });

  // New batches from the console: the files come by resumable upload through the API's upload
  // service, then one call names them with the lenses; the same submission as POST /v1/batches
  // from there on. The batch page, its retries and thumbnails (web/batch-routes.ts).
  if (deps.batches) {
    registerConsoleBatches(app, { pipeline: deps.batches.pipeline, personQuotaBytes: deps.config.UPLOAD_QUOTA_BYTES }, signedIn, parseBody);
    // The registry's Photos section reads and erases through the same pipeline (web/photo-routes.ts).
    registerPhotoRoutes(app, deps.batches.pipeline, signedIn);
  } else {
    app.get('/api/v1/catalog', async (request) => {
      await signedIn(request);
      return { stacks: [], vehicles: null, batches: false };
    });
  }

  // The spec's batch export: the batch belongs to a workspace; a person who is not its member gets
  // 404, as for anything else of another workspace.
  const exportSlots = new ExportSlots(deps.config);
  app.get('/api/v1/batch/:batchId/export', async (request, reply) => {
    const person = await signedIn(request);
    const { batchId } = z.object({ batchId: z.string().min(1).max(100) }).parse(request.params);
    const format = (request.query as { format?: unknown }).format;
    const owner = await deps.db.query<{ user_id: string }>('SELECT user_id FROM batches WHERE id = $1', [batchId]);
    const workspaceId = owner.rows[0]?.user_id;
    if (!workspaceId) throw new AppError('NOT_FOUND', 'No such batch');
    await requireMember(deps.db, person.id, workspaceId).catch(() => {
      throw new AppError('NOT_FOUND', 'No such batch');
    });
    return sendBatchExport(request, reply, batchId, await prepareBatchExport(deps.db, workspaceId, batchId, format, exportSlots));
  });

  if (deps.devMailbox) {
    const mailbox = deps.devMailbox;
    // Development only (no SMTP_URL): every mail the console sent, readable without signing in.
    app.get('/api/v1/dev/mailbox', async () => ({ development: true, messages: mailbox.messages() }));
  }

  // Hashed asset names: each file is registered at startup and cached; index.html is not cached.
  if (serveUi) await app.register(fastifyStatic, { root: deps.staticDir!, wildcard: false, index: false, maxAge: '1h' });
  return app;
}
