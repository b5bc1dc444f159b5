import { EVENT_STREAM_HEADERS, eventStream } from '../../core/event-stream.ts';
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { EXPORT_CONTENT_TYPES, EXPORT_FORMATS, ExportSlots, prepareBatchExport, sendBatchExport } from '../../batches/export.ts';
import { batchItems, batchSummary, getBatch, itemSha256s, retryItem, setBatchStatus } from '../../batches/repository.ts';
import { MAX_STREAMS_PER_ACCOUNT, MAX_STREAMS_PER_PERSON, keyCreatorOf, Slots, slotsFull } from '../../batches/slots.ts';
import { retryBatchItem } from '../../batches/retry.ts';
import { batchBodySchema, batchWorkflowId, startBatchWorkflow, submitBatch } from '../../batches/submit.ts';
import { batchItemOutputSchema, timestampSchema } from '../../analysis/contract.ts';
import { requestFingerprint } from '../../analysis/request-binding.ts';
import { AppError, validationFailed, type ErrorCode } from '../../core/errors.ts';
import { cancelBatch, pauseBatch, resumeBatch } from '../../workflows/batch.ts';
import type { AppDeps } from '../deps.ts';
import { principalOf } from '../plugins/auth.ts';
import { errorCodeSchema, errorResponses } from '../schemas/common.ts';

const batchSchema = z
  .object({
    object: z.literal('batch'),
    id: z.string(),
    kind: z.enum(['photos', 'vehicles']).describe('`vehicles`: each item is a vehicle (its photos, one report); counts count vehicles'),
    status: z.enum(['running', 'paused', 'cancelled', 'completed']),
    pauseReason: z.enum(['requested', 'credits']).nullable().describe('Why a paused batch waits; `credits`: buy credits, then resume'),
    stack: z.string().nullable(),
    lenses: z.array(z.string()),
    counts: z.object({ total: z.int(), done: z.int(), failed: z.int(), pending: z.int() }),
    creditsCharged: z.int(),
    etaSeconds: z.int().nullable().describe('Seconds until the pending photos are done at the pace so far; null while paused, before the first photo finished, or when nothing is pending'),
    createdAt: timestampSchema,
    updatedAt: timestampSchema,
    completedAt: timestampSchema.nullable(),
  })
  .meta({ id: 'Batch' });

const itemSchema = z
  .object({
  index: z.int(),
  source: z.string(),
  sha256: z.string().nullable(),
  status: z.enum(['pending', 'done', 'failed']),
  error: z.object({ code: errorCodeSchema, message: z.string() }).nullable(),
  creditsCharged: z.int(),
  output: batchItemOutputSchema.nullable().describe('A photo: its lens outputs merged. A vehicle: its report (`reportId` and the vehicle-condition output)'),
  photos: z.array(z.object({ source: z.string(), sha256: z.string().nullable() })).nullable().describe('A vehicle’s photos in submission order; null for a photo item'),
  })
  .meta({ id: 'BatchItem' });

/** One element of a JSON export (exports/table.ts exportJsonItem). */
const exportRowSchema = z
  .object({
    index: z.int(),
    source: z.string(),
    status: z.enum(['done', 'failed', 'pending']),
    sha256: z.string().nullable(),
    error: z.string().nullable().describe('`CODE: message` for a failed photo'),
    output: z.record(z.string(), z.unknown()).nullable().describe('The photo’s lens outputs, without moderation details or internal identifiers'),
  })
  .meta({ id: 'BatchExportRow' });

const params = z.object({ batchId: z.string().min(1).max(100) });

/**
 * Batches over the API with a Bearer key (an extension of the spec's console batches): submit up
 * to 10,000 photos, follow them, pause, resume or cancel, page through results, export them.
 */
