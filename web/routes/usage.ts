import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { validationFailed } from '../core/errors.ts';
import type { Db } from '../db/pool.ts';
import { chargedPerDayByLens, usageCsv, usageRows } from '../credits/usage.ts';
import { listRequests, requestDetail, requestOperations } from '../requestlog/repository.ts';
import { requireMember } from '../accounts/workspaces.ts';

const workspace = z.object({ workspaceId: z.string().min(1).max(100) });
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
const usageQuery = z.strictObject({ cursor: z.string().min(1).max(40).optional(), limit });

function parse<T extends z.ZodType>(what: string, schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value ?? {});
  if (!parsed.success) throw validationFailed(`${what}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

/**
 * The console's Requests and Usage & billing sections (docs/decisions.md "The console's Requests
 * log", "Usage & billing"); every member of a workspace sees both, another workspace's are 404.
 * - `GET …/requests?status=ok|error|<code>&key=&operation=&from=&to=&cursor=&limit=`: the last 30
 *   days of API requests by the workspace's keys, newest first, keyset-paginated (`next`);
 * - `GET …/requests/{id}`: one of them with its error envelope or its stored analysis;
 * - `GET …/usage?cursor=&limit=`: one row per analysis, batch or purchase, and on the first page
 *   the charges per day split by lens;
 * - `GET …/usage.csv`: the same rows as a spreadsheet.
 */
export function registerUsageRoutes(app: FastifyInstance, db: Db, signedIn: (request: FastifyRequest) => Promise<{ id: string }>): void {
  const base = '/api/v1/workspaces/:workspaceId';
  const member = async (request: FastifyRequest) => {
    const person = await signedIn(request);
    const { workspaceId } = parse('path', workspace, request.params);
    await requireMember(db, person.id, workspaceId);
    return workspaceId;
  };

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
}
