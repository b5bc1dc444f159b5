import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { chargedPerDayByLens, usageCsv, usageRows } from '../../credits/usage.ts';
import type { WebContext } from '../deps.ts';
import { parse } from '../plugins/validation.ts';

const limit = z.coerce.number().int().min(1).max(200).default(50);
const usageQuery = z.strictObject({ cursor: z.string().min(1).max(40).optional(), limit });

/**
 * The console's Usage & billing section (docs/decisions.md "Usage & billing"); every member of a
 * workspace sees it, another workspace's is 404.
 * - `GET …/usage?cursor=&limit=`: one row per analysis, batch or purchase, and on the first page
 *   the charges per day split by lens;
 * - `GET …/usage.csv`: the same rows as a spreadsheet.
 */
export function usageRoutes(ctx: WebContext): FastifyPluginAsync {
  const { memberOf } = ctx;
  const { db } = ctx.deps;
  return async (app) => {
    const base = '/api/v1/workspaces/:workspaceId';
    const member = async (request: FastifyRequest) => (await memberOf(request)).workspaceId;

    app.get(`${base}/usage`, async (request, reply) => {
      const workspaceId = await member(request);
      const q = parse('query', usageQuery, request.query);
      const page = await usageRows(db, workspaceId, { limit: q.limit, ...(q.cursor ? { cursor: q.cursor } : {}) });
      const perDay = q.cursor ? undefined : await chargedPerDayByLens(db, workspaceId);
      return reply.header('cache-control', 'no-store').send({ ...page, ...(perDay ? { perDay } : {}) });
    });

    app.get(`${base}/usage.csv`, async (request, reply) => {
      const workspaceId = await member(request);
      const csv = await usageCsv(db, workspaceId);
      return reply
        .header('cache-control', 'no-store')
        .header('content-disposition', `attachment; filename="lenstack-usage-${new Date().toISOString().slice(0, 10)}.csv"`)
        .type('text/csv; charset=utf-8')
        .send(csv);
    });
  };
}
