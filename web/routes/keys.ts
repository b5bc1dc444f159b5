import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { issueAccountKey, listAccountKeys, revokeAccountKey } from '../../accounts/keys.ts';
import { recordKeyCreator } from '../../accounts/members.ts';
import { requireMember } from '../../accounts/workspaces.ts';
import { AppError } from '../../core/errors.ts';
import type { WebContext } from '../deps.ts';
import { parse, parseBody, workspaceParams } from '../plugins/validation.ts';

const newKeyBody = z.object({ kind: z.enum(['live', 'test']), name: z.string().trim().min(1).max(100).optional() });

/**
 * A workspace's API keys: every member lists them; owners and admins issue (the secret shown once,
 * never stored: `cache-control: no-store`) and revoke (at once in every API process, through the
 * eviction bus).
 */
export function keyRoutes(ctx: WebContext): FastifyPluginAsync {
  const { deps, signedIn } = ctx;
  const { db } = deps;
  return async (app) => {
    app.get('/api/v1/workspaces/:workspaceId/keys', async (request) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', workspaceParams, request.params);
      await requireMember(db, person.id, workspaceId);
      return { keys: await listAccountKeys(db, workspaceId) };
    });

    app.post('/api/v1/workspaces/:workspaceId/keys', async (request, reply) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', workspaceParams, request.params);
      await requireMember(db, person.id, workspaceId, ['owner', 'admin']);
      const data = parseBody(newKeyBody, request.body);
      const issued = await issueAccountKey(db, { accountId: workspaceId, kind: data.kind, name: data.name ?? null });
      await recordKeyCreator(db, issued.id, person.id);
      return reply.code(201).header('cache-control', 'no-store').send(issued);
    });

    app.delete('/api/v1/workspaces/:workspaceId/keys/:keyId', async (request) => {
      const person = await signedIn(request);
      const { workspaceId, keyId } = parse('path', workspaceParams.extend({ keyId: z.string().min(1).max(100) }), request.params);
      await requireMember(db, person.id, workspaceId, ['owner', 'admin']);
      const revoked = await revokeAccountKey(
        { db, keyCache: deps.keyCache, ...(deps.evictionBus ? { evictionBus: deps.evictionBus } : {}) },
        { accountId: workspaceId, keyId },
      ).catch((err: unknown) => {
        throw err instanceof AppError && err.code === 'NOT_FOUND' ? new AppError('NOT_FOUND', 'No such key in this workspace') : err;
      });
      return revoked;
    });
  };
}
