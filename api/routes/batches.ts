import { PassThrough } from 'node:stream';
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { EXPORT_CONTENT_TYPES, EXPORT_FORMATS, prepareBatchExport } from '../../batches/export.ts';
import { batchItems, batchSummary, getBatch } from '../../batches/repository.ts';
import { batchBodySchema, batchWorkflowId, submitBatch } from '../../batches/submit.ts';
import { AppError, validationFailed } from '../../core/errors.ts';
import { cancelBatch, pauseBatch, resumeBatch } from '../../workflows/batch.ts';
import type { AppDeps } from '../deps.ts';
import { principalOf } from '../plugins/auth.ts';
import { errorResponses } from '../schemas/common.ts';

const batchSchema = z
  .object({
    object: z.literal('batch'),
    id: z.string(),
    status: z.enum(['running', 'paused', 'cancelled', 'completed']),
    pauseReason: z.enum(['requested', 'credits']).nullable().describe('Why a paused batch waits; `credits`: buy credits, then resume'),
    stack: z.string().nullable(),
    lenses: z.array(z.string()),
    counts: z.object({ total: z.int(), done: z.int(), failed: z.int(), pending: z.int() }),
    creditsCharged: z.int(),
    createdAt: z.string(),
    updatedAt: z.string(),
    completedAt: z.string().nullable(),
  })
  .meta({ id: 'Batch' });

const itemSchema = z.object({
  index: z.int(),
  source: z.string(),
  sha256: z.string().nullable(),
  status: z.enum(['pending', 'done', 'failed']),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  creditsCharged: z.int(),
  output: z.record(z.string(), z.unknown()).nullable(),
});

const params = z.object({ batchId: z.string().min(1).max(100) });

/**
 * Batches over the API with a Bearer key (an extension of the spec's console batches): submit up
 * to 10,000 photos, follow them, pause, resume or cancel, page through results, export them.
 */
