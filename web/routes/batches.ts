import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { requireMember } from '../../accounts/workspaces.ts';
import { contextSchema } from '../../analysis/contract.ts';
import { requestFingerprint } from '../../analysis/request-binding.ts';
import { callerRequestId } from '../../api/request-id.ts';
import { ExportSlots, prepareBatchExport, sendBatchExport } from '../../batches/export.ts';
import { batchItems, batchOwner, batchSummary, getBatch, recentBatches, type BatchItemRow } from '../../batches/repository.ts';
import { retryBatchItem } from '../../batches/retry.ts';
import { submitConsoleBatch } from '../../batches/console-submit.ts';
import { batchBodySchema, MAX_BATCH_ITEMS, MAX_BATCH_VEHICLES, MAX_VEHICLE_PHOTOS, type BatchSubmission } from '../../batches/submit.ts';
import { EVENT_STREAM_HEADERS, eventStream } from '../../core/event-stream.ts';
import { AppError, validationFailed } from '../../core/errors.ts';
import { defaultColumnsFor } from '../../lenses/columns.ts';
import { resolveLenses } from '../../lenses/resolve.ts';
import { STACKS } from '../../lenses/stacks.ts';
import type { LensName } from '../../lenses/types.ts';
import type { WebContext } from '../deps.ts';
import { parse, parseBody, workspaceParams } from '../plugins/validation.ts';

/**
 * A VIN as the console accepts it (docs/decisions.md "Console vehicle batches"): the 17 characters
 * of ISO 3779, letters and digits without I, O and Q. Checked in the browser before anything is
 * uploaded, and here again.
 */
export const VIN = /^[A-HJ-NPR-Z0-9]{17}$/;

const upload = z.strictObject({ id: z.string().min(1).max(100), name: z.string().min(1).max(500).refine((n) => !/[\r\n]/.test(n), 'must be one line') });
const vehicleBody = z.strictObject({
  name: z.string().trim().min(1).max(200).refine((n) => !/[\r\n]/.test(n), 'must be one line').optional(),
  vehicle: contextSchema.shape.vehicle.unwrap().extend({
    vin: z.string().regex(VIN, 'must be the 17 characters of a VIN (letters and digits, no I, O or Q)').optional(),
    make: z.string().max(100).refine((n) => !/[\r\n]/.test(n), 'must be one line').optional(),
    model: z.string().max(100).refine((n) => !/[\r\n]/.test(n), 'must be one line').optional(),
  }).optional(),
  uploads: z.array(upload).min(1).max(MAX_VEHICLE_PHOTOS),
});
const newBatchBody = batchBodySchema.pick({ preset: true, modules: true, columns: true }).extend({
  uploads: z.array(upload).min(1).max(MAX_BATCH_ITEMS).optional(),
  vehicles: z.array(vehicleBody).min(1).max(MAX_BATCH_VEHICLES).optional(),
});

const batchParams = z.object({ batchId: z.string().min(1).max(100) });
/** Failed items the batch page's first answer carries ahead of its pages. */
const FAILED_FIRST = 200;

const itemsQuery = z.object({ after: z.coerce.number().int().min(-1).max(100_000).default(-1), limit: z.coerce.number().int().min(1).max(500).default(200) });

/** Open live batch lists per person, on each console process. */
const MAX_STREAMS_PER_PERSON = 3;

/**
 * The console's batches. Everything is the workspace's: a person who is not its member gets 404,
 * whatever exists.
 * - `GET …/workspaces/{id}/batches`: the recent batches; `…/batches/events`: the same list pushed as
 *   server-sent events while any of them runs (checked every second, sent when it changes; at most
 *   3 open streams per person and process);
 * - `POST …/workspaces/{id}/batches`: a new batch of photos or of vehicles over the person's finished
 *   uploads (web/routes/uploads.ts); the same submission as POST /v1/batches from there on;
 * - `GET /api/v1/batch/{id}`: one batch with its items (the batch page), `POST …/items/{n}/retry`,
 *   `GET …/export` (the spec's batch export);
 * - `GET /api/v1/catalog`: what a batch can run, for the console's picker.
 */
