import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { z } from 'zod';
import { anyLensNameSchema, contextSchema, lensNameSchema, MAX_BASE64_CHARS, MAX_URL_CHARS, stackNameSchema, uploadIdSchema } from '../analysis/contract.ts';
import { takeBatchPhoto } from '../registry/intake.ts';
import { awaitedUploads, UPLOAD_ID } from '../uploads/service.ts';
import { resolveUploadInputs, type AnalyzeDeps } from '../analysis/service.ts';
import type { ImageInput } from '../analysis/request.ts';
import { AppError, planLimitExceeded, validationFailed } from '../core/errors.ts';
import { getBalance } from '../credits/ledger.ts';
import { mapBounded } from '../core/map-bounded.ts';
import { parseImageUrl } from '../images/ssrf.ts';
import { columnSchema } from '../lenses/catalog.ts';
import { resolveLenses } from '../lenses/resolve.ts';
import { newLeaseHolder, releaseLeases } from '../registry/blob-leases.ts';
import { deleteUnreferencedBlobs } from '../registry/photos.ts';
import { batchWorkflow } from '../workflows/batch.ts';
import { LENS_CREDITS, VEHICLE_REPORT_CREDITS } from '../credits/price-book.ts';
import { SEARCH_ATTRIBUTES } from '../workflows/search-attributes.ts';
import { batchOfRequest, batchSummary, createBatch, markBatchStarted, RequestIdTaken, takeBackStartingBatch, type BatchKind, type BatchSpec, type BatchSummary, type NewBatchItem } from './repository.ts';

export const MAX_BATCH_ITEMS = 10_000;
/**
 * A batch still `starting` this long after it was stored has no start attempt left running (an
 * attempt ends within Temporal's RPC retries, seconds): its API died. A resend starts it then.
 */
export const STARTING_STALE_MS = 2 * 60 * 1000;

/** A start attempt younger than this may still be under way: a resend is asked back in a second. */
const STARTING_YOUNG_MS = 10_000;

/**
 * A resend of a batch still starting: 503, back in a second while its start may still be under
 * way; after that its API most likely died mid-start, and the resend is told when it can take the
 * start over (STARTING_STALE_MS), at most 30 s ahead, so a client that honours Retry-After keeps
 * trying until then instead of spending its attempts a second apart.
 */
const stillStarting = (requestId: string, startingForMs: number, cause?: unknown) => {
  const retryAfterS = startingForMs < STARTING_YOUNG_MS ? 1 : Math.min(30, Math.max(1, Math.ceil((STARTING_STALE_MS - startingForMs) / 1000)));
  return new AppError('SERVICE_UNAVAILABLE', `The batch of x-request-id ${requestId} is still starting; send the same request again in ${retryAfterS} s`, {
    headers: { 'retry-after': String(retryAfterS) },
    ...(cause ? { cause } : {}),
  });
};
/** Vehicles in one vehicle batch, each 1 to MAX_VEHICLE_PHOTOS photos (and MAX_BATCH_ITEMS photos in all). */
export const MAX_BATCH_VEHICLES = 1_000;
export const MAX_VEHICLE_PHOTOS = 50;
/** Photos of one batch analyzed at once: a batch never takes every worker slot. */
export const BATCH_CONCURRENCY = 4;
/** Photos of one submission taken in (fetched or decoded, fingerprinted, stored) at once. */
const INTAKE_CONCURRENCY = 4;

const item = z.strictObject({
  url: z.url({ message: 'must be an absolute URL' }).max(MAX_URL_CHARS).optional(),
  base64: z.string().min(1).max(MAX_BASE64_CHARS).optional(),
  // Refused when not shaped like an upload id (400 naming the field, nothing made): with awaitUploads
  // it may be an id the client chose for an upload still to come, and a malformed one could never
  // name one (docs/decisions.md, "The fleet's analysis overlaps its uploads").
  uploadId: uploadIdSchema.regex(UPLOAD_ID, { message: 'must be upl_ and 32 lowercase hex digits (an id the API gave, or one you chose in Upload-Metadata uploadId)' })
    .describe('An upload of this account (`upl_` and 32 lowercase hex digits, POST /v1/uploads): finished, or with `awaitUploads` one still arriving; any other shape is 400')
    .optional(),
  /** The uploaded file's name, shown in status and exports (defaults to "upload N"). */
  name: z.string().min(1).max(500).optional(),
}).meta({ id: 'BatchPhoto', description: 'One photo of a batch: `url`, `base64` or `uploadId`, and the name its results and exports show' });

