import { AsyncLocalStorage } from 'node:async_hooks';
import { betterAuth, type User } from 'better-auth';
import { APIError, createAuthMiddleware } from 'better-auth/api';
import { genericOAuth } from 'better-auth/plugins/generic-oauth';
import { magicLink } from 'better-auth/plugins/magic-link';
import { consolePerson } from '../accounts/console-people.ts';
import { identityProviderConfigs } from './identity-providers.ts';
import type { Pool } from 'pg';
import type { BaseLogger } from 'pino';
import { webUrl, type Config } from '../core/config.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import type { Mailer } from './mail.ts';
import { hashPassword, passwordProblem, PASSWORD_MAX, PASSWORD_MIN, verifyPassword } from './passwords.ts';

export interface ConsoleAuthDeps {
  config: Config;
  /** better-auth runs its own queries on our Postgres (its tables: db/migrations/*console-auth.sql). */
  pool: Pool;
  mailer: Mailer;
  /** A person proved their address: their personal workspace is made or linked (accounts/workspaces.ts). */
  onEmailVerified(user: User): Promise<void>;
  /** better-auth's own warnings and errors go here (pino); absent = silent (tests). */
  log?: Pick<BaseLogger, 'warn' | 'error'>;
}

/** The header web/routes/auth.ts sets to the client's address (from the socket or a trusted proxy); any sent by a client is dropped. */
export const CLIENT_IP_HEADER = 'x-lenstack-client-ip';

/**
 * The error behind a better-auth route's answer, for the request being handled: better-auth turns
 * anything a route throws (a lost database connection included) into a bare 500 Response, and the
 * console answers a database that is away with 503 + Retry-After like every other route
 * (handleAuthRequest, docs/reliability.md "Chaos").
 */
const routeErrors = new AsyncLocalStorage<{ error?: unknown }>();

/**
 * better-auth's handler for one request: its Response, and the error a failed route threw (if any).
 * `databaseAway` is that error when better-auth's bare 500 was a database that is away, which the
 * console answers 503 with Retry-After as its own routes do.
 */
export async function handleAuthRequest(auth: ConsoleAuth, request: Request): Promise<{ response: Response; error?: unknown; databaseAway?: unknown }> {
  const store: { error?: unknown } = {};
  const response = await routeErrors.run(store, () => auth.handler(request));
  if (store.error === undefined) return { response };
  return response.status >= 500 && isDatabaseUnavailable(store.error) ? { response, error: store.error, databaseAway: store.error } : { response, error: store.error };
}

/** snake_case columns, like every other table of ours. */
const TIMESTAMPS = { createdAt: 'created_at', updatedAt: 'updated_at' } as const;

/**
 * Sign-in for the console with better-auth (sessions, e-mail verification, CSRF origin checks,
 * OAuth and magic links as plugins), on our Postgres, under {web_url}/api/v1/auth.
 */