export function batchRoutes(ctx: WebContext): FastifyPluginAsync {
  const { deps, signedIn } = ctx;
  const { db } = deps;
  return async (app) => {
    app.get('/api/v1/workspaces/:workspaceId/batches', async (request) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', workspaceParams, request.params);
      await requireMember(db, person.id, workspaceId);
      return { batches: await recentBatches(db, workspaceId) };
    });

    const streams = new Map<string, number>();
    app.get('/api/v1/workspaces/:workspaceId/batches/events', async (request, reply) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', workspaceParams, request.params);
      await requireMember(db, person.id, workspaceId);
      const open = streams.get(person.id) ?? 0;
      if (open >= MAX_STREAMS_PER_PERSON) throw new AppError('RATE_LIMITED', 'At most 3 live batch lists at once; close another tab');
      streams.set(person.id, open + 1);
      const { body } = eventStream({
        client: request.raw,
        everyMs: 1000,
        heartbeat: { afterMs: 15_000, comment: 'nothing new' },
        async tick(sink) {
          // A person removed from the workspace stops hearing about it at once, open stream or not.
          if (!(await requireMember(db, person.id, workspaceId).then(() => true, () => false))) return false;
          const batches = await recentBatches(db, workspaceId);
          sink.sendIfChanged('batches', batches);
          if (batches.some((b) => b.status === 'running')) return true;
          sink.send('end', { reason: 'none-running' });
          return false;
        },
        onError: (err) => request.log.warn({ err }, 'batch list stream stopped'),
        onEnd: () => {
          const left = (streams.get(person.id) ?? 1) - 1;
          if (left > 0) streams.set(person.id, left);
          else streams.delete(person.id);
        },
      });
      return reply.headers(EVENT_STREAM_HEADERS).send(body);
    });

    /** The workspace of a batch the person may see (a member of it), else 404 whether or not it exists. */
    const batchWorkspace = async (personId: string, batchId: string, roles?: Parameters<typeof requireMember>[3]): Promise<{ workspaceId: string; role: string }> => {
      const workspaceId = await batchOwner(db, batchId);
      const none = () => new AppError('NOT_FOUND', 'No such batch');
      if (!workspaceId) throw none();
      const role = await requireMember(db, personId, workspaceId).catch(() => {
        throw none();
      });
      if (roles && !roles.includes(role)) await requireMember(db, personId, workspaceId, roles);
      return { workspaceId, role };
    };

    // The spec's batch export: the batch belongs to a workspace; a person who is not its member gets
    // 404, as for anything else of another workspace.
    const exportSlots = new ExportSlots(deps.config);
    app.get('/api/v1/batch/:batchId/export', async (request, reply) => {
      const person = await signedIn(request);
      const { batchId } = parse('path', batchParams, request.params);
      const format = (request.query as { format?: unknown }).format;
      const { workspaceId } = await batchWorkspace(person.id, batchId);
      return sendBatchExport(request, reply, batchId, await prepareBatchExport(db, workspaceId, batchId, format, exportSlots));
    });

    const pipeline = deps.batches?.pipeline;
    if (!pipeline) {
      // Without the batch pipeline the picker says so, and nothing else of batches is served.
      app.get('/api/v1/catalog', async (request) => {
        await signedIn(request);
        return { stacks: [], vehicles: null, batches: false };
      });
      return;
    }

    // A batch spends the workspace's credits: owners and admins, as for keys and purchases.
    app.post('/api/v1/workspaces/:workspaceId/batches', { bodyLimit: 4 * 1024 * 1024 }, async (request, reply) => {
      const person = await signedIn(request);
      const { workspaceId } = parse('path', workspaceParams, request.params);
      await requireMember(db, person.id, workspaceId, ['owner', 'admin']);
      const body = parseBody(newBatchBody, request.body);
      if ((body.uploads === undefined) === (body.vehicles === undefined)) throw validationFailed('body: send either uploads (photos) or vehicles (groups of uploads), not both');
      const refs = body.uploads
        ? body.uploads.map((u, i) => ({ id: u.id, at: `body.uploads.${i}` }))
        : body.vehicles!.flatMap((v, vi) => v.uploads.map((u, pi) => ({ id: u.id, at: `body.vehicles.${vi}.uploads.${pi}` })));
      if (refs.length > MAX_BATCH_ITEMS) throw validationFailed(`body.vehicles: ${refs.length} photos in all; a batch holds up to ${MAX_BATCH_ITEMS}`);
      // The browser sends each submission with an x-request-id: the same submission sent again (its
      // answer was lost, or its process died holding the uploads) gets the batch it made, never a
      // 400 or a second batch (docs/decisions.md, "Console batches: one request id, one batch").
      const given = callerRequestId(request.headers['x-request-id']);
      const binding = given ? { id: given, hash: requestFingerprint(body) } : undefined;
      const submission: BatchSubmission = {
        ...(body.preset !== undefined ? { preset: body.preset } : {}),
        ...(body.modules !== undefined ? { modules: body.modules } : {}),
        ...(body.columns !== undefined ? { columns: body.columns } : {}),
        ...(body.uploads
          ? { items: body.uploads.map((u) => ({ uploadId: u.id, name: u.name })) }
          : {
              vehicles: body.vehicles!.map((v) => ({
                ...(v.name ? { name: v.name } : {}),
                ...(v.vehicle && Object.keys(v.vehicle).length ? { vehicle: v.vehicle } : {}),
                items: v.uploads.map((u) => ({ uploadId: u.id, name: u.name })),
              })),
            }),
      };
      const summary = await submitConsoleBatch(pipeline, {
        workspaceId,
        personId: person.id,
        refs,
        submission,
        ...(binding ? { binding } : {}),
        onLeftover: (err) => request.log.warn({ err }, 'batch made; its uploads are left to expire'),
      });
      return reply.code(202).send(summary);
    });

    // One batch and its items, a page at a time: what the batch page (/batches/:id) shows and polls.
    // Addressed by the batch alone, as its export is: the page learns the workspace from it.
    app.get('/api/v1/batch/:batchId', async (request, reply) => {
      const person = await signedIn(request);
      const { batchId } = parse('path', batchParams, request.params);
      const q = itemsQuery.safeParse(request.query);
      if (!q.success) throw validationFailed(`query: ${q.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
      const { workspaceId, role } = await batchWorkspace(person.id, batchId);
      const batch = await getBatch(db, workspaceId, batchId);
      const summary = await batchSummary(db, workspaceId, batchId);
      const toItem = (it: BatchItemRow) => ({
          index: it.index,
          source: it.source,
          sha256: it.sha256,
          status: it.status,
          error: it.errorCode ? { code: it.errorCode, message: it.error ?? '' } : null,
          creditsCharged: it.credits,
          lenses: it.byLens,
          report: batch.kind === 'vehicles' ? it.output : null,
          photos: it.photos,
        });
      const items = [];
      for await (const it of batchItems(db, { accountId: workspaceId, batchId, lenses: batch.spec.lenses, afterIndex: q.data.after, limit: q.data.limit })) items.push(toItem(it));
      // The first page also carries the batch's first failed items wherever they are (what needs the
      // person is shown first, not only the failures of the pages loaded); the rest are in the pages.
      const failed = [];
      if (q.data.after === -1 && summary.counts.failed > 0) {
        for await (const it of batchItems(db, { accountId: workspaceId, batchId, lenses: batch.spec.lenses, limit: FAILED_FIRST, status: 'failed' })) failed.push(toItem(it));
      }
      reply.header('cache-control', 'no-store');
      // Retrying spends credits: owners and admins (the page shows members no retry button).
      return { workspaceId, mayRetry: role !== 'member', batch: { ...summary, kind: batch.kind }, failed, items, nextAfter: items.length === q.data.limit ? items[items.length - 1]!.index : null };
    });

    app.post('/api/v1/batch/:batchId/items/:index/retry', async (request, reply) => {
      const person = await signedIn(request);
      const { batchId, index } = parse('path', batchParams.extend({ index: z.coerce.number().int().min(0).max(100_000) }), request.params);
      const { workspaceId } = await batchWorkspace(person.id, batchId, ['owner', 'admin']);
      return reply.code(202).send(await retryBatchItem(pipeline, workspaceId, batchId, index));
    });

    // What a batch can run, for the console's picker: the stacks with the export columns each offers.
    app.get('/api/v1/catalog', async (request) => {
      await signedIn(request);
      const columnsOf = (stack: string, vehicles: boolean) =>
        defaultColumnsFor(vehicles ? ['vehicle-condition'] : (resolveLenses({ preset: stack }).lenses as LensName[]));
      return {
        stacks: STACKS.filter((st) => st.name !== 'vehicle-condition').map((st) => ({ name: st.name, description: st.description, columns: columnsOf(st.name, false) })),
        vehicles: { stack: 'vehicle-condition', maxPhotos: MAX_VEHICLE_PHOTOS, maxVehicles: MAX_BATCH_VEHICLES, columns: columnsOf('vehicle-condition', true) },
        batches: true,
      };
    });
  };
}
