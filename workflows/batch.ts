import {
  ActivityFailure,
  ApplicationFailure,
  ChildWorkflowFailure,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  executeChild,
  ParentClosePolicy,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { mapBounded } from '../core/map-bounded.ts';
import type { Activities } from '../activities/index.ts';
import { analyzeWorkflow } from './analyze.ts';
import { vehicleReportWorkflow } from './vehicle-report.ts';
import { DB_LOCAL_OPTIONS } from './steps.ts';
import { VEHICLE_REPORT_CREDITS } from '../credits/price-book.ts';
import { UPLOAD_WAIT_MS, type AnalyzeContext, type AnalyzeResult, type ImageRef, type ItemHold, type ItemOutcome, type VehicleReportResult } from './types.ts';

export interface BatchInput {
  batchId: string;
  userId: string;
  /** Photos (one analysis each) or vehicles (one vehicle-condition report over each's photos). */
  kind: 'photos' | 'vehicles';
  stack: string | null;
  lenses: string[];
  billable: string[];
  context?: AnalyzeContext;
  moduleOptions?: Record<string, Record<string, unknown>>;
  /** Photos analyzed at once for this batch: one batch cannot take every worker slot. */
  concurrency: number;
  /** Photos analyzed at once across all running batches of the workspace (BATCH_WORKSPACE_CONCURRENCY). */
  workspaceConcurrency?: number;
  reservationTtlMs: number;
  /** Execution timeout of each photo's or vehicle's child workflow (WORKFLOW_TIMEOUT_MS: reservations outlive it). */
  childTimeoutMs: number;
  /** Photos this run handles before it continues as new (BATCH_PHOTOS_PER_RUN). */
  photosPerRun?: number;
  /** How long the batch waits paused before it expires (BATCH_PAUSED_EXPIRY_MS). */
  pausedExpiryMs?: number;
  /** How long a vehicle waits from its turn for uploads still arriving (BATCH_UPLOAD_WAIT_MS); runs started before it: UPLOAD_WAIT_MS. */
  uploadWaitMs?: number;
  /** Carried over continue-as-new. */
  cursor?: number;
  state?: { paused: boolean; pauseReason: 'requested' | 'credits' | null };
}

export const pauseBatch = defineSignal('pause');
export const resumeBatch = defineSignal('resume');
export const cancelBatch = defineSignal('cancel');
/** An upload a waiting vehicle of this batch named has finished or was refused (batches/upload-waits.ts): waiting vehicles look again. */
export const uploadsSettled = defineSignal('uploadsSettled');
export const batchState = defineQuery<{ state: 'running' | 'paused' | 'cancelled'; pauseReason: 'requested' | 'credits' | null }>('state');

/**
 * How often a vehicle waiting for its uploads looks at them though no signal came: a signal lost
 * (the API died between an upload's finish and its signal, Temporal was away) or an upload that
 * expired or was made by another account, which send none. At most 20 looks in a 10-minute wait.
 */
export const UPLOAD_RECHECK_MS = 30_000;

/** Photos per workflow run before its history is handed to a fresh run (continue-as-new), by default. */
export const PHOTOS_PER_RUN = 200;
/** How long a paused batch waits for resume when its input does not say (core/config.ts BATCH_PAUSED_EXPIRY_MS). */
export const PAUSED_EXPIRY_MS = 7 * 24 * 3600 * 1000;
/**
 * Vendor calls in flight for a vehicle batch: the batch's share counts calls for both kinds. A
 * vehicle is a chain (its photo calls, then one synthesis over their findings), so running fewer
 * vehicles with their photos side by side leaves calls idle at every synthesis and at every round
 * that is not full. Throughput comes from running as many vehicles as the share allows, each with
 * an equal part of it: a page of many vehicles runs `share` of them one call each; a batch of one
 * vehicle describes `share` of its photos at once.
 */
export function vehicleLanes(share: number, vehicles: number): { atOnce: number; photoConcurrency: number } {
  const atOnce = Math.max(1, Math.min(share, vehicles));
  return { atOnce, photoConcurrency: Math.max(1, Math.floor(share / atOnce)) };
}

const dbSteps = proxyLocalActivities<Activities>(DB_LOCAL_OPTIONS);
// Fetching a photo by URL: the fetch has its own deadline (the address policy's), retried a little.
const fetcher = proxyActivities<Activities>({ startToCloseTimeout: '2 minutes', retry: { initialInterval: '1 second', maximumAttempts: 3 } });
// A vehicle's photos (up to 50, each under the fetch deadline): long, so it heartbeats after each
// photo and a lost worker is noticed within the heartbeat timeout, not at the end.
const preparer = proxyActivities<Activities>({ startToCloseTimeout: '15 minutes', heartbeatTimeout: '1 minute', retry: { initialInterval: '1 second', maximumAttempts: 3 } });

/**
 * The domain error under a failed child or step: a child analysis that failed in its own activity
 * (a photo the worker's decode refused, IMAGE_INVALID) arrives as a child failure caused by an
 * activity failure caused by our ApplicationFailure, so the chain is walked to it.
 */
function domainCause(err: unknown): ApplicationFailure | undefined {
  let at: unknown = err;
  for (let depth = 0; depth < 5 && at; depth++) {
    if (at instanceof ApplicationFailure) return at;
    at = at instanceof ChildWorkflowFailure || at instanceof ActivityFailure ? at.cause : undefined;
  }
  return undefined;
}

/** The cause's type when a child analysis failed with one of our domain errors. */
function failureOf(err: unknown): { code: string; message: string } {
  const cause = domainCause(err);
  if (cause) return { code: cause.type ?? 'INTERNAL_ERROR', message: cause.message };
  return { code: 'INTERNAL_ERROR', message: err instanceof Error ? err.message : String(err) };
}

/**
 * A batch: every pending photo through the analyze saga as a child workflow (so each photo is
 * billed by the same delta rules as a single request, at most once), `concurrency` at a time.
 * Signals pause, resume and cancel it; running out of credits pauses it with that reason, and a
 * resume after a purchase picks up the photos that did not run. A batch paused longer than
 * `pausedExpiryMs` expires: cancelled, like a cancelled batch its pending photos fail (and their
 * bytes are let go), and the workflow ends. The history stays bounded: every PHOTOS_PER_RUN
 * photos it continues as new. The batch's rows in Postgres are the record; this
 * workflow is their only writer after submission.
 */
export async function batchWorkflow(input: BatchInput): Promise<{ batchId: string; status: 'completed' | 'cancelled' | 'expired' }> {
  let state: 'running' | 'paused' | 'cancelled' = input.state?.paused ? 'paused' : 'running';
  let pauseReason: 'requested' | 'credits' | null = input.state?.pauseReason ?? null;
  setHandler(pauseBatch, () => {
    if (state === 'running') [state, pauseReason] = ['paused', 'requested'];
  });
  setHandler(resumeBatch, () => {
    if (state === 'paused') [state, pauseReason] = ['running', null];
  });
  setHandler(cancelBatch, () => {
    state = 'cancelled';
  });
  setHandler(batchState, () => ({ state, pauseReason }));
  let uploadSignals = 0;
  setHandler(uploadsSettled, () => {
    uploadSignals += 1;
  });

  // Signal handlers change `state` between awaits; read it through here (TypeScript narrows a local).
  const now = (): 'running' | 'paused' | 'cancelled' => state;
  let cursor = input.cursor ?? -1;
  let thisRun = 0;
  for (;;) {
    if (now() === 'cancelled') {
      await dbSteps.setBatchStatus({ batchId: input.batchId, status: 'cancelled' });
      return { batchId: input.batchId, status: 'cancelled' };
    }
    if (now() === 'paused') {
      await dbSteps.setBatchStatus({ batchId: input.batchId, status: 'paused', pauseReason: pauseReason ?? 'requested' });
      // Runs that paused before the expiry existed wait as they did (replay must match their history).
      if (patched('batch-paused-expiry')) {
        const pausedForMs = input.pausedExpiryMs ?? PAUSED_EXPIRY_MS;
        if (!(await condition(() => now() !== 'paused', pausedForMs))) {
          await dbSteps.setBatchStatus({ batchId: input.batchId, status: 'cancelled', end: { reason: 'expired', pausedForMs } });
          return { batchId: input.batchId, status: 'expired' };
        }
      } else {
        await condition(() => now() !== 'paused');
      }
      if (now() === 'running') await dbSteps.setBatchStatus({ batchId: input.batchId, status: 'running' });
      // Photos skipped while paused (or refused for credits) are before the cursor: start over.
      cursor = -1;
      continue;
    }
    const perRun = input.photosPerRun ?? PHOTOS_PER_RUN;
    // A run whose history the server finds large hands over early too: vehicles whose photos
    // arrived one by one while they waited add a signal each (docs/decisions.md, "A vehicle's wait
    // for its uploads, after review"). Patched: runs recorded before replay as they ran.
    const historyLarge = thisRun > 0 && patched('batch-continue-on-large-history') && workflowInfo().continueAsNewSuggested;
    if (thisRun >= perRun || historyLarge) {
      await continueAsNew<typeof batchWorkflow>({ ...input, cursor, state: { paused: false, pauseReason: null } });
    }
    // This batch's share of the workspace's cap, asked again for every page: a batch started or
    // finished elsewhere in the workspace changes it.
    const share = input.workspaceConcurrency === undefined ? input.concurrency : Math.min(input.concurrency, await dbSteps.batchShare({ userId: input.userId, cap: input.workspaceConcurrency }));
    const items = await dbSteps.claimBatchItems({ batchId: input.batchId, afterIndex: cursor, limit: Math.min(share * 4, perRun - thisRun) });
    if (items.length === 0) {
      if (cursor === -1 && (await dbSteps.completeBatch({ batchId: input.batchId }))) {
        return { batchId: input.batchId, status: 'completed' };
      }
      cursor = -1;
      continue;
    }
    const { atOnce, photoConcurrency } = input.kind === 'vehicles' ? vehicleLanes(share, items.length) : { atOnce: share, photoConcurrency: 1 };
    await mapBounded(items, atOnce, async (item) => {
      if (now() !== 'running') return;
      const requestId = `batch-${input.batchId}-${item.index}-${item.attempt}`;
      // Finishing an item also gives back what its child did not take of the credits held for it.
      const release = `res:${childWorkflowId(input, requestId)}`;
      const finish = (outcome: ItemOutcome, mayGiveBack = true) =>
        dbSteps.finishBatchItem({ batchId: input.batchId, index: item.index, outcome, ...(mayGiveBack ? { release } : {}) });
      try {
        if (input.kind === 'vehicles') {
          const outcome = await runVehicle(input, item.index, requestId, photoConcurrency, { state: now, uploadSignals: () => uploadSignals });
          // None: paused while it waited for its uploads; it stays pending for the resume.
          if (outcome) await finish(outcome);
        } else {
          await finish(await runPhoto(input, item, requestId));
        }
      } catch (err) {
        const failure = failureOf(err);
        if (failure.code === 'PLAN_LIMIT_EXCEEDED') {
          // Out of credits (the hold or the child's own reservation refused): the item stays pending and the batch waits for a purchase.
          if (now() === 'running') [state, pauseReason] = ['paused', 'credits'];
          return;
        }
        await finish(failure, mayRelease(err));
      }
    });
    cursor = items[items.length - 1]!.index;
    thisRun += items.length;
  }
}

/**
 * What a batch item holds before anything is fetched for it (activities/batch.ts ItemHold): its
 * full price, under the reservation id of its child workflow (`res:<child workflow id>`,
 * workflows/steps.ts startSaga), which the child's first step finds and uses. What the child does
 * not take is given back when the item is finished (finishBatchItem's `release`).
 */
function holdFor(input: BatchInput, childWorkflowId: string, amount: number): ItemHold {
  return { reservationId: `res:${childWorkflowId}`, workflowId: childWorkflowId, userId: input.userId, amount, ttlMs: input.reservationTtlMs };
}

/** The child workflow of an item: an analysis of a photo, or a vehicle's report. */
export const childWorkflowId = (input: Pick<BatchInput, 'kind' | 'userId'>, requestId: string): string =>
  `${input.kind === 'vehicles' ? 'vehicle' : 'analyze'}:${input.userId}:${requestId}`;

/**
 * Whether an item that failed may give back what is held under its child's reservation: yes,
 * unless its child timed out or was terminated (then the sweeper decides when the reservation
 * expires, and charges what that run persisted).
 */
function mayRelease(err: unknown): boolean {
  return !(err instanceof ChildWorkflowFailure) || domainCause(err) !== undefined;
}

/** One photo: fetched first when it was given by URL (its price held before), then the analyze saga as a child. */
async function runPhoto(input: BatchInput, item: { index: number; ref: ImageRef | null }, requestId: string): Promise<ItemOutcome> {
  const workflowId = childWorkflowId(input, requestId);
  let ref = item.ref;
  if (ref === null) {
    // Given by URL: fetched now, by the worker, not while the caller waited at submission, and
    // only once the photo's price is held.
    const taken = await fetcher.takeBatchUrl({ batchId: input.batchId, index: item.index, hold: holdFor(input, workflowId, input.billable.length) });
    if ('error' in taken) return taken.error;
    ref = taken.ref;
  }
  const result = await executeChild(analyzeWorkflow, {
    workflowId,
    args: [
      {
        requestId,
        userId: input.userId,
        stack: input.stack,
        images: [ref],
        lenses: input.lenses,
        billable: input.billable,
        refresh: false,
        ...(input.context ? { context: input.context } : {}),
        ...(input.moduleOptions ? { moduleOptions: input.moduleOptions } : {}),
        reservationTtlMs: input.reservationTtlMs,
        imageConcurrency: 1,
        lane: 'batch',
      },
    ],
    // A cancelled batch lets a running photo finish (and be billed for what it did).
    parentClosePolicy: ParentClosePolicy.ABANDON,
    workflowExecutionTimeout: input.childTimeoutMs,
  });
  return { credits: (result as AnalyzeResult).creditsCharged };
}

/**
 * One vehicle: its photos made ready (fetched, context merged, reuse key computed by an activity,
 * since hashing is not workflow code), then the vehicle report saga as a child, or the stored
 * report of the same photos and vehicle for nothing.
 */
async function runVehicle(
  input: BatchInput,
  index: number,
  requestId: string,
  photoConcurrency: number,
  batch: { state: () => 'running' | 'paused' | 'cancelled'; uploadSignals: () => number },
): Promise<ItemOutcome | null> {
  const workflowId = childWorkflowId(input, requestId);
  const hold = holdFor(input, workflowId, VEHICLE_REPORT_CREDITS);
  const uploadWaitMs = input.uploadWaitMs ?? UPLOAD_WAIT_MS;
  // Uploads still arriving are waited for here, not in a step, so a waiting vehicle holds no
  // worker slot, and its deadline is a durable timer fixed at its turn. Patched: runs recorded
  // before wait in the step, as they ran.
  let uploadsBy: number | undefined;
  if (patched('vehicle-waits-in-workflow')) {
    const waited = await waitForUploads(input, index, hold, uploadWaitMs, batch);
    if (waited === 'cancelled') return { code: 'BATCH_FINISHED', message: 'The batch was cancelled while this vehicle waited for its uploads; its report was not run' };
    if (waited === 'paused') {
      // As any item a paused batch did not run: pending, holding nothing. Its resume claims it
      // again under a new attempt, so a new hold, and its wait starts again from that turn.
      await dbSteps.releaseCredits({ id: hold.reservationId, reason: 'batch paused while its vehicle waited for uploads' });
      return null;
    }
    uploadsBy = waited.uploadsBy;
  }
  // Its photos may be fetched now: the report's price is held first.
  const ready = await preparer.prepareBatchVehicle({
    batchId: input.batchId,
    index,
    ...(input.context ? { context: input.context } : {}),
    hold,
    ...(input.uploadWaitMs !== undefined ? { uploadWaitMs: input.uploadWaitMs } : {}),
    ...(uploadsBy !== undefined ? { uploadsBy } : {}),
  });
  if ('error' in ready) return ready.error;
  if ('cached' in ready) return { credits: 0, reportId: ready.cached.reportId };
  // Cancelled while its photos were made ready (a vehicle may wait minutes for uploads still
  // arriving): its report is not run, and finishing the item gives its hold back. Patched: runs
  // recorded before this check replay as they ran.
  if (patched('vehicle-cancelled-while-preparing') && batch.state() === 'cancelled') {
    return { code: 'BATCH_FINISHED', message: 'The batch was cancelled while this vehicle was made ready; its report was not run' };
  }
  const result: VehicleReportResult = await executeChild(vehicleReportWorkflow, {
    workflowId,
    args: [
      {
        requestId,
        userId: input.userId,
        images: ready.refs,
        ...(ready.context ? { context: ready.context } : {}),
        refresh: false,
        reservationTtlMs: input.reservationTtlMs,
        photoConcurrency,
        setHash: ready.setHash,
        lane: 'batch',
      },
    ],
    parentClosePolicy: ParentClosePolicy.ABANDON,
    workflowExecutionTimeout: input.childTimeoutMs,
  });
  return { credits: result.creditsCharged, reportId: result.reportId };
}

/**
 * A vehicle at its turn waits for its uploads still arriving (awaitUploads), up to `waitMs` from
 * now, fixed once: a durable timer, so a worker lost mid-wait does not start it again. It looks
 * (a local activity, which also holds the report's price and registers the wait) at its turn, at
 * every signal that an upload of a waiting vehicle settled, and every UPLOAD_RECHECK_MS. A pause or
 * cancel of the batch ends the wait at once. Returns when the step that makes it ready may stop
 * waiting (`uploadsBy`: what has not arrived by then fails the vehicle).
 */
async function waitForUploads(
  input: BatchInput,
  index: number,
  hold: ItemHold,
  waitMs: number,
  batch: { state: () => 'running' | 'paused' | 'cancelled'; uploadSignals: () => number },
): Promise<'paused' | 'cancelled' | { uploadsBy: number }> {
  const uploadsBy = Date.now() + waitMs;
  // The hold is made at the first look that finds an upload arriving (once per id) and must outlast
  // the wait, which is a setting of its own and may be longer than a hold's TTL (RESERVATION_TTL_MS):
  // held for the wait and its TTL, then counted again from the wait's end (prepareBatchVehicle).
  const waitingHold = { ...hold, ttlMs: hold.ttlMs + waitMs };
  const look = () => dbSteps.vehicleUploadsArriving({ batchId: input.batchId, index, hold: waitingHold });
  let seen = batch.uploadSignals();
  if ((await look()).arriving === 0) return { uploadsBy };
  try {
    for (;;) {
      const left = uploadsBy - Date.now();
      if (left <= 0) return { uploadsBy };
      await condition(() => batch.state() !== 'running' || batch.uploadSignals() !== seen, Math.min(left, UPLOAD_RECHECK_MS));
      const state = batch.state();
      if (state !== 'running') return state;
      seen = batch.uploadSignals();
      if ((await look()).arriving === 0) return { uploadsBy };
    }
  } finally {
    await dbSteps.endUploadWait({ batchId: input.batchId, index });
  }
}