export function createConsoleAuth(deps: ConsoleAuthDeps) {
  const { config } = deps;
  const base = webUrl(config);
  const secure = base.startsWith('https://');
  return betterAuth({
    appName: 'Lenstack',
    baseURL: base,
    basePath: '/api/v1/auth',
    secret: config.AUTH_SECRET,
    database: deps.pool,
    user: {
      modelName: 'console_users',
      fields: { emailVerified: 'email_verified', ...TIMESTAMPS },
    },
    session: {
      modelName: 'console_sessions',
      fields: { userId: 'user_id', expiresAt: 'expires_at', ipAddress: 'ip_address', userAgent: 'user_agent', ...TIMESTAMPS },
      expiresIn: 7 * 24 * 3600,
      updateAge: 24 * 3600,
    },
    account: {
      modelName: 'console_identities',
      // A person who signed up with a password and later uses GitHub or Google with the same
      // address is one person, but only when the provider says the address is verified: no
      // provider is "trusted" without it, or an unverified claim to someone's address would take
      // over their account (test/web/console.test.ts tries exactly that).
      accountLinking: { enabled: true },
      fields: {
        userId: 'user_id',
        accountId: 'account_id',
        providerId: 'provider_id',
        accessToken: 'access_token',
        refreshToken: 'refresh_token',
        idToken: 'id_token',
        accessTokenExpiresAt: 'access_token_expires_at',
        refreshTokenExpiresAt: 'refresh_token_expires_at',
        ...TIMESTAMPS,
      },
    },
    verification: {
      modelName: 'console_verifications',
      fields: { expiresAt: 'expires_at', ...TIMESTAMPS },
    },
    emailAndPassword: {
      enabled: true,
      requireEmailVerification: true,
      // Signing up with an address that has an account answers like a new sign-up (no enumeration);
      // the owner of the address hears about it instead.
      async onExistingUserSignUp({ user }) {
        await deps.mailer.send({
          to: user.email,
          subject: 'You already have a Lenstack account',
          text: `Hello,\n\nsomeone (perhaps you) tried to create a Lenstack account with this address, which already has one.\nSign in at ${base}/sign-in — or ask for a sign-in link there if you forgot your password.\nIf it was not you, nothing changed; you can ignore this mail.\n`,
        });
      },
      // Forgotten or unknown passwords (an account someone else pre-registered with your address)
      // are replaced by mail; a reset ends every session, so whoever knew the old one is out.
      resetPasswordTokenExpiresIn: 30 * 60,
      revokeSessionsOnPasswordReset: true,
      async sendResetPassword({ user, url }) {
        await deps.mailer.send({
          to: user.email,
          subject: 'Set a new Lenstack password',
          text: `Hello,\n\nopen this link to set a new password for your Lenstack account (it works once, for 30 minutes):\n\n${url}\n\nSetting it signs out every session of the account.\nIf you did not ask for it, ignore this mail: your password stays as it is.\n`,
        });
      },
      minPasswordLength: PASSWORD_MIN,
      maxPasswordLength: PASSWORD_MAX,
      password: { hash: hashPassword, verify: ({ hash, password }) => verifyPassword(hash, password) },
    },
    emailVerification: {
      sendOnSignUp: true,
      sendOnSignIn: true,
      // Confirming does not sign anyone in: whoever opens the link proves the mailbox, not that they
      // chose the password. Someone who signed up another person's address would otherwise hand
      // them, at "Confirm", a session in an account the sign-up's password also opens
      // (test/security/console-accounts.test.ts). The person signs in with their password after.
      autoSignInAfterVerification: false,
      expiresIn: 24 * 3600,
      async sendVerificationEmail({ user, url }) {
        await deps.mailer.send({
          to: user.email,
          subject: 'Confirm your e-mail address for Lenstack',
          text: `Hello,\n\nconfirm your address to finish signing up for Lenstack (this link works for 24 hours):\n\n${url}\n\nThen sign in with the password you chose. Confirming grants your workspace 1,000 free credits (once per mailbox).\nIf you did not sign up, do not confirm: ignore this mail, and that account stays unusable.\n`,
        });
      },
      afterEmailVerification: (user) => deps.onEmailVerified(user),
    },
    plugins: [
      ...(identityProviderConfigs(config).length ? [genericOAuth({ config: identityProviderConfigs(config) })] : []),
      // Sign-in by a link mailed to the address: single use, 10 minutes, stored hashed. A link to an
      // address without an account creates one (the click proves the address).
      magicLink({
        expiresIn: 10 * 60,
        storeToken: 'hashed',
        async sendMagicLink({ email, url }) {
          await deps.mailer.send({
            to: email,
            subject: 'Your Lenstack sign-in link',
            text: `Hello,\n\nopen this link to sign in to Lenstack. It works once, for 10 minutes:\n\n${url}\n\nIf you did not ask for it, ignore this mail: nobody can sign in without it.\n`,
          });
        },
      }),
    ],
    databaseHooks: {
      // Every sign-in of a person whose address is proven (password after confirmation, magic link,
      // identity provider) makes sure they have their workspace: idempotent, one query when they do.
      session: {
        create: {
          async after(session) {
            const u = await consolePerson(deps.pool, session.userId);
            if (u?.emailVerified) await deps.onEmailVerified({ id: u.id, email: u.email, name: u.name, emailVerified: true } as User);
          },
        },
      },
    },
    hooks: {
      before: createAuthMiddleware(async (ctx) => {
        // Every way a password is set follows the same rules: sign-up, reset, change.
        const field = ctx.path === '/sign-up/email' ? 'password' : ctx.path === '/reset-password' || ctx.path === '/change-password' ? 'newPassword' : null;
        if (!field) return;
        const body = ctx.body as Record<string, unknown> | undefined;
        const password = body?.[field];
        if (typeof password !== 'string') return;
        const email = typeof body?.email === 'string' ? body.email : (ctx.context.session?.user.email ?? '');
        const problem = passwordProblem(password, { email });
        if (problem) throw new APIError('BAD_REQUEST', { message: problem, code: 'PASSWORD_REFUSED' });
      }),
    },
    // Throttling is ours, in Redis for every process (web/plugins/throttle.ts), not better-auth's per-process memory.
    rateLimit: { enabled: false },
    advanced: {
      ipAddress: { ipAddressHeaders: [CLIENT_IP_HEADER] },
      cookiePrefix: 'lenstack',
      useSecureCookies: secure,
      defaultCookieAttributes: { httpOnly: true, sameSite: 'lax', secure, path: '/' },
    },
    telemetry: { enabled: false },
    // Kept for handleAuthRequest; logged as better-auth would (an API error that is an answer, a
    // 4xx, is not an error of ours).
    onAPIError: {
      onError(e) {
        const store = routeErrors.getStore();
        // A route's own 500 (FAILED_TO_GET_SESSION…) carries what failed in its body's cause.
        const cause = e instanceof APIError && e.cause === undefined ? (e.body as { cause?: unknown } | undefined)?.cause : undefined;
        if (store) store.error = cause ?? e;
        if (e instanceof APIError && e.status !== 'INTERNAL_SERVER_ERROR') return;
        deps.log?.error({ component: 'better-auth', err: e }, 'better-auth route failed');
      },
    },
    // Warnings and errors only: its info lines name e-mail addresses. A route that fails and
    // answers its own 500 (get-session's FAILED_TO_GET_SESSION) reaches onAPIError without what
    // failed: it logs that error first, which is kept for handleAuthRequest.
    logger: {
      level: 'warn',
      log: (level, message, ...args) => {
        const store = routeErrors.getStore();
        if (store && level === 'error' && store.error === undefined) store.error = args.find((a) => a instanceof Error);
        if (deps.log) (level === 'error' ? deps.log.error({ component: 'better-auth' }, message) : deps.log.warn({ component: 'better-auth' }, message));
      },
    },
  });
}

export type ConsoleAuth = ReturnType<typeof createConsoleAuth>;
