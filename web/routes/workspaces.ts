import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { createTeamWorkspace, renameWorkspace, requireMember } from '../../accounts/workspaces.ts';
import { AppError } from '../../core/errors.ts';
import type { WebContext } from '../deps.ts';
import { parse, parseBody, workspaceParams } from '../plugins/validation.ts';

const newWorkspaceBody = z.object({ name: z.string().trim().min(1).max(80) });
/** The bounds (1 to 80 printable characters) are accounts/workspaces.ts's, as for a new workspace. */
const renameBody = z.strictObject({ name: z.string().max(1000) });

/**
 * - `POST /api/v1/workspaces` `{"name"}`: a new team workspace (accounts/workspaces.ts: the owned-team cap, its billing account);
 * - `PATCH /api/v1/workspaces/{id}` `{"name"}`: an owner or admin renames it (a member: 403; not a member: 404).
 */
export function workspaceRoutes(ctx: WebContext): FastifyPluginAsync {
  const { deps, signedIn } = ctx;
  return async (app) => {
    app.post('/api/v1/workspaces', async (request, reply) => {
      const person = await signedIn(request);
      if (!person.emailVerified) throw new AppError('FORBIDDEN', 'Confirm your e-mail address before creating workspaces');
      const body = parseBody(newWorkspaceBody, request.body);
      return reply.code(201).send(await createTeamWorkspace(deps.db, person, body.name));
    });

    app.patch('/api/v1/workspaces/:workspaceId', async (request) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', workspaceParams, request.params);
      // Membership first: someone outside learns nothing, not even whether their name would pass.
      await requireMember(deps.db, person.id, workspaceId, ['owner', 'admin']);
      const { name } = parseBody(renameBody, request.body);
      return { workspace: await renameWorkspace(deps.db, workspaceId, name) };
    });
  };
}
