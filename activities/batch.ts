import { setTimeout as sleep } from 'node:timers/promises';
import { Context } from '@temporalio/activity';
import {
  claimPendingItems,
  completeBatch,
  finishItem,
  setBatchStatus,
  setItemRef,
  setVehiclePhotoRef,
  urlToTake,
  vehicleToTake,
  workspaceShare,
  type BatchEnd,
  type BatchStatus,
  type ItemOutcome,
  type PauseReason,
} from '../batches/repository.ts';
import { planLimitExceeded } from '../core/errors.ts';
import { getBalance, release, renewHold, reserve } from '../credits/ledger.ts';
import { takeBatchPhoto } from '../registry/intake.ts';
import { newLeaseHolder, releaseLeases } from '../registry/blob-leases.ts';
import { mapBounded } from '../core/map-bounded.ts';
import { PUBLIC_INTERNET } from '../images/fetch.ts';
import { getLens } from '../lenses/index.ts';
import { recordCacheHit } from '../registry/photos.ts';
import { findVehicleReport, vehicleSetHash } from '../registry/vehicle-reports.ts';
import { UPLOAD_WAIT_MS, type AnalyzeContext, type ImageRef, type ItemHold } from '../workflows/types.ts';
import { awaitedUploads, type AwaitedUpload } from '../uploads/service.ts';
import { rethrowDomain, type ActivityDeps } from './deps.ts';

/** A vehicle's photos fetched at once while it is made ready. */
const VEHICLE_FETCH_CONCURRENCY = 4;
/** How long a vehicle waits at its turn for uploads still arriving (awaitUploads); runs started before BATCH_UPLOAD_WAIT_MS. */
export { UPLOAD_WAIT_MS };
/** How often a step of a run recorded before the wait moved into the workflow looks (activities wait there only for those). */
const UPLOAD_POLL_MS = 250;
/** The wait in words: "10 minutes", "12 seconds". */
export const waitFor = (ms: number): string => (ms % 60_000 === 0 ? `${ms / 60_000} minutes` : `${Math.round(ms / 1000)} seconds`);

/**
 * Credits held for a batch item before anything is fetched for it: its full price, under the
 * reservation id its analysis (or vehicle report) workflow reserves with (`res:<its workflow
 * id>`), which that workflow's first step then finds and uses (credits/ledger.ts holdIn: an id
 * is reserved once). An item of free lenses only (`amount` 0) holds nothing but needs 1 credit
 * available, as the free-call gate will.
 */
export type { ItemHold };

