import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { AppError } from '../../core/errors.ts';
import type { RequestLimiter } from '../../ratelimit/limiter.ts';
import type { ScriptBucket } from '../../ratelimit/script.ts';

/**
 * Sign-in throttling in Redis, for every console process alike (docs/decisions.md "Sign-in
 * throttling: failures per account and per source apart"). What counts is a FAILED password
 * (better-auth answered 401), in three buckets kept apart:
 *
 * - per source (client address, IPv6 by /64), any account: a source spraying guesses meets 429;
 * - per account and source: one source guessing one account meets 429, for that account only;
 * - per account, all sources together: past its limit the account does not answer passwords from
 *   sources it has not seen sign in lately. Such a sign-in is answered, without trying the
 *   password, with a sign-in link mailed to the address (the proof a guesser lacks) — never with a
 *   429 the right person cannot get past. Sources the account signed in from in the last 30 days
 *   keep using the password (their own failures still count).
 *
 * Magic-link requests, sign-ups and resets are counted per source only (they send mail);
 * they never touch the per-account failures, so the link a locked-out person is told to use works.
 * Like the API's limiter it fails open when Redis is away (logged), because argon2id still makes
 * each guess costly.
 */
export const PASSWORD_PATH = '/api/v1/auth/sign-in/email';
/** Paths that send mail or create accounts: counted per source. */
export const MAIL_PATHS = new Set([
  '/api/v1/auth/sign-in/magic-link',
  '/api/v1/auth/sign-up/email',
  '/api/v1/auth/send-verification-email',
  '/api/v1/auth/request-password-reset',
  '/api/v1/auth/reset-password',
]);

export const LIMITS = {
  /** Calls that send mail or make accounts from one source (links, sign-ups, resets); passwords are limited by their failures. */
  perAddress: { limit: 30, windowMs: 10 * 60_000 },
  /** Failed passwords from one source, whatever the accounts. */
  failuresPerSource: { limit: 20, windowMs: 15 * 60_000 },
  /** Failed passwords for one account from one source. */
  failuresPerAccountAndSource: { limit: 10, windowMs: 15 * 60_000 },
  /** Failed passwords for one account from all sources: past it, new sources need the mailed link. */
  failuresPerAccount: { limit: 10, windowMs: 15 * 60_000 },
  /** Links mailed instead of a password answer, per account (the rest of the window reuses the last). */
  proofMailsPerAccount: { limit: 3, windowMs: 15 * 60_000 },
} as const;

/** How long a source that signed in counts as the account's own. */
export const KNOWN_SOURCE_TTL_MS = 30 * 24 * 3600_000;

export interface Throttle {
  /** Before better-auth sees the call: 429 or the mailed-link answer, or nothing (go on). */
  before(args: { path: string; ip: string; email: unknown }): Promise<void>;
  /** After better-auth answered a password sign-in: count a failure, or remember the source. */
  after(args: { path: string; ip: string; email: unknown; status: number }): Promise<void>;
}

export interface ThrottleDeps {
  limiter: RequestLimiter;
  prefix: string;
  log: FastifyBaseLogger;
  /** Mail `email` a sign-in link (better-auth's magic link). */
  sendSignInLink(email: string): Promise<void>;
}

const accountOf = (email: unknown): string | null =>
  typeof email === 'string' && email.length > 0 && email.length <= 320 ? createHash('sha256').update(email.trim().toLowerCase()).digest('hex') : null;

export function signInThrottle(deps: ThrottleDeps): Throttle {
  const { limiter, prefix, log } = deps;
  const key = (...parts: string[]) => `${prefix}console:auth:${parts.join(':')}`;
  const buckets = (ip: string, account: string) => ({
    source: { key: key('ip', 'fail', ip), ...LIMITS.failuresPerSource },
    pair: { key: key('fail-pair', account, ip), ...LIMITS.failuresPerAccountAndSource },
    account: { key: key('fail-account', account), ...LIMITS.failuresPerAccount },
  });
  // A source that signed in to the account: one success recorded in a bucket of 1 (full = known).
  const knownSource = (account: string, ip: string): ScriptBucket => ({ key: key('known', account, ip), limit: 1, windowMs: KNOWN_SOURCE_TTL_MS });
  const tooMany = (retryAfterMs: number, which: string) => {
    const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
    return new AppError('RATE_LIMITED', `Too many sign-in attempts ${which}; try again in ${Math.ceil(seconds / 60)} minute(s), or ask for a sign-in link`, {
      headers: { 'retry-after': String(seconds) },
    });
  };
  // Redis away: let the attempt through (logged), as the API's limiter does.
  const safely = async <T>(what: string, fn: () => Promise<T>): Promise<T | null> => {
    try {
      return await fn();
    } catch (err) {
      log.warn({ err }, `sign-in throttle unavailable (Redis) at ${what}; letting the attempt through`);
      return null;
    }
  };

  return {
    async before({ path, ip, email }) {
      if (MAIL_PATHS.has(path)) {
        const perSource = await safely('admit', () => limiter.hit([{ key: key('ip', ip), ...LIMITS.perAddress }]));
        if (perSource && !perSource.admitted) throw tooMany(perSource.retryAfterMs, 'from your network address');
        return;
      }
      const account = accountOf(email);
      if (path !== PASSWORD_PATH || !account) return;

      const b = buckets(ip, account);
      // Peek only: a try is counted when it fails, in after().
      const source = await safely('peek', () => limiter.hit([b.source], { record: false }));
      if (source && !source.admitted) throw tooMany(source.retryAfterMs, 'from your network address');
      const pair = await safely('peek', () => limiter.hit([b.pair], { record: false }));
      if (pair && !pair.admitted) throw tooMany(pair.retryAfterMs, 'for this account from your network address');
      const all = await safely('peek', () => limiter.hit([b.account], { record: false }));
      if (!all || all.admitted) return;
      const known = await safely('known', () => limiter.hit([knownSource(account, ip)], { record: false }));
      if (known && !known.admitted) return;
      // The account is under attack and this source is new to it: no password answer at all (right
      // or wrong, the guesser learns nothing); the address's owner gets a link instead.
      const mail = await safely('proof-mail', () => limiter.hit([{ key: key('proof-mail', account), ...LIMITS.proofMailsPerAccount }]));
      if (mail?.admitted ?? true) {
        await deps.sendSignInLink(String(email).trim()).catch((err: unknown) => log.warn({ err }, 'could not mail a sign-in link to an account under password guessing'));
      }
      throw new AppError(
        'FORBIDDEN',
        'This account had many failed sign-ins, so passwords from a new place are not accepted for now: we e-mailed a sign-in link to the address. Open it to sign in (it works once, for 10 minutes).',
        { details: { signInLinkSent: true } },
      );
    },

    async after({ path, ip, email, status }) {
      const account = accountOf(email);
      if (path !== PASSWORD_PATH || !account) return;
      if (status === 401) {
        const b = buckets(ip, account);
        // Each counted on its own: a full bucket must not keep the failure out of the others.
        for (const bucket of [b.source, b.pair, b.account] satisfies ScriptBucket[]) await safely('count', () => limiter.hit([bucket]));
      } else if (status >= 200 && status < 300) {
        await safely('remember', () => limiter.hit([knownSource(account, ip)]));
      }
    },
  };
}
