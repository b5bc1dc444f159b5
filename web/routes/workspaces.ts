import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { createTeamWorkspace } from '../../accounts/workspaces.ts';
import { AppError } from '../../core/errors.ts';
import type { WebContext } from '../deps.ts';
import { parseBody } from '../plugins/validation.ts';

const newWorkspaceBody = z.object({ name: z.string().trim().min(1).max(80) });

/** A new team workspace (accounts/workspaces.ts: the owned-team cap, its billing account). */
export function workspaceRoutes(ctx: WebContext): FastifyPluginAsync {
  const { deps, signedIn } = ctx;
  return async (app) => {
    app.post('/api/v1/workspaces', async (request, reply) => {
      const person = await signedIn(request);
      if (!person.emailVerified) throw new AppError('FORBIDDEN', 'Confirm your e-mail address before creating workspaces');
      const body = parseBody(newWorkspaceBody, request.body);
      return reply.code(201).send(await createTeamWorkspace(deps.db, person, body.name));
    });
  };
}
