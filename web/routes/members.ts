import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { changeRole, keysByCreator, removeMember, transferOwnership, type MemberDeps } from '../../accounts/members.ts';
import { acceptInvitation, inviteMember, listInvitations, listMembers, requireMember, withdrawInvitation } from '../../accounts/workspaces.ts';
import { AppError } from '../../core/errors.ts';
import type { WebContext } from '../deps.ts';
import { invitationMail } from '../mail.ts';
import { parse, parseBody, workspaceParams } from '../plugins/validation.ts';

const memberParams = z.object({ workspaceId: z.string().min(1).max(100), personId: z.string().min(1).max(100) });
const removeBody = z.strictObject({ keys: z.enum(['keep', 'revoke']) });
const roleBody = z.strictObject({ role: z.enum(['owner', 'admin', 'member']) });
const transferBody = z.strictObject({ personId: z.string().min(1).max(100) });
const inviteBody = z.object({ email: z.string().trim().min(3).max(320), role: z.enum(['admin', 'member']).default('member') });
const acceptBody = z.object({ token: z.string().min(1).max(200) });

/**
 * A workspace's people (accounts/members.ts and accounts/workspaces.ts have the rules):
 * - `GET …/members`: the members, each with how many active keys they made, and (for owners and
 *   admins) the pending invitations;
 * - `POST …/invitations` `{"email", "role"}`: invite someone by mail; `POST /api/v1/invitations/accept`
 *   `{"token"}`: join with the mailed token;
 * - `DELETE …/members/{personId}` with `{"keys": "keep" | "revoke"}`: remove someone, saying what
 *   becomes of the keys they created (required: nobody's keys are revoked or kept by accident);
 * - `DELETE …/members/me` (or one's own id): leave (the keys one made in the workspace are revoked);
 * - `PATCH …/members/{personId}` with `{"role": …}`: an owner changes a role;
 * - `POST …/owner` with `{"personId": …}`: an owner hands the workspace over (and becomes admin).
 */
export function memberRoutes(ctx: WebContext): FastifyPluginAsync {
  const { deps, signedIn, origin } = ctx;
  const { db } = deps;
  const memberDeps: MemberDeps = { db, keyCache: deps.keyCache, ...(deps.evictionBus ? { evictionBus: deps.evictionBus } : {}) };
  const base = '/api/v1/workspaces/:workspaceId';
  return async (app) => {
    app.get(`${base}/members`, async (request) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', workspaceParams, request.params);
      const role = await requireMember(db, person.id, workspaceId);
      // With each person, how many active keys they made: what removing them would keep or revoke.
      const keys = await keysByCreator(db, workspaceId);
      const members = (await listMembers(db, workspaceId)).map((m) => ({ ...m, activeKeysCreated: keys.get(m.personId) ?? 0 }));
      return { members, invitations: role === 'member' ? [] : await listInvitations(db, workspaceId) };
    });

    app.delete(`${base}/members/:personId`, async (request) => {
      const person = await signedIn(request);
      const p = parse('path', memberParams, request.params);
      const personId = p.personId === 'me' ? person.id : p.personId;
      // Leaving revokes the leaver's keys in this workspace whatever the body says (accounts/members.ts).
      const keys = personId === person.id ? 'revoke' : parse('body', removeBody, request.body).keys;
      return { removed: await removeMember(memberDeps, { workspaceId: p.workspaceId, actorId: person.id, personId, keys }) };
    });
    app.patch(`${base}/members/:personId`, async (request) => {
      const person = await signedIn(request);
      const p = parse('path', memberParams, request.params);
      const { role } = parse('body', roleBody, request.body);
      return { member: await changeRole(db, { workspaceId: p.workspaceId, actorId: person.id, personId: p.personId === 'me' ? person.id : p.personId, role }) };
    });
    app.post(`${base}/owner`, async (request) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', memberParams.pick({ workspaceId: true }), request.params);
      const { personId } = parse('body', transferBody, request.body);
      return { transfer: await transferOwnership(db, { workspaceId, actorId: person.id, personId }) };
    });

    app.post(`${base}/invitations`, async (request, reply) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', workspaceParams, request.params);
      const role = await requireMember(db, person.id, workspaceId, ['owner', 'admin']);
      const body = parseBody(inviteBody, request.body);
      const { token, invitation, workspaceName } = await inviteMember(db, { workspaceId, inviter: { id: person.id, role }, email: body.email, role: body.role });
      try {
        await deps.mailer.send(
          invitationMail({ to: invitation.email, inviter: person, workspaceName, role: invitation.role, acceptUrl: `${origin}/invitations/accept?token=${token}` }),
        );
      } catch (err) {
        // An invitation nobody was told about is not left behind.
        await withdrawInvitation(db, invitation.id);
        request.log.warn({ err }, 'invitation mail not sent');
        throw new AppError('SERVICE_UNAVAILABLE', 'The invitation mail could not be sent; no invitation was kept. Try again in a moment.');
      }
      return reply.code(201).send({ invitation });
    });

    app.post('/api/v1/invitations/accept', async (request) => {
      const person = await signedIn(request);
      const { token } = parseBody(acceptBody, request.body);
      return { workspace: await acceptInvitation(db, { token, person }) };
    });
  };
}
