import type { Client } from '@temporalio/client';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AnalyzeDeps } from '../analysis/service.ts';
import { batchItems, batchSummary, getBatch } from '../batches/repository.ts';
import { retryBatchItem } from '../batches/retry.ts';
import { batchBodySchema, MAX_BATCH_ITEMS, MAX_BATCH_VEHICLES, MAX_VEHICLE_PHOTOS, submitBatch, type BatchSubmission } from '../batches/submit.ts';
import { AppError, validationFailed } from '../core/errors.ts';
import type { Uploads } from '../uploads/service.ts';
import { contextSchema } from '../analysis/contract.ts';
import { SHA256_HEX } from '../images/blobstore.ts';
import { thumbnailOf } from '../images/thumbnail.ts';
import { defaultColumnsFor } from '../lenses/columns.ts';
import { resolveLenses } from '../lenses/resolve.ts';
import { STACKS } from '../lenses/stacks.ts';
import type { LensName } from '../lenses/types.ts';
import { requireMember } from '../accounts/workspaces.ts';

/** Where the console's pages upload batch photos (tus 1.0), through the API's upload service. */
export const CONSOLE_UPLOADS_PATH = '/api/v1/uploads';

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

const workspaceParams = z.object({ workspaceId: z.string().min(1).max(100) });
const batchParams = z.object({ batchId: z.string().min(1).max(100) });
const itemsQuery = z.object({ after: z.coerce.number().int().min(-1).max(100_000).default(-1), limit: z.coerce.number().int().min(1).max(500).default(200) });

export interface ConsoleBatchDeps {
  pipeline: AnalyzeDeps & { temporal: Client; uploads: Uploads };
  /** UPLOAD_QUOTA_BYTES: untaken console uploads one person may hold. */
  personQuotaBytes: number;
}

/**
 * The console's batches beyond the list and its export (web/app.ts): uploads through the shared
 * upload service, a new batch of photos or of vehicles over them, one batch with its items (the
 * batch page), a failed item's retry, and the photos' thumbnails. Everything is the workspace's:
 * a person who is not its member gets 404, whatever exists.
 */
