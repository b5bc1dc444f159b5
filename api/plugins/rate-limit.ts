import type { FastifyInstance, FastifyRequest } from 'fastify';
import { bearerToken } from '../../auth/authenticate.ts';
import { ANONYMOUS_SANDBOX_KEY, hashKey } from '../../auth/keys.ts';
import { AppError } from '../../core/errors.ts';
import { clientAddress, ipBucket, parseTrustedProxies, type TrustedProxies } from '../../ratelimit/client-ip.ts';
import type { Decision, RequestLimiter } from '../../ratelimit/limiter.ts';
import { OutageReporter } from '../../ratelimit/outage.ts';
import { authFailureBucket, bucketsFor, internalSecretFailureBucket, type Bucket } from '../../ratelimit/policy.ts';
import type { AppDeps } from '../deps.ts';

/**
 * Rate limits (docs/contract.md "Limits"), counted in Redis so every API process shares them.
 *
 * - Runs after auth (onRequest, before the body is read): a refused 60 MB upload is never read.
 * - Only key-authenticated requests are limited; unauthenticated routes and internal-secret calls
 *   are not (failed authentications of either kind are, by the guard below).
 * - Headers on every limited response (draft-ietf-httpapi-ratelimit-headers-06): RateLimit-Limit,
 *   RateLimit-Remaining and RateLimit-Reset (seconds) of the bucket closest to its limit, and
 *   RateLimit-Policy listing every limit that applies ("600;w=60, 300;w=60"). A 429 adds
 *   Retry-After: whole seconds, rounded up, until the request would be admitted.
 * - Redis unreachable or slow: fail open (the request goes through unlimited) and log it loudly.
 */
export function registerRateLimit(app: FastifyInstance, deps: AppDeps): void {
  const ctx = contextOf(app, deps);
  const { limiter, outage, trusted, prefix } = ctx;
  if (!limiter.ready) {
    app.log.error({}, 'rate limiter: Redis not reachable at startup, requests are NOT rate-limited until it is (failing open)');
  }

  app.addHook('onRequest', async (request, reply) => {
    const principal = request.principal;
    if (!principal) return;
    const buckets = bucketsFor(prefix, principal, request.routeOptions.url, () => ipBucket(clientAddressOf(request, trusted)));
    const decision = await decide(ctx, buckets, true);
    if (!decision) return;
    if (!decision.admitted) throw rateLimited(decision);
    reply.headers(rateLimitHeaders(decision));
  });

  // Count failed authentications per client IP for the guard below. onSend runs before the
  // response leaves, so a client's next attempt already sees this failure counted.
  app.addHook('onSend', async (request, reply, payload) => {
    const bucket = reply.statusCode === 401 ? failureBucketOf(ctx, request) : null;
    if (bucket) await decide(ctx, [bucket], true);
    return payload;
  });
}

/**
 * Brute-force guard, registered BEFORE auth: an address with too many failed key authentications
 * is refused with 429 before its key is looked up in Postgres, and one with too many wrong
 * internal secrets is refused every internal call, right secret or not. Keys this process already
 * holds in its key cache (and the public anonymous key) skip the key check: they cannot fail.
 */
export function registerAuthFailureGuard(app: FastifyInstance, deps: AppDeps): void {
  const ctx = contextOf(app, deps);
  app.addHook('onRequest', async (request) => {
    const bucket = failureBucketOf(ctx, request);
    if (!bucket) return;
    if (isKeyAuthAttempt(request)) {
      const token = bearerToken(request.headers.authorization);
      if (token !== undefined && (token === ANONYMOUS_SANDBOX_KEY || deps.keyCache.get(hashKey(token)))) return;
    }
    const decision = await decide(ctx, [bucket], false);
    if (decision && !decision.admitted) throw rateLimited(decision);
  });
}

interface Context {
  limiter: RequestLimiter;
  outage: OutageReporter;
  trusted: TrustedProxies;
  prefix: string;
}

// Both hooks of one app share one outage reporter, so an outage is one log line, not two.
const contexts = new WeakMap<FastifyInstance, Context>();

function contextOf(app: FastifyInstance, deps: AppDeps): Context {
  let ctx = contexts.get(app);
  if (!ctx) {
    ctx = {
      limiter: deps.rateLimiter,
      outage: new OutageReporter(app.log),
      trusted: parseTrustedProxies(deps.config.TRUSTED_PROXIES),
      prefix: deps.config.REDIS_PREFIX,
    };
    contexts.set(app, ctx);
  }
  return ctx;
}

/** null = Redis failed and the request goes through unlimited (fail open; the reporter logs it). */
async function decide(ctx: Context, buckets: Bucket[], record: boolean): Promise<Decision<Bucket> | null> {
  try {
    const decision = await ctx.limiter.hit(buckets, { record });
    ctx.outage.succeeded();
    return decision;
  } catch (err) {
    ctx.outage.failed(err);
    return null;
  }
}

function clientAddressOf(request: FastifyRequest, trusted: TrustedProxies) {
  return clientAddress(request.socket.remoteAddress, request.headers['x-forwarded-for'], trusted);
}

/** Where a request's failed authentication counts: per client IP, key and internal secret apart. */
function failureBucketOf(ctx: Context, request: FastifyRequest): Bucket | null {
  const ip = () => ipBucket(clientAddressOf(request, ctx.trusted));
  if (isKeyAuthAttempt(request)) return authFailureBucket(ctx.prefix, ip());
  if (isInternalAttempt(request)) return internalSecretFailureBucket(ctx.prefix, ip());
  return null;
}

/** A request that authenticates (or fails to) with the internal secret. */
function isInternalAttempt(request: FastifyRequest): boolean {
  const mode = request.routeOptions.config?.auth ?? 'none';
  return mode === 'internal' || (mode === 'key-or-internal' && request.headers['x-internal-secret'] !== undefined);
}

/** A request that authenticates (or fails to) with a Bearer key, not with the internal secret. */
function isKeyAuthAttempt(request: FastifyRequest): boolean {
  const mode = request.routeOptions.config?.auth ?? 'none';
  return mode === 'key' || (mode === 'key-or-internal' && request.headers['x-internal-secret'] === undefined);
}

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

function rateLimitHeaders(decision: Decision<Bucket>): Record<string, string> {
  const t = decision.tightest;
  return {
    'ratelimit-limit': String(t.bucket.limit),
    'ratelimit-remaining': String(t.remaining),
    'ratelimit-reset': String(decision.admitted ? Math.ceil(t.resetMs / 1000) : seconds(decision.retryAfterMs)),
    'ratelimit-policy': decision.buckets.map((b) => `${b.bucket.limit};w=${b.bucket.windowMs / 1000}`).join(', '),
  };
}

function windowText(ms: number): string {
  if (ms === 60_000) return 'minute';
  if (ms === 86_400_000) return 'day';
  return ms % 60_000 === 0 ? `${ms / 60_000} minutes` : `${ms / 1000} seconds`;
}

function rateLimited(decision: Decision<Bucket>): AppError {
  const { bucket } = decision.tightest;
  const retryAfter = seconds(decision.retryAfterMs);
  return new AppError(
    'RATE_LIMITED',
    `Rate limit exceeded: ${bucket.limit} ${bucket.counts} per ${windowText(bucket.windowMs)} per ${bucket.per}. Retry in ${retryAfter} s.`,
    { headers: { 'retry-after': String(retryAfter), ...rateLimitHeaders(decision) } },
  );
}
