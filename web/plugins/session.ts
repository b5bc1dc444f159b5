import { fromNodeHeaders } from 'better-auth/node';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../../core/errors.ts';
import type { ConsoleAuth } from '../auth.ts';
import { requireMember } from '../../accounts/workspaces.ts';
import type { Db } from '../../db/pool.ts';
import type { MemberOf, SignedIn } from '../deps.ts';
import { parse, workspaceParams } from './validation.ts';

/** The request's better-auth session (person and session row), or 401 AUTH_FAILED. */
export async function currentSession(auth: ConsoleAuth, request: FastifyRequest) {
  const session = await auth.api.getSession({ headers: fromNodeHeaders(request.headers) });
  if (!session) throw new AppError('AUTH_FAILED', 'Sign in to use the console');
  return session;
}

/**
 * Session resolution for the console's routes: the person behind the session cookie (never a
 * Bearer key), read again on every request, so a session ended elsewhere is out at once.
 */
export function sessionResolver(auth: ConsoleAuth): SignedIn {
  return async (request) => {
    const session = await currentSession(auth, request);
    return { id: session.user.id, email: session.user.email, name: session.user.name, emailVerified: session.user.emailVerified };
  };
}

/** The workspace routes' one membership check (MemberOf): signed in first, then a member of the path's workspace. */
export function workspaceMember(signedIn: SignedIn, db: Db): MemberOf {
  return async (request, roles) => {
    const person = await signedIn(request);
    const { workspaceId } = parse('path', workspaceParams, request.params);
    await requireMember(db, person.id, workspaceId, roles);
    return { person, workspaceId };
  };
}