const vehicleGroup = z.strictObject({
  /** Shown in status and exports (defaults to the VIN, else "vehicle N"). */
  name: z.string().min(1).max(500).optional(),
  vehicle: contextSchema.shape.vehicle.describe('This vehicle’s context (VIN, mileage, year, make, model), over any `context.vehicle` of the batch'),
  items: z.array(item).min(1).max(MAX_VEHICLE_PHOTOS).describe('The vehicle’s photos, 1 to 50, in the order its report numbers them'),
}).meta({ id: 'BatchVehicle', description: 'One vehicle of a vehicle batch: its photos and its context' });

export const batchBodySchema = z
  .strictObject({
    items: z.array(item).min(1).max(MAX_BATCH_ITEMS).optional().describe('The photos, each a URL, base64 bytes or an `uploadId` (POST /v1/uploads); up to 10,000. Or `vehicles`'),
    vehicles: z
      .array(vehicleGroup)
      .min(1)
      .max(MAX_BATCH_VEHICLES)
      .optional()
      .describe('A vehicle batch (the vehicle-condition stack): up to 1,000 vehicles of 1 to 50 photos each, 10,000 photos in all; one report per vehicle. Or `items`'),
    preset: stackNameSchema.optional(),
    modules: z.array(lensNameSchema).max(50).optional().describe('Lenses to run (instead of a stack)'),
    modulesAdd: z.array(lensNameSchema).max(50).optional().describe('Lenses added to the stack'),
    modulesRemove: z.array(anyLensNameSchema).max(50).optional().describe('Lenses taken out of the stack (moderation always runs)'),
    moduleOptions: z.record(z.string().max(100), z.record(z.string().max(100), z.unknown())).optional(),
    context: contextSchema.optional(),
    awaitUploads: z.boolean().optional()
      .describe('A vehicle batch only: its `uploadId`s may name uploads still arriving, or not made yet (an id the client chose, Upload-Metadata `uploadId`). The batch starts at once; each vehicle waits at its turn until its uploads finished (up to 10 minutes), and fails if one was refused, expired or did not finish'),
    columns: z.array(columnSchema.extend({ label: z.string().min(1).max(200), jsonPath: z.string().min(1).max(500) })).min(1).max(200).optional()
      .describe('Export columns chosen now; without them exports use the default columns of the lenses the batch runs'),
  })
  .meta({
    id: 'BatchRequest',
    examples: [
      { preset: 'quick-scan', items: [{ uploadId: 'upl_4f1c9a0be27d4c55a1f0e3b8d6c2a917', name: 'IMG_0001.jpg' }, { url: 'https://example.com/photo.jpg' }] },
      {
        awaitUploads: true,
        vehicles: [{ name: 'van-1', vehicle: { vin: 'WVWZZZ1JZ3W386752', mileage: 84000 }, items: [{ uploadId: 'upl_0b7d1e2f3a4c5d6e7f8091a2b3c4d5e6', name: 'front.jpg' }, { uploadId: 'upl_9a8b7c6d5e4f30211203f4e5d6c7b8a9', name: 'rear.jpg' }] }],
      },
    ],
  });
export type BatchBody = z.infer<typeof batchBodySchema>;

/** A photo the console already holds (a finished upload): read when its turn at intake comes. */
export interface UploadedPhoto {
  name: string;
  read(): Promise<Buffer>;
}

/** A batch as submitted: over the API (the body), or from the console with uploaded files. */
export type BatchSubmission = Omit<BatchBody, 'items'> & { items?: Array<NonNullable<BatchBody['items']>[number] | UploadedPhoto> };

/**
 * A batch as the caller sent it: lenses resolved (refusals are 400s that change nothing), every
 * photo sent as bytes taken in — decoded, checked, fingerprinted and stored — and every URL
 * checked (the worker fetches it when its turn comes), refused photos recorded as failed items
 * with the reason, then the batch stored and its workflow started. No credits move here (the
 * balance must cover the first item, see admitBatch): each photo reserves and settles its own as
 * the batch runs.
 */
