import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { activeSessions, endSession, removeIdentity, signInIdentities } from '../../accounts/console-people.ts';
import { AppError } from '../../core/errors.ts';
import type { WebContext } from '../deps.ts';
import { currentSession } from '../plugins/session.ts';

/**
 * The person's own account, under /api/v1/account: how one can sign in to it and where it is
 * signed in, each removable (docs/decisions.md "Sign-in methods and sessions"). The methods are
 * the mailed link (always there for a confirmed address: it is the address itself, not removable),
 * a password and each linked identity provider; removing one never leaves the account without a
 * way in, needs a sign-in of the last 24 hours, and ends every other session (whoever came in by
 * that method is out). Sessions are listed by id, never by their token.
 */
export interface SignInMethod {
  id: string;
  kind: 'email-link' | 'password' | 'provider';
  label: string;
  since: string | null;
  removable: boolean;
}

export interface AccountSession {
  id: string;
  createdAt: string;
  lastActiveAt: string;
  ipAddress: string | null;
  userAgent: string | null;
  current: boolean;
}

/** How recent the sign-in must be to remove a way of signing in (better-auth's own fresh age). */
export const FRESH_SESSION_MS = 24 * 3600_000;

const PROVIDER_LABELS: Record<string, string> = { github: 'GitHub', google: 'Google', credential: 'Password' };
const idParam = z.object({ id: z.string().min(1).max(200) });

export function accountRoutes(ctx: WebContext): FastifyPluginAsync {
  const { db, auth } = ctx.deps;
  return async (app) => {
    const current = (request: FastifyRequest) => currentSession(auth, request);
    const params = (request: FastifyRequest) => {
      const parsed = idParam.safeParse(request.params);
      if (!parsed.success) throw new AppError('VALIDATION_FAILED', 'id: 1 to 200 characters');
      return parsed.data.id;
    };

    async function methodsOf(personId: string, emailVerified: boolean): Promise<SignInMethod[]> {
      const identities = await signInIdentities(db, personId);
      // A confirmed address can always get a link; without it, the last identity is the only way in.
      const removable = emailVerified || identities.length > 1;
      return [
        ...(emailVerified ? [{ id: 'email-link', kind: 'email-link' as const, label: 'Sign-in link by e-mail', since: null, removable: false }] : []),
        ...identities.map((row) => ({
          id: row.id,
          kind: row.providerId === 'credential' ? ('password' as const) : ('provider' as const),
          label: PROVIDER_LABELS[row.providerId] ?? row.providerId,
          since: row.createdAt.toISOString(),
          removable,
        })),
      ];
    }

    app.get('/api/v1/account/security', async (request, reply) => {
      const s = await current(request);
      const sessions = await activeSessions(db, s.user.id);
      return reply.header('cache-control', 'no-store').send({
        email: s.user.email,
        methods: await methodsOf(s.user.id, s.user.emailVerified),
        sessions: sessions.map(
          (row): AccountSession => ({
            id: row.id,
            createdAt: row.createdAt.toISOString(),
            lastActiveAt: row.updatedAt.toISOString(),
            ipAddress: row.ipAddress,
            userAgent: row.userAgent ? row.userAgent.slice(0, 300) : null,
            current: row.id === s.session.id,
          }),
        ),
      });
    });

    app.delete('/api/v1/account/sessions/:id', async (request) => {
      const s = await current(request);
      const id = params(request);
      if (!(await endSession(db, s.user.id, id))) throw new AppError('NOT_FOUND', 'No such session of your account');
      return { revoked: id, current: id === s.session.id };
    });

    app.delete('/api/v1/account/methods/:id', async (request) => {
      const s = await current(request);
      const id = params(request);
      const methods = await methodsOf(s.user.id, s.user.emailVerified);
      const method = methods.find((m) => m.id === id);
      if (!method) throw new AppError('NOT_FOUND', 'No such sign-in method on your account');
      if (!method.removable) {
        throw new AppError('FORBIDDEN', method.kind === 'email-link' ? 'The sign-in link goes to your address; it cannot be removed' : 'This is your only way to sign in; add another first');
      }
      if (Date.now() - new Date(s.session.createdAt).getTime() > FRESH_SESSION_MS) {
        throw new AppError('FORBIDDEN', 'Sign in again (within the last 24 hours) to remove a way of signing in');
      }
      const sessionsEnded = await removeIdentity(db, s.user.id, id, s.session.id);
      return { removed: id, sessionsEnded };
    });
  };
}
