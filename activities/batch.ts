import {
  claimPendingItems,
  completeBatch,
  finishItem,
  setBatchStatus,
  setItemRef,
  setVehiclePhotos,
  urlToTake,
  vehicleToTake,
  workspaceShare,
  type BatchStatus,
  type ItemOutcome,
  type PauseReason,
} from '../batches/repository.ts';
import { mapBounded } from '../core/map-bounded.ts';
import { getLens } from '../lenses/index.ts';
import { recordCacheHit } from '../registry/photos.ts';
import { findVehicleReport, vehicleSetHash } from '../registry/vehicle-reports.ts';
import { intakeDepsFor } from '../analysis/intake.ts';
import { AppError } from '../core/errors.ts';
import { PUBLIC_INTERNET } from '../images/fetch.ts';
import { intakeImage } from '../images/intake.ts';
import type { AnalyzeContext, ImageRef } from '../workflows/types.ts';
import type { ActivityDeps } from './deps.ts';

/** The batch workflow's steps: each one idempotent statement on the batch's rows, or one fetch. */
export function batchActivities(deps: ActivityDeps) {
  return {
    claimBatchItems: (args: { batchId: string; afterIndex: number; limit: number }) => claimPendingItems(deps.db, args),
    finishBatchItem: (args: { batchId: string; index: number; outcome: ItemOutcome }) => finishItem(deps.db, args),
    completeBatch: (args: { batchId: string }) => completeBatch(deps.db, args.batchId),
    batchShare: (args: { userId: string; cap: number }) => workspaceShare(deps.db, args),
    setBatchStatus: (args: { batchId: string; status: BatchStatus; pauseReason?: PauseReason }) => setBatchStatus(deps.db, args),

    /**
     * Fetch a batch photo given by URL, when its turn comes: the same intake as analyze (address
     * policy, size and pixel limits, a decode that checks and fingerprints it, the blob stored).
     * A photo the intake refuses is an answer, not a failure of the step: the workflow records it.
     */
    /**
     * Make a vehicle of a batch ready for its report: photos given by URL fetched (as takeBatchUrl
     * does, each kept once taken, so a retried step fetches only what is missing), its context
     * (the batch's, the vehicle's own over it) and the report's reuse key. The same photos and
     * vehicle already reported on for this account answer from that report, for nothing.
     */
    async prepareBatchVehicle(args: { batchId: string; index: number; context?: AnalyzeContext }): Promise<
      | { error: { code: string; message: string } }
      | { cached: { reportId: string } }
      | { refs: ImageRef[]; setHash: string; context: AnalyzeContext | null }
    > {
      const item = await vehicleToTake(deps.db, args);
      if (!item) return { error: { code: 'INTERNAL_ERROR', message: 'The vehicle is not pending' } };
      const photos = [...item.photos];
      const refused: Array<{ at: number; code: string; message: string }> = [];
      await mapBounded(photos, 4, async (p, at) => {
        if (p.ref || !p.url) return;
        try {
          const img = await intakeImage({ url: p.url }, intakeDepsFor({ ...deps, fetchPolicy: deps.fetchPolicy ?? PUBLIC_INTERNET }, item.userId));
          photos[at] = { ...p, ref: { sha256: img.sha256, format: img.format, width: img.width, height: img.height, pHash: img.pHash, dHash: img.dHash } };
        } catch (err) {
          if (err instanceof AppError && err.status < 500) refused.push({ at, code: err.code, message: err.message });
          else throw err;
        }
      });
      if (photos.some((p, at) => p !== item.photos[at])) await setVehiclePhotos(deps.db, { ...args, photos });
      const first = refused.sort((a, b) => a.at - b.at)[0];
      if (first) return { error: { code: first.code, message: `photo ${first.at + 1} (${photos[first.at]!.source}): ${first.message}` } };
      const refs = photos.map((p) => p.ref!);
      const vehicle = { ...args.context?.vehicle, ...item.vehicle };
      const context: AnalyzeContext | null = args.context || item.vehicle ? { ...args.context, ...(Object.keys(vehicle).length ? { vehicle } : {}) } : null;
      const sha256s = refs.map((r) => r.sha256);
      const setHash = vehicleSetHash({ sha256s, vehicle: context?.vehicle, version: getLens('vehicle-condition').version });
      const cached = await findVehicleReport(deps.db, item.userId, setHash);
      if (cached) {
        await recordCacheHit(deps.db, item.userId, sha256s);
        return { cached: { reportId: cached.id } };
      }
      return { refs, setHash, context };
    },

    async takeBatchUrl(args: { batchId: string; index: number }): Promise<{ ref: ImageRef } | { error: { code: string; message: string } }> {
      const item = await urlToTake(deps.db, args);
      if (!item) return { error: { code: 'INTERNAL_ERROR', message: 'The photo has no URL to fetch' } };
      if (item.ref) return { ref: item.ref }; // taken by an earlier attempt of this step
      try {
        const img = await intakeImage({ url: item.url }, intakeDepsFor({ ...deps, fetchPolicy: deps.fetchPolicy ?? PUBLIC_INTERNET }, item.userId));
        const ref: ImageRef = { sha256: img.sha256, format: img.format, width: img.width, height: img.height, pHash: img.pHash, dHash: img.dHash };
        await setItemRef(deps.db, { ...args, ref });
        return { ref };
      } catch (err) {
        if (err instanceof AppError && err.status < 500) return { error: { code: err.code, message: err.message } };
        throw err;
      }
    },
  };
}