export async function submitBatch(
  deps: AnalyzeDeps & { temporal: Client },
  accountId: string,
  body: BatchSubmission,
  /** The caller's x-request-id and the fingerprint of the body: one id, one batch. */
  request?: { id: string; hash: string },
): Promise<BatchSummary> {
  if ((body.items === undefined) === (body.vehicles === undefined)) throw validationFailed('body: send either items (photos) or vehicles (groups of photos), not both');
  const vehicles = body.vehicles;
  // A vehicle batch runs the vehicle-condition stack unless the caller named lenses otherwise (which is refused below).
  const preset = vehicles && body.preset === undefined && body.modules === undefined ? 'vehicle-condition' : body.preset;
  const resolved = resolveLenses({ preset, modules: body.modules, modulesAdd: body.modulesAdd, modulesRemove: body.modulesRemove, moduleOptions: body.moduleOptions });
  if (resolved.outputSchema === 'vehicle' && !vehicles) {
    throw validationFailed('items: the vehicle-condition stack reports on a vehicle from its photos; group them by vehicle in `vehicles` (1 to 50 photos each)');
  }
  if (vehicles && resolved.outputSchema !== 'vehicle') throw validationFailed('vehicles: a vehicle batch runs the vehicle-condition stack; leave out preset and modules, or set preset "vehicle-condition"');
  const photos = vehicles ? vehicles.flatMap((v, vi) => v.items.map((it, pi) => ({ it, at: `body.vehicles.${vi}.items.${pi}` }))) : body.items!.map((it, i) => ({ it, at: `body.items.${i}` }));
  if (photos.length > MAX_BATCH_ITEMS) throw validationFailed(`body.vehicles: ${photos.length} photos in all; a batch holds up to ${MAX_BATCH_ITEMS}`);
  for (const { it, at } of photos) {
    if (!('read' in it) && it.url === undefined && it.base64 === undefined && it.uploadId === undefined) throw validationFailed(`${at}: each item needs url, base64 or uploadId`);
    if (!('read' in it) && it.uploadId !== undefined && (it.url !== undefined || it.base64 !== undefined)) throw validationFailed(`${at}: an item with uploadId carries no url or base64`);
  }

  for (const c of body.columns ?? []) {
    if (!c.jsonPath.split('.').every((seg) => seg.length > 0)) throw validationFailed(`columns: jsonPath ${JSON.stringify(c.jsonPath)} has an empty segment`);
  }

  // A resend under the request id gets the batch it made, before any photo is taken in.
  const earlier = request ? await boundBatch(deps, accountId, request) : null;
  if (earlier) return earlier;
  // Nothing is read, fetched, decoded or stored for an account that cannot pay for the first item.
  await admitBatch(deps.db, accountId, vehicles ? 'vehicles' : 'photos', resolved.billable);
  // Upload ids name the account's own finished uploads (404 otherwise) before anything is taken in.
  const named: ImageInput[] = photos.map(({ it }) => ('read' in it || it.uploadId === undefined ? {} : { uploadId: it.uploadId }));
  /** Photos whose upload is still arriving (awaitUploads): taken in by the worker at their vehicle's turn. */
  const awaited = new Set<number>();
  if (body.awaitUploads) {
    if (!vehicles) throw validationFailed('awaitUploads: only a vehicle batch awaits its uploads (each vehicle waits at its turn)');
    const ids = named.flatMap((n) => (n.uploadId === undefined ? [] : [n.uploadId]));
    const states = await awaitedUploads(deps.db, accountId, ids);
    for (const [i, n] of named.entries()) {
      if (n.uploadId === undefined) continue;
      const st = states.get(n.uploadId)!;
      if ('gone' in st) throw new AppError(st.gone.code === 'NOT_FOUND' ? 'NOT_FOUND' : 'VALIDATION_FAILED', `${photos[i]!.at}.uploadId: ${st.gone.message}`);
      if ('arriving' in st) awaited.add(i);
    }
  }
  // The finished ones as any request names them (the same inputs: resolve fills in their uploads).
  await resolveUploadInputs(deps, accountId, named.map((n, i) => (awaited.has(i) ? {} : n)), (i) => photos[i]!.at);

  const stored: string[] = [];
  // The submission's intake leases hold its photos' bytes until its batch items name them.
  const holder = newLeaseHolder('batch-submit');
  const forget = async () => {
    await releaseLeases(deps.db, holder);
    await deleteUnreferencedBlobs(deps.db, deps.blobs, stored);
  };
  const taken = await mapBounded(photos, INTAKE_CONCURRENCY, async ({ it }, i): Promise<NewBatchItem> => {
    const source = it.name ?? ('url' in it ? it.url : undefined) ?? ('uploadId' in it ? it.uploadId : undefined) ?? `upload ${i + 1}`;
    if (awaited.has(i)) return { source, ref: null, uploadId: named[i]!.uploadId! };
    const upload = named[i]!.upload;
    if (!('read' in it) && it.base64 === undefined && !upload) {
      // Fetched by the worker when its turn comes; here only what the URL itself says is checked.
      try {
        return { source, ref: null, url: parseImageUrl(it.url!).toString() };
      } catch (err) {
        if (err instanceof AppError && err.status < 500) return { source, ref: null, error: { code: err.code, message: err.message } };
        throw err;
      }
    }
    const got = await takeBatchPhoto(deps, accountId, 'read' in it ? { bytes: await it.read() } : upload ? { upload } : { base64: it.base64 }, holder);
    if ('refused' in got) return { source, ref: null, error: got.refused };
    if (got.stored) stored.push(got.ref.sha256);
    return { source, ref: got.ref };
  }).catch(async (err: unknown) => {
    await forget();
    throw err;
  });
  const items = vehicles ? groupByVehicle(vehicles, taken) : taken;

  const spec: BatchSpec = {
    stack: resolved.stack,
    lenses: resolved.lenses,
    billable: resolved.billable,
    ...(body.context ? { context: body.context } : {}),
    ...(body.moduleOptions ? { moduleOptions: body.moduleOptions } : {}),
  };
  const kind = vehicles ? 'vehicles' : 'photos';
  let batchId: string;
  try {
    batchId = await createBatch(deps.db, { accountId, kind, spec, columns: body.columns ?? null, items, ...(request ? { request } : {}) });
  } catch (err) {
    // Not stored (or a concurrent submission under the same id made its batch first): this one keeps nothing.
    await forget();
    if (!(err instanceof RequestIdTaken)) throw err;
    const winner = await boundBatch(deps, accountId, request!);
    if (winner) return winner;
    throw new AppError('SERVICE_UNAVAILABLE', 'A submission under the same x-request-id was being started; try again shortly', { cause: err });
  }
  // The batch is `starting` until its workflow started: nobody is shown it before.
  try {
    await startBatchWorkflow(deps, { batchId, accountId, kind, spec, itemCount: items.length });
  } catch (err) {
    // Without its workflow the batch would never run: it is taken back whole, images included
    // (unless its workflow did start and moved it on: then it is the caller's).
    if (!(await takeBackStartingBatch(deps.db, batchId))) {
      await releaseLeases(deps.db, holder);
      return batchSummary(deps.db, accountId, batchId);
    }
    await forget();
    throw new AppError('SERVICE_UNAVAILABLE', 'The batch could not be started; nothing was kept. Try again shortly', { cause: err, headers: { 'retry-after': '5' } });
  }
  await markBatchStarted(deps.db, batchId);
  // Its pending items hold the photos now.
  await releaseLeases(deps.db, holder);
  return batchSummary(deps.db, accountId, batchId);
}

