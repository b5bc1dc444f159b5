import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { listRequests, requestDetail, requestOperations } from '../../requestlog/repository.ts';
import type { WebContext } from '../deps.ts';
import { parse } from '../plugins/validation.ts';

const limit = z.coerce.number().int().min(1).max(200).default(50);
const requestsQuery = z.strictObject({
  status: z.union([z.enum(['ok', 'error']), z.coerce.number().int().min(100).max(599)]).optional(),
  key: z.string().min(1).max(100).optional(),
  operation: z.string().min(1).max(200).optional(),
  from: z.iso.datetime({ offset: true }).optional(),
  to: z.iso.datetime({ offset: true }).optional(),
  cursor: z.string().min(1).max(200).optional(),
  limit,
});

/**
 * The console's Requests section (docs/decisions.md "The console's Requests log"); every member of
 * a workspace sees it, another workspace's is 404.
 * - `GET …/requests?status=ok|error|<code>&key=&operation=&from=&to=&cursor=&limit=`: the last 30
 *   days of API requests by the workspace's keys, newest first, keyset-paginated (`next`);
 * - `GET …/requests/{id}`: one of them with its error envelope or its stored analysis.
 */
export function requestRoutes(ctx: WebContext): FastifyPluginAsync {
  const { memberOf } = ctx;
  const { db } = ctx.deps;
  return async (app) => {
    const base = '/api/v1/workspaces/:workspaceId';
    const member = async (request: FastifyRequest) => (await memberOf(request)).workspaceId;

    app.get(`${base}/requests`, async (request, reply) => {
      const workspaceId = await member(request);
      const q = parse('query', requestsQuery, request.query);
      const page = await listRequests(
        db,
        workspaceId,
        {
          ...(q.status !== undefined ? { status: q.status } : {}),
          ...(q.key ? { keyId: q.key } : {}),
          ...(q.operation ? { operation: q.operation } : {}),
          ...(q.from ? { from: new Date(q.from) } : {}),
          ...(q.to ? { to: new Date(q.to) } : {}),
        },
        { limit: q.limit, ...(q.cursor ? { cursor: q.cursor } : {}) },
      );
      // The filter's choices come with the first page only.
      const operations = q.cursor ? undefined : await requestOperations(db, workspaceId);
      return reply.header('cache-control', 'no-store').send({ ...page, ...(operations ? { operations } : {}) });
    });

    app.get(`${base}/requests/:requestRowId`, async (request, reply) => {
      const workspaceId = await member(request);
      const { requestRowId } = parse('path', z.object({ requestRowId: z.string().min(1).max(20) }), request.params);
      return reply.header('cache-control', 'no-store').send(await requestDetail(db, workspaceId, requestRowId));
    });
  };
}