export function batchRoutes(deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    const route = app.withTypeProvider<ZodTypeProvider>();
    // Event streams (each reads the batch twice a second) and exports held open on this process.
    const streams = new Slots();
    const exports = new ExportSlots(deps.config);
    const liveAccount = (request: Parameters<typeof principalOf>[0]): string => {
      const p = principalOf(request);
      if (p.sandbox || !p.accountId) throw validationFailed('Authorization: batches run with a live key (svc_live_…); sandbox keys answer POST /v1/analyze with fixtures');
      return p.accountId;
    };
    const pipeline = () => deps;

    route.post(
      '/v1/batches',
      {
        config: { auth: 'key' },
        bodyLimit: deps.config.MAX_BODY_BYTES,
        schema: {
          operationId: 'createBatch',
          summary: 'Submit a batch of photos',
          description:
            'Up to 10,000 photos (URLs or base64) through the same lenses, run in the background by a durable workflow. Every photo is billed like a single analysis (lenses already run on it are free), as it runs: a batch that runs out of credits pauses with `pauseReason: "credits"`; buy credits and resume it. A batch is taken in only when the available credits cover one item (its billable lenses, at least 1; a vehicle report\'s price): otherwise 402 `PLAN_LIMIT_EXCEEDED` before any photo is read. A batch paused longer than `BATCH_PAUSED_EXPIRY_MS` (7 days by default) is cancelled. A photo that cannot be fetched or decoded fails on its own, with the reason. Answers 202 with the batch.',
          tags: ['batches'],
          security: [{ bearer: [] }],
          body: batchBodySchema,
          response: { 202: batchSchema, ...errorResponses(400, 401, 402, 404, 409, 413, 415, 429, 503) },
        },
      },
      async (request, reply) => {
        const accountId = liveAccount(request);
        const summary = await submitBatch(pipeline(), accountId, request.body, { id: request.id, hash: requestFingerprint(request.body) });
        const used = [...(request.body.items ?? []), ...(request.body.vehicles ?? []).flatMap((v) => v.items)].flatMap((it) => (it.uploadId ? [it.uploadId] : []));
        await deps.uploads?.touch(accountId, used);
        return reply.code(202).send({ object: 'batch' as const, ...summary });
      },
    );

    route.get(
      '/v1/batches/:batchId',
      { config: { auth: 'key' }, schema: { operationId: 'getBatch', summary: 'A batch and its progress', tags: ['batches'], security: [{ bearer: [] }], params, response: { 200: batchSchema, ...errorResponses(400, 401, 404) } } },
      async (request) => ({ object: 'batch' as const, ...(await batchSummary(deps.db, liveAccount(request), request.params.batchId)) }),
    );

    for (const [action, signal] of [['pause', pauseBatch], ['resume', resumeBatch], ['cancel', cancelBatch]] as const) {
      route.post(
        `/v1/batches/:batchId/${action}`,
        {
          config: { auth: 'key' },
          schema: {
            operationId: `${action}Batch`,
            summary: `${action[0]!.toUpperCase()}${action.slice(1)} a batch`,
            description: action === 'cancel' ? 'Photos already running finish (and are billed); the rest fail with `BATCH_FINISHED` and are never run, and their bytes are not kept.' : action === 'pause' ? 'Photos already running finish; the rest wait for resume, for up to `BATCH_PAUSED_EXPIRY_MS` (7 days by default): then the batch is cancelled.' : 'Runs the pending photos again, including those that waited for credits.',
            tags: ['batches'],
            security: [{ bearer: [] }],
            params,
            response: { 202: batchSchema, ...errorResponses(400, 401, 404, 409) },
          },
        },
        async (request, reply) => {
          const accountId = liveAccount(request);
          const batch = await getBatch(deps.db, accountId, request.params.batchId);
          if (batch.status === 'completed' || batch.status === 'cancelled') throw new AppError('BATCH_FINISHED', `The batch is ${batch.status}; it cannot be ${action}d`);
          await pipeline().temporal.workflow.getHandle(batchWorkflowId(accountId, batch.id)).signal(signal);
          return reply.code(202).send({ object: 'batch' as const, ...(await batchSummary(deps.db, accountId, batch.id)) });
        },
      );
    }

    route.post(
      '/v1/batches/:batchId/items/:index/retry',
      {
        config: { auth: 'key' },
        schema: {
          operationId: 'retryBatchItem',
          summary: 'Run a failed photo of a batch again',
          description: 'The photo goes back to pending and runs with the batch (a completed batch starts again for it). Only failed photos whose bytes are kept can run again; a photo intake refused was never stored.',
          tags: ['batches'],
          security: [{ bearer: [] }],
          params: params.extend({ index: z.coerce.number().int().min(0).max(100_000) }),
          response: { 202: batchSchema, ...errorResponses(400, 401, 404, 409) },
        },
      },
      async (request, reply) => {
        const accountId = liveAccount(request);
        const summary = await retryBatchItem(pipeline(), accountId, request.params.batchId, request.params.index);
        return reply.code(202).send({ object: 'batch' as const, ...summary });
      },
    );

    // Progress pushed as server-sent events: the batch as GET /v1/batches/{id} answers it, sent
    // when it changes (checked twice a second), until it completes or is cancelled.
    route.get(
      '/v1/batches/:batchId/events',
      {
        config: { auth: 'key' },
        schema: {
          operationId: 'streamBatchEvents',
          summary: 'Follow a batch as server-sent events',
          description:
            'An `event: batch` with the batch (as GET /v1/batches/{id}) whenever it changes, and a comment every 15 s to keep proxies from closing the stream. The stream ends once the batch is no longer running — completed, cancelled or paused (resume it and open the stream again) — with an `event: end` whose data says why: `{"reason": "completed" | "cancelled" | "paused", "pauseReason": "requested" | "credits" | null}`. At most 5 open streams per account, and 5 per person who made the keys (over all their workspaces), on each API process: beyond that 429 with Retry-After.',
          tags: ['batches'],
          security: [{ bearer: [] }],
          params,
          response: {
            200: {
              description: 'The event stream: `event: batch` lines whose `data` is the batch (the `Batch` schema) as JSON, then one `event: end`',
              content: {
                'text/event-stream': {
                  // A stream is text to a generator; its events' payload is named beside it, by reference.
                  schema: z.string().meta({
                    id: 'BatchEventStream',
                    description: 'Server-sent events: `event: batch` with `data` a `Batch` as JSON, at every change; then `event: end`.',
                    'x-event-data': { batch: { $ref: '#/components/schemas/Batch' } },
                  }),
                },
              },
            },
            ...errorResponses(400, 401, 404, 429),
          },
        },
      },
      async (request, reply) => {
        const accountId = liveAccount(request);
        const first = await batchSummary(deps.db, accountId, request.params.batchId);
        const creator = await keyCreatorOf(deps.db, principalOf(request).keyId);
        const slot = streams.take([{ key: `account:${accountId}`, max: MAX_STREAMS_PER_ACCOUNT }, ...(creator ? [{ key: `person:${creator}`, max: MAX_STREAMS_PER_PERSON }] : [])]);
        if ('full' in slot) {
          throw slotsFull(
            'RATE_LIMITED',
            slot.full.startsWith('account:')
              ? `At most ${MAX_STREAMS_PER_ACCOUNT} batch event streams at once per account; close one or poll GET /v1/batches/{id}`
              : `At most ${MAX_STREAMS_PER_PERSON} batch event streams at once for the person who made this key, over all their workspaces; close one or poll GET /v1/batches/{id}`,
          );
        }
        let summary = first;
        let round = 0;
        const { body } = eventStream({
          client: request.raw,
          everyMs: 500,
          heartbeat: { afterMs: 15_000, comment: 'still running' },
          async tick(sink) {
            if (round++ > 0) summary = await batchSummary(deps.db, accountId, request.params.batchId);
            // Sent when it changes; the estimate and the update time alone do not make a change.
            sink.sendIfChanged('batch', { object: 'batch', ...summary }, { object: 'batch', ...summary, etaSeconds: null, updatedAt: null });
            // A paused batch ends the stream too: it may wait for credits for days, and a stream
            // held open that long is a slot nobody uses. The caller resumes it and opens another.
            if (summary.status === 'running') return true;
            sink.send('end', { reason: summary.status, pauseReason: summary.pauseReason });
            return false;
          },
          onError: (err) => request.log.warn({ err }, 'batch event stream stopped'),
          onEnd: () => slot.release(),
        });
        return reply.headers(EVENT_STREAM_HEADERS).send(body as never);
      },
    );

    route.get(
      '/v1/batches/:batchId/items',
      {
        config: { auth: 'key' },
        schema: {
          operationId: 'listBatchItems',
          summary: 'A batch’s photos and their results, in order',
          tags: ['batches'],
          security: [{ bearer: [] }],
          params,
          querystring: z.object({ after: z.coerce.number().int().min(-1).default(-1).describe('Index of the last item of the previous page'), limit: z.coerce.number().int().min(1).max(500).default(100) }),
          response: { 200: z.object({ items: z.array(itemSchema), nextAfter: z.int().nullable().describe('Pass as `after` for the next page; null on the last page') }).meta({ id: 'BatchItemsPage' }), ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => {
        const accountId = liveAccount(request);
        const batch = await getBatch(deps.db, accountId, request.params.batchId);
        const items = [];
        for await (const it of batchItems(deps.db, { accountId, batchId: batch.id, lenses: batch.spec.lenses, afterIndex: request.query.after, limit: request.query.limit })) {
          items.push({
            index: it.index,
            source: it.source,
            sha256: it.sha256,
            status: it.status,
            error: it.errorCode ? { code: it.errorCode as ErrorCode, message: it.error ?? '' } : null,
            creditsCharged: it.credits,
            output: it.output,
            photos: it.photos,
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
          operationId: 'exportBatch',
          summary: 'Export a batch as xlsx, csv or json',
          description: 'The columns chosen at submit time, or the default columns of the batch’s lenses, after the identity columns (#, Source, Status, SHA-256, Error). Every csv field is quoted; line breaks in a cell become LF and other control characters spaces; a cell or a line of it that a spreadsheet would run as a formula is prefixed with an apostrophe; the xlsx holds no formula cells. JSON leaves out moderation details and internal identifiers. Streamed. At most 2 exports at once per account (429) and a few per API process (503), each with Retry-After.',
          tags: ['batches'],
          security: [{ bearer: [] }],
          params,
          querystring: z.object({ format: z.string().max(20).optional().meta({ enum: [...EXPORT_FORMATS] }) }),
          response: {
            200: {
              description: 'The export, streamed, as an attachment',
              content: {
                [EXPORT_CONTENT_TYPES.xlsx]: { schema: z.string().meta({ contentMediaType: EXPORT_CONTENT_TYPES.xlsx }) },
                'text/csv': { schema: z.string() },
                'application/json': { schema: z.array(exportRowSchema) },
              },
            },
            ...errorResponses(400, 401, 404, 429, 503),
          },
        },
      },
      async (request, reply) => {
        const accountId = liveAccount(request);
        const exp = await prepareBatchExport(deps.db, accountId, request.params.batchId, request.query.format, exports);
        return sendBatchExport(request, reply, request.params.batchId, exp);
      },
    );
  };
}