/**
 * The batch a submission's request id made, if any: the same request resent under its id (the
 * answer was lost) gets the batch it made; another request under the id is refused (409) before
 * any photo is taken in. A batch still starting is not handed out (its start may yet fail and take
 * it back): 503, send again in a moment; one left starting by an API that died is started by the
 * resend (docs/decisions.md "Batches: starting").
 */
export async function boundBatch(deps: AnalyzeDeps & { temporal: Client }, accountId: string, request: { id: string; hash: string }): Promise<BatchSummary | null> {
  const made = await batchOfRequest(deps.db, accountId, request.id);
  if (!made) return null;
  if (made.requestHash !== request.hash) {
    throw new AppError('REQUEST_ID_CONFLICT', `x-request-id ${request.id} already submitted another batch (${made.id}); send this one with a new x-request-id`);
  }
  if (made.status === 'starting') {
    if (made.startingForMs < STARTING_STALE_MS) throw stillStarting(request.id, made.startingForMs);
    try {
      await startBatchWorkflow(deps, { batchId: made.id, accountId, kind: made.kind, spec: made.spec, itemCount: made.itemCount });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw stillStarting(request.id, 0, err);
    }
    await markBatchStarted(deps.db, made.id);
  }
  return batchSummary(deps.db, accountId, made.id);
}