export function batchRoutes(deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    const route = app.withTypeProvider<ZodTypeProvider>();
    const liveUser = (request: Parameters<typeof principalOf>[0]): string => {
      const p = principalOf(request);
      if (p.sandbox || !p.userId) throw validationFailed('Authorization: batches run with a live key (svc_live_…); sandbox keys answer POST /v1/analyze with fixtures');
      return p.userId;
    };
    const pipeline = () => {
      if (!deps.temporal) throw new AppError('SERVICE_UNAVAILABLE', 'The analysis pipeline is not connected');
      return { ...deps, temporal: deps.temporal };
    };

    route.post(
      '/v1/batches',
      {
        config: { auth: 'key' },
        bodyLimit: deps.config.MAX_BODY_BYTES,
        schema: {
          summary: 'Submit a batch of photos',
          description:
            'Up to 10,000 photos (URLs or base64) through the same lenses, run in the background by a durable workflow. Every photo is billed like a single analysis (lenses already run on it are free), as it runs: a batch that runs out of credits pauses with `pauseReason: "credits"`; buy credits and resume it. A photo that cannot be fetched or decoded fails on its own, with the reason. Answers 202 with the batch.',
          tags: ['batches'],
          security: [{ bearer: [] }],
          body: batchBodySchema,
          response: { 202: batchSchema, ...errorResponses(400, 401, 413, 415, 429, 503) },
        },
      },
      async (request, reply) => {
        const userId = liveUser(request);
        const summary = await submitBatch(pipeline(), userId, request.body);
        return reply.code(202).send({ object: 'batch' as const, ...summary });
      },
    );

    route.get(
      '/v1/batches/:batchId',
      { config: { auth: 'key' }, schema: { summary: 'A batch and its progress', tags: ['batches'], security: [{ bearer: [] }], params, response: { 200: batchSchema, ...errorResponses(400, 401, 404) } } },
      async (request) => ({ object: 'batch' as const, ...(await batchSummary(deps.db, liveUser(request), request.params.batchId)) }),
    );

    for (const [action, signal] of [['pause', pauseBatch], ['resume', resumeBatch], ['cancel', cancelBatch]] as const) {
      route.post(
        `/v1/batches/:batchId/${action}`,
        {
          config: { auth: 'key' },
          schema: {
            summary: `${action[0]!.toUpperCase()}${action.slice(1)} a batch`,
            description: action === 'cancel' ? 'Photos already running finish (and are billed); the rest stay pending and are never run.' : action === 'pause' ? 'Photos already running finish; the rest wait for resume.' : 'Runs the pending photos again, including those that waited for credits.',
            tags: ['batches'],
            security: [{ bearer: [] }],
            params,
            response: { 202: batchSchema, ...errorResponses(400, 401, 404, 409) },
          },
        },
        async (request, reply) => {
          const userId = liveUser(request);
          const batch = await getBatch(deps.db, userId, request.params.batchId);
          if (batch.status === 'completed' || batch.status === 'cancelled') throw new AppError('BATCH_FINISHED', `The batch is ${batch.status}; it cannot be ${action}d`);
          await pipeline().temporal.workflow.getHandle(batchWorkflowId(userId, batch.id)).signal(signal);
          return reply.code(202).send({ object: 'batch' as const, ...(await batchSummary(deps.db, userId, batch.id)) });
        },
      );
    }

    route.get(
      '/v1/batches/:batchId/items',
      {
        config: { auth: 'key' },
        schema: {
          summary: 'A batch’s photos and their results, in order',
          tags: ['batches'],
          security: [{ bearer: [] }],
          params,
          querystring: z.object({ after: z.coerce.number().int().min(-1).default(-1).describe('Index of the last item of the previous page'), limit: z.coerce.number().int().min(1).max(500).default(100) }),
          response: { 200: z.object({ items: z.array(itemSchema), nextAfter: z.int().nullable() }), ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => {
        const userId = liveUser(request);
        const batch = await getBatch(deps.db, userId, request.params.batchId);
        const items = [];
        for await (const it of batchItems(deps.db, { userId, batchId: batch.id, lenses: batch.spec.lenses, afterIndex: request.query.after, limit: request.query.limit })) {
          items.push({
            index: it.index,
            source: it.source,
            sha256: it.sha256,
            status: it.status,
            error: it.errorCode ? { code: it.errorCode, message: it.error ?? '' } : null,
            creditsCharged: it.credits,
            output: it.outputs ? (Object.assign({}, ...Object.values(it.outputs)) as Record<string, unknown>) : null,
          });
        }
        return { items, nextAfter: items.length === request.query.limit ? items[items.length - 1]!.index : null };
      },
    );

    route.get(
      '/v1/batches/:batchId/export',
      {
        config: { auth: 'key' },
        schema: {
          summary: 'Export a batch as xlsx, csv or json',
          description: 'The columns chosen at submit time, or the default columns of the batch’s lenses, after the identity columns (#, Source, Status, SHA-256, Error). Text a spreadsheet would run as a formula is prefixed with an apostrophe. JSON leaves out moderation details and internal identifiers. Streamed.',
          tags: ['batches'],
          security: [{ bearer: [] }],
          params,
          querystring: z.object({ format: z.string().max(20).optional().meta({ enum: [...EXPORT_FORMATS] }) }),
          response: errorResponses(400, 401, 404),
        },
      },
      async (request, reply) => {
        const userId = liveUser(request);
        const exp = await prepareBatchExport(deps.db, userId, request.params.batchId, request.query.format);
        const body = new PassThrough();
        exp.write(body).catch((err: unknown) => {
          request.log.error({ err }, 'batch export failed mid-stream');
          body.destroy(err as Error);
        });
        return reply
          .type(EXPORT_CONTENT_TYPES[exp.format])
          .header('content-disposition', `attachment; filename="${request.params.batchId.replace(/[^A-Za-z0-9_-]/g, '')}.${exp.format}"`)
          .header('cache-control', 'no-store')
          .send(body as never);
      },
    );
  };
}
