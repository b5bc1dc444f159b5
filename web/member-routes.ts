import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { validationFailed } from '../core/errors.ts';
import { changeRole, removeMember, transferOwnership, type MemberDeps } from './members.ts';

const params = z.object({ workspaceId: z.string().min(1).max(100), personId: z.string().min(1).max(100) });
const removeBody = z.strictObject({ keys: z.enum(['keep', 'revoke']) });
const roleBody = z.strictObject({ role: z.enum(['owner', 'admin', 'member']) });
const transferBody = z.strictObject({ personId: z.string().min(1).max(100) });

function parse<T extends z.ZodType>(what: string, schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value ?? {});
  if (!parsed.success) throw validationFailed(`${what}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

/**
 * The console's routes for a workspace's people (web/members.ts has the rules):
 * - `DELETE …/members/{personId}` with `{"keys": "keep" | "revoke"}`: remove someone, saying what
 *   becomes of the keys they created (required: nobody's keys are revoked or kept by accident);
 * - `DELETE …/members/me` (or one's own id): leave (the keys one made in the workspace are revoked);
 * - `PATCH …/members/{personId}` with `{"role": …}`: an owner changes a role;
 * - `POST …/owner` with `{"personId": …}`: an owner hands the workspace over (and becomes admin).
 */
export function registerMemberRoutes(app: FastifyInstance, deps: MemberDeps, signedIn: (request: FastifyRequest) => Promise<{ id: string }>): void {
  const base = '/api/v1/workspaces/:workspaceId';
  app.delete(`${base}/members/:personId`, async (request) => {
    const person = await signedIn(request);
    const p = parse('path', params, request.params);
    const personId = p.personId === 'me' ? person.id : p.personId;
    // Leaving revokes the leaver's keys in this workspace whatever the body says (web/members.ts).
    const keys = personId === person.id ? 'revoke' : parse('body', removeBody, request.body).keys;
    return { removed: await removeMember(deps, { workspaceId: p.workspaceId, actorId: person.id, personId, keys }) };
  });
  app.patch(`${base}/members/:personId`, async (request) => {
    const person = await signedIn(request);
    const p = parse('path', params, request.params);
    const { role } = parse('body', roleBody, request.body);
    return { member: await changeRole(deps.db, { workspaceId: p.workspaceId, actorId: person.id, personId: p.personId === 'me' ? person.id : p.personId, role }) };
  });
  app.post(`${base}/owner`, async (request) => {
    const person = await signedIn(request);
    const { workspaceId } = parse('path', params.pick({ workspaceId: true }), request.params);
    const { personId } = parse('body', transferBody, request.body);
    return { transfer: await transferOwnership(deps.db, { workspaceId, actorId: person.id, personId }) };
  });
}