/**
 * Credits one item of a batch costs when nothing of it is in the registry yet: a photo, one per
 * billable lens (a photo of free lenses only still needs 1 available, as analyze's free-call gate
 * asks); a vehicle, its report's flat price. The worker holds this much before fetching an item's URL.
 */
export function itemCredits(kind: BatchKind, billable: readonly string[]): number {
  return kind === 'vehicles' ? VEHICLE_REPORT_CREDITS : billable.length * LENS_CREDITS;
}

/**
 * A batch is taken in only when the account's available credits cover its first item
 * (docs/decisions.md "Batches: no intake without credits"): 402 PLAN_LIMIT_EXCEEDED otherwise,
 * before any photo is read. A check, not a hold: each item reserves its own when it runs.
 */
export async function admitBatch(db: AnalyzeDeps['db'], accountId: string, kind: BatchKind, billable: readonly string[]): Promise<void> {
  const needed = Math.max(1, itemCredits(kind, billable));
  const { community, purchased } = await getBalance(db, accountId);
  const total = community + purchased;
  if (total < needed) throw planLimitExceeded({ needed, community, purchased, total, resetsInDays: 0 });
}

/**
 * A vehicle batch's items: one per vehicle, its photos as intake took them in. A vehicle whose
 * photo intake refused fails whole, naming the photo: its report must describe every photo sent.
 */
function groupByVehicle(vehicles: NonNullable<BatchBody['vehicles']>, taken: NewBatchItem[]): NewBatchItem[] {
  let at = 0;
  return vehicles.map((v, vi): NewBatchItem => {
    const own = taken.slice(at, at + v.items.length);
    at += v.items.length;
    const refused = own.findIndex((p) => p.error);
    return {
      source: v.name ?? v.vehicle?.vin ?? `vehicle ${vi + 1}`,
      ref: null,
      photos: own.map((p) => ({ source: p.source, ...(p.ref ? { ref: p.ref } : {}), ...(p.url ? { url: p.url } : {}), ...(p.uploadId ? { uploadId: p.uploadId } : {}) })),
      ...(v.vehicle ? { vehicle: v.vehicle } : {}),
      ...(refused >= 0 ? { error: { code: own[refused]!.error!.code, message: `photo ${refused + 1} (${own[refused]!.source}): ${own[refused]!.error!.message}` } } : {}),
    };
  });
}

export const batchWorkflowId = (accountId: string, batchId: string) => `batch:${accountId}:${batchId}`;

/**
 * Start the batch's workflow: at submission, or again for a completed batch whose failed photos
 * are retried (a new run under the same id; Temporal allows it once the previous run closed).
 */
export async function startBatchWorkflow(
  deps: Pick<AnalyzeDeps, 'config'> & { temporal: Client },
  batch: { batchId: string; accountId: string; kind: BatchKind; spec: BatchSpec; itemCount: number },
): Promise<void> {
  await deps.temporal.workflow.start(batchWorkflow, {
    taskQueue: deps.config.TEMPORAL_TASK_QUEUE,
    workflowId: batchWorkflowId(batch.accountId, batch.batchId),
    args: [{ batchId: batch.batchId, userId: batch.accountId, kind: batch.kind, ...batch.spec, concurrency: BATCH_CONCURRENCY, workspaceConcurrency: deps.config.BATCH_WORKSPACE_CONCURRENCY, reservationTtlMs: deps.config.RESERVATION_TTL_MS, childTimeoutMs: deps.config.WORKFLOW_TIMEOUT_MS, photosPerRun: deps.config.BATCH_PHOTOS_PER_RUN, pausedExpiryMs: deps.config.BATCH_PAUSED_EXPIRY_MS, uploadWaitMs: deps.config.BATCH_UPLOAD_WAIT_MS }],
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    typedSearchAttributes: [
      { key: SEARCH_ATTRIBUTES.userId, value: batch.accountId },
      { key: SEARCH_ATTRIBUTES.batchId, value: batch.batchId },
      { key: SEARCH_ATTRIBUTES.stack, value: batch.spec.stack ?? 'custom' },
      { key: SEARCH_ATTRIBUTES.imageCount, value: batch.itemCount },
    ],
  });
}