/** The batch workflow's steps: each one idempotent statement on the batch's rows, or fetches. */
export function batchActivities(deps: ActivityDeps) {
  // Photos given by URL are fetched from the public internet unless the composition root says otherwise.
  const photoDeps = { ...deps, fetchPolicy: deps.fetchPolicy ?? PUBLIC_INTERNET };

  /** Hold an item's price (ItemHold); short of credits: PLAN_LIMIT_EXCEEDED, before anything is fetched. */
  async function holdItem(h: ItemHold): Promise<void> {
    try {
      if (h.amount > 0) {
        await reserve(deps.db, { id: h.reservationId, accountId: h.userId, amount: h.amount, ttlMs: h.ttlMs, workflowId: h.workflowId, reason: 'batch item, held before its fetch' });
        return;
      }
      const { community, purchased } = await getBalance(deps.db, h.userId);
      if (community + purchased < 1) throw planLimitExceeded({ needed: 1, community, purchased, total: community + purchased, resetsInDays: 0 });
    } catch (err) {
      rethrowDomain(err);
    }
  }
  const giveBack = async (h: ItemHold | undefined, reason: string) => {
    if (h && h.amount > 0) await release(deps.db, { id: h.reservationId, reason });
  };

  /**
   * A vehicle's uploads that were still arriving at submission, once each has finished or is gone
   * for good (refused, expired, another account's); one not finished by `deadline` (its vehicle's
   * turn and the wait, fixed by the workflow, so a retried step does not start the clock again) is
   * gone too, so a client that stopped uploading does not hold a lane of the batch for ever. The
   * batch workflow waits for them itself (vehicleUploadsArriving) and calls the step once they are
   * in or the deadline passed, so this is one look; a run recorded before that waits here, looking
   * every UPLOAD_POLL_MS with a heartbeat.
   */
  async function awaitUploads(accountId: string, ids: string[], deadline: number, waitMs: number): Promise<Map<string, Exclude<AwaitedUpload, { arriving: true }>>> {
    const settled = new Map<string, Exclude<AwaitedUpload, { arriving: true }>>();
    for (let left = ids; left.length > 0; ) {
      const states = await awaitedUploads(deps.db, accountId, left);
      for (const [id, st] of states) if (!('arriving' in st)) settled.set(id, st);
      left = left.filter((id) => !settled.has(id));
      if (left.length === 0) break;
      if (Date.now() > deadline) {
        for (const id of left) settled.set(id, { gone: { code: 'VALIDATION_FAILED', message: `upload ${id} did not finish within ${waitFor(waitMs)} of its vehicle's turn; upload it, then retry the vehicle` } });
        break;
      }
      Context.current().heartbeat('awaiting uploads');
      await sleep(UPLOAD_POLL_MS);
    }
    return settled;
  }

  const forgetWait = (args: { batchId: string; index: number }) => deps.db.query('DELETE FROM upload_waits WHERE batch_id = $1 AND item_index = $2', [args.batchId, args.index]);

  return {
    /**
     * A vehicle at its turn: how many of its uploads are still arriving (awaitUploads). When some
     * are, its report's price is held first (a waiting lane is not free) and the vehicle is
     * registered as waiting for each (upload_waits) before they are looked at again, so an upload
     * that finishes or is refused from then on finds the row and signals the batch
     * (batches/upload-waits.ts); the batch workflow waits for that signal, holding no worker slot.
     * A local activity: one short transaction each, looked again at every signal and backstop.
     */
    async vehicleUploadsArriving(args: { batchId: string; index: number; hold?: ItemHold }): Promise<{ arriving: number }> {
      const item = await vehicleToTake(deps.db, args);
      const ids = [...new Set(item?.photos.flatMap((p) => (p.ref || !p.uploadId ? [] : [p.uploadId])) ?? [])];
      const arriving = async () => [...(await awaitedUploads(deps.db, item!.userId, ids))].filter(([, st]) => 'arriving' in st).map(([id]) => id);
      let left = ids.length ? await arriving() : [];
      if (left.length > 0) {
        if (args.hold) await holdItem(args.hold);
        await deps.db.query(
          'INSERT INTO upload_waits (upload_id, batch_id, item_index, user_id) SELECT unnest($1::text[]), $2, $3, $4 ON CONFLICT DO NOTHING',
          [left, args.batchId, args.index, item!.userId],
        );
        left = await arriving();
      }
      if (left.length === 0 && ids.length > 0) await forgetWait(args);
      return { arriving: left.length };
    },
    /** A vehicle's wait is over (its uploads in, its deadline passed, its batch paused or cancelled): nothing signals it any more. */
    async endUploadWait(args: { batchId: string; index: number }): Promise<void> {
      await forgetWait(args);
    },
    claimBatchItems: (args: { batchId: string; afterIndex: number; limit: number }) => claimPendingItems(deps.db, args),
    /**
     * An item's outcome, and what its analysis did not take of the credits held for it given back
     * (`release`: its reservation id; a no-op once the analysis settled or released it).
     */
    async finishBatchItem(args: { batchId: string; index: number; outcome: ItemOutcome; release?: string }): Promise<void> {
      await finishItem(deps.db, args);
      if (args.release) await release(deps.db, { id: args.release, reason: 'batch item finished: what its analysis did not take' });
    },
    completeBatch: (args: { batchId: string }) => completeBatch(deps.db, args.batchId),
    batchShare: (args: { userId: string; cap: number }) => workspaceShare(deps.db, { accountId: args.userId, cap: args.cap }),
    setBatchStatus: (args: { batchId: string; status: BatchStatus; pauseReason?: PauseReason; end?: BatchEnd }) => setBatchStatus(deps.db, args),

    /**
     * Fetch a batch photo given by URL, when its turn comes: the same intake as analyze (address
     * policy, size and pixel limits, a decode that checks and fingerprints it, the blob stored).
     * A photo the intake refuses is an answer, not a failure of the step: the workflow records it.
     */
    async takeBatchUrl(args: { batchId: string; index: number; hold?: ItemHold }): Promise<{ ref: ImageRef } | { error: { code: string; message: string } }> {
      const item = await urlToTake(deps.db, args);
      if (!item) return { error: { code: 'INTERNAL_ERROR', message: 'The photo has no URL to fetch' } };
      if (item.ref) return { ref: item.ref }; // taken by an earlier attempt of this step
      // Nothing is fetched that cannot be paid for: the photo's price first (runs from before this step pass no hold).
      if (args.hold) await holdItem(args.hold);
      // Leased until the item names the photo; a step that dies leaves the lease to expire.
      const holder = newLeaseHolder('batch-url');
      const got = await takeBatchPhoto(photoDeps, item.userId, { url: item.url }, holder);
      if ('refused' in got) {
        await giveBack(args.hold, 'batch photo could not be fetched');
        return { error: got.refused };
      }
      await setItemRef(deps.db, { batchId: args.batchId, index: args.index, ref: got.ref });
      await releaseLeases(deps.db, holder);
      return { ref: got.ref };
    },

    /**
     * Make a vehicle of a batch ready for its report: photos given by URL fetched as takeBatchUrl
     * fetches one, each kept as soon as it is taken (a retried step fetches only what is missing)
     * and a heartbeat after each; its context (the batch's, the vehicle's own over it) and the
     * report's reuse key. The same photos and vehicle already reported on for this account answer
     * from that report, for nothing. The first photo intake refused fails the vehicle, named.
     */
    async prepareBatchVehicle(args: {
      batchId: string;
      index: number;
      context?: AnalyzeContext;
      hold?: ItemHold;
      /** The wait for uploads still arriving (BATCH_UPLOAD_WAIT_MS), and when it ends (epoch ms, from the workflow: the vehicle's turn and the wait). */
      uploadWaitMs?: number;
      uploadsBy?: number;
    }): Promise<
      | { error: { code: string; message: string } }
      | { cached: { reportId: string } }
      | { refs: ImageRef[]; setHash: string; context: AnalyzeContext | null }
    > {
      const item = await vehicleToTake(deps.db, args);
      if (!item) return { error: { code: 'INTERNAL_ERROR', message: 'The vehicle is not pending' } };
      // Its photos may be fetched now: the report's price first (runs from before this step pass no hold).
      if (args.hold) await holdItem(args.hold);
      const refs: Array<ImageRef | undefined> = item.photos.map((p) => p.ref);
      const refused: Array<{ at: number; code: string; message: string }> = [];
      const holder = newLeaseHolder('batch-vehicle');
      // Uploads still arriving when the batch was submitted (awaitUploads) are waited for first.
      const awaited = item.photos.flatMap((p) => (p.ref || !p.uploadId ? [] : [p.uploadId]));
      const waitMs = args.uploadWaitMs ?? UPLOAD_WAIT_MS;
      const arrived = await awaitUploads(item.userId, awaited, args.uploadsBy ?? Date.now() + waitMs, waitMs);
      // The hold aged through the wait; its TTL is sized to the report's run (RESERVATION_TTL_MS >
      // WORKFLOW_TIMEOUT_MS), so it counts again from now (docs/decisions.md, "The fleet's analysis
      // overlaps its uploads").
      if (awaited.length > 0 && args.hold && args.hold.amount > 0) await renewHold(deps.db, { id: args.hold.reservationId, ttlMs: args.hold.ttlMs });
      await mapBounded(item.photos, VEHICLE_FETCH_CONCURRENCY, async (p, at) => {
        if (p.ref || (!p.url && !p.uploadId)) return;
        const upload = p.uploadId ? arrived.get(p.uploadId)! : null;
        if (upload && 'gone' in upload) {
          refused.push({ at, ...upload.gone });
          return;
        }
        const got = await takeBatchPhoto(photoDeps, item.userId, upload ? { upload: upload.finished } : { url: p.url! }, holder);
        Context.current().heartbeat(at);
        if ('refused' in got) {
          refused.push({ at, ...got.refused });
          return;
        }
        refs[at] = got.ref;
        await setVehiclePhotoRef(deps.db, { ...args, at, ref: got.ref });
      });
      // The pending vehicle names its photos now (a step that died leaves its leases to expire).
      await releaseLeases(deps.db, holder);
      const first = refused.sort((a, b) => a.at - b.at)[0];
      if (first) {
        await giveBack(args.hold, 'batch vehicle could not be made ready');
        return { error: { code: first.code, message: `photo ${first.at + 1} (${item.photos[first.at]!.source}): ${first.message}` } };
      }
      const taken = refs as ImageRef[];
      const vehicle = { ...args.context?.vehicle, ...item.vehicle };
      const context: AnalyzeContext | null = args.context || item.vehicle ? { ...args.context, ...(Object.keys(vehicle).length ? { vehicle } : {}) } : null;
      const sha256s = taken.map((r) => r.sha256);
      const setHash = vehicleSetHash({ sha256s, vehicle: context?.vehicle, version: getLens('vehicle-condition').version });
      const cached = await findVehicleReport(deps.db, item.userId, setHash);
      if (cached) {
        await recordCacheHit(deps.db, item.userId, sha256s);
        await giveBack(args.hold, 'batch vehicle answered from its stored report');
        return { cached: { reportId: cached.id } };
      }
      return { refs: taken, setHash, context };
    },
  };
}
