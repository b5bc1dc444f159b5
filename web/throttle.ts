import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { AppError } from '../core/errors.ts';
import type { RateLimiter } from '../ratelimit/limiter.ts';
import type { ScriptBucket } from '../ratelimit/script.ts';

/**
 * Sign-in throttling in Redis, for every console process alike: attempts per client address
 * (IPv6 by /64) and per account (the lowercased address, hashed: no e-mail in Redis keys).
 * Password guessing against one account from many addresses meets the account bucket; one address
 * trying many accounts meets its address bucket. Like the API's limiter it fails open when Redis
 * is away (logged), because argon2id still makes each guess costly.
 */
export const SIGN_IN_PATHS = new Set(['/api/v1/auth/sign-in/email', '/api/v1/auth/sign-in/magic-link']);
/** Paths that send mail or create accounts: counted per address only. */
export const MAIL_PATHS = new Set(['/api/v1/auth/sign-up/email', '/api/v1/auth/send-verification-email', '/api/v1/auth/request-password-reset']);

export const LIMITS = {
  perAccount: { limit: 10, windowMs: 15 * 60_000 },
  perAddress: { limit: 30, windowMs: 10 * 60_000 },
} as const;

export interface Throttle {
  check(args: { path: string; ip: string; email: unknown }): Promise<void>;
}

export function signInThrottle(limiter: RateLimiter, prefix: string, log: FastifyBaseLogger): Throttle {
  return {
    async check({ path, ip, email }) {
      const signIn = SIGN_IN_PATHS.has(path);
      if (!signIn && !MAIL_PATHS.has(path)) return;
      const buckets: ScriptBucket[] = [{ key: `${prefix}console:auth:ip:${ip}`, ...LIMITS.perAddress }];
      if (signIn && typeof email === 'string' && email.length <= 320) {
        const account = createHash('sha256').update(email.trim().toLowerCase()).digest('hex');
        buckets.push({ key: `${prefix}console:auth:account:${account}`, ...LIMITS.perAccount });
      }
      let decision;
      try {
        decision = await limiter.hit(buckets);
      } catch (err) {
        log.warn({ err }, 'sign-in throttle unavailable (Redis); letting the attempt through');
        return;
      }
      if (decision.admitted) return;
      const seconds = Math.max(1, Math.ceil(decision.retryAfterMs / 1000));
      const which = decision.tightest.bucket.key.includes(':account:') ? 'this account' : 'your network address';
      throw new AppError('RATE_LIMITED', `Too many sign-in attempts for ${which}; try again in ${Math.ceil(seconds / 60)} minute(s), or ask for a sign-in link`, {
        headers: { 'retry-after': String(seconds) },
      });
    },
  };
}