export function registerConsoleBatches(
  app: FastifyInstance,
  deps: ConsoleBatchDeps,
  signedIn: (request: FastifyRequest) => Promise<{ id: string }>,
  parseBody: <T extends z.ZodType>(schema: T, body: unknown) => z.infer<T>,
): void {
  const { pipeline } = deps;
  const db = pipeline.db;
  // A batch spends the workspace's credits: owners and admins, as for keys and purchases.
  const mayStart = (personId: string, workspaceId: string) => requireMember(db, personId, workspaceId, ['owner', 'admin']);
  pipeline.uploads.registerConsole(app, { path: CONSOLE_UPLOADS_PATH, signedIn, mayStart, personQuotaBytes: deps.personQuotaBytes });

  app.post('/api/v1/workspaces/:workspaceId/batches', { bodyLimit: 4 * 1024 * 1024 }, async (request, reply) => {
    const person = await signedIn(request);
    const { workspaceId } = workspaceParams.parse(request.params);
    await mayStart(person.id, workspaceId);
    const body = parseBody(newBatchBody, request.body);
    if ((body.uploads === undefined) === (body.vehicles === undefined)) throw validationFailed('body: send either uploads (photos) or vehicles (groups of uploads), not both');
    const refs = body.uploads
      ? body.uploads.map((u, i) => ({ id: u.id, at: `body.uploads.${i}` }))
      : body.vehicles!.flatMap((v, vi) => v.uploads.map((u, pi) => ({ id: u.id, at: `body.vehicles.${vi}.uploads.${pi}` })));
    if (refs.length > MAX_BATCH_ITEMS) throw validationFailed(`body.vehicles: ${refs.length} photos in all; a batch holds up to ${MAX_BATCH_ITEMS}`);
    // Claimed first: the same uploads sent twice at once start one batch, not two.
    await pipeline.uploads.claim(workspaceId, person.id, refs);
    const ids = refs.map((r) => r.id);
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
    const summary = await submitBatch(pipeline, workspaceId, submission).catch(async (err: unknown) => {
      await pipeline.uploads.release(ids);
      throw err;
    });
    // The photos are in the batch now (by their SHA-256 in the blob store): the uploads no longer
    // count against anyone's quota.
    await pipeline.uploads.remove(workspaceId, ids);
    return reply.code(202).send(summary);
  });

  /** The workspace of a batch the person may see (a member of it), else 404 whether or not it exists. */
  const batchWorkspace = async (personId: string, batchId: string, roles?: Parameters<typeof requireMember>[3]): Promise<{ workspaceId: string; role: string }> => {
    const owner = await db.query<{ user_id: string }>('SELECT user_id FROM batches WHERE id = $1', [batchId]);
    const workspaceId = owner.rows[0]?.user_id;
    const none = () => new AppError('NOT_FOUND', 'No such batch');
    if (!workspaceId) throw none();
    const role = await requireMember(db, personId, workspaceId).catch(() => {
      throw none();
    });
    if (roles && !roles.includes(role)) await requireMember(db, personId, workspaceId, roles);
    return { workspaceId, role };
  };

  // One batch and its items, a page at a time: what the batch page (/batches/:id) shows and polls.
  // Addressed by the batch alone, as its export is: the page learns the workspace from it.
  app.get('/api/v1/batch/:batchId', async (request, reply) => {
    const person = await signedIn(request);
    const { batchId } = batchParams.parse(request.params);
    const q = itemsQuery.safeParse(request.query);
    if (!q.success) throw validationFailed(`query: ${q.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    const { workspaceId, role } = await batchWorkspace(person.id, batchId);
    const batch = await getBatch(db, workspaceId, batchId);
    const summary = await batchSummary(db, workspaceId, batchId);
    const items = [];
    for await (const it of batchItems(db, { userId: workspaceId, batchId, lenses: batch.spec.lenses, afterIndex: q.data.after, limit: q.data.limit })) {
      items.push({
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
    }
    reply.header('cache-control', 'no-store');
    // Retrying spends credits: owners and admins (the page shows members no retry button).
    return { workspaceId, mayRetry: role !== 'member', batch: { ...summary, kind: batch.kind }, items, nextAfter: items.length === q.data.limit ? items[items.length - 1]!.index : null };
  });

  app.post('/api/v1/batch/:batchId/items/:index/retry', async (request, reply) => {
    const person = await signedIn(request);
    const { batchId, index } = batchParams.extend({ index: z.coerce.number().int().min(0).max(100_000) }).parse(request.params);
    const { workspaceId } = await batchWorkspace(person.id, batchId, ['owner', 'admin']);
    return reply.code(202).send(await retryBatchItem(pipeline, workspaceId, batchId, index));
  });

  // A photo's thumbnail, for members of a workspace whose batches (not an item whose photo was erased)
  // or registry hold the photo;
  // anyone else gets 404 whether or not the photo exists. Cached by the browser only (private).
  app.get('/api/v1/workspaces/:workspaceId/thumbnails/:sha256', async (request, reply) => {
    const person = await signedIn(request);
    const { workspaceId, sha256 } = workspaceParams.extend({ sha256: z.string().max(64) }).parse(request.params);
    const none = () => new AppError('NOT_FOUND', 'No such photo in this workspace');
    await requireMember(db, person.id, workspaceId).catch(() => {
      throw none();
    });
    if (!SHA256_HEX.test(sha256)) throw none();
    const held = await db.query(
      `SELECT 1 FROM photos WHERE user_id = $1 AND sha256 = $2
       UNION ALL
       SELECT 1 FROM batch_items i JOIN batches b ON b.id = i.batch_id
        WHERE b.user_id = $1 AND i.erased_at IS NULL AND (i.ref->>'sha256' = $2 OR i.photos @> jsonb_build_array(jsonb_build_object('ref', jsonb_build_object('sha256', $2::text))))
       LIMIT 1`,
      [workspaceId, sha256],
    );
    if (!held.rowCount) throw none();
    const thumb = await thumbnailOf(pipeline, sha256);
    if (!thumb) throw new AppError('NOT_FOUND', 'This photo’s bytes are no longer kept');
    // The same SHA-256 is always the same picture: cached for a day, never shared by proxies.
    return reply.header('cache-control', 'private, max-age=86400, immutable').type('image/webp').send(thumb.webp);
  });

  // What a batch can run, for the console's picker: the stacks with the export columns each offers.
  app.get('/api/v1/catalog', async (request) => {
    await signedIn(request);
    const columnsOf = (preset: string, vehicles: boolean) =>
      defaultColumnsFor(vehicles ? ['vehicle-condition'] : (resolveLenses({ preset }).lenses as LensName[]));
    return {
      stacks: STACKS.filter((st) => st.name !== 'vehicle-condition').map((st) => ({ name: st.name, description: st.description, columns: columnsOf(st.name, false) })),
      vehicles: { stack: 'vehicle-condition', maxPhotos: MAX_VEHICLE_PHOTOS, maxVehicles: MAX_BATCH_VEHICLES, columns: columnsOf('vehicle-condition', true) },
      batches: true,
    };
  });
}
