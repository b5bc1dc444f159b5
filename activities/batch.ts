import { claimPendingItems, completeBatch, finishItem, setBatchStatus, setItemRef, urlToTake, workspaceShare, type BatchStatus, type PauseReason } from '../batches/repository.ts';
import { intakeDepsFor } from '../analysis/intake.ts';
import { AppError } from '../core/errors.ts';
import { PUBLIC_INTERNET } from '../images/fetch.ts';
import { intakeImage } from '../images/intake.ts';
import type { ImageRef } from '../workflows/types.ts';
import type { ActivityDeps } from './deps.ts';

/** The batch workflow's steps: each one idempotent statement on the batch's rows, or one fetch. */
export function batchActivities(deps: ActivityDeps) {
  return {
    claimBatchItems: (args: { batchId: string; afterIndex: number; limit: number }) => claimPendingItems(deps.db, args),
    finishBatchItem: (args: { batchId: string; index: number; outcome: { credits: number } | { code: string; message: string } }) => finishItem(deps.db, args),
    completeBatch: (args: { batchId: string }) => completeBatch(deps.db, args.batchId),
    batchShare: (args: { userId: string; cap: number }) => workspaceShare(deps.db, args),
    setBatchStatus: (args: { batchId: string; status: BatchStatus; pauseReason?: PauseReason }) => setBatchStatus(deps.db, args),

    /**
     * Fetch a batch photo given by URL, when its turn comes: the same intake as analyze (address
     * policy, size and pixel limits, a decode that checks and fingerprints it, the blob stored).
     * A photo the intake refuses is an answer, not a failure of the step: the workflow records it.
     */
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
