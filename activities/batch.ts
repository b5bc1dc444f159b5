import { claimPendingItems, completeBatch, finishItem, setBatchStatus, type BatchStatus, type PauseReason } from '../batches/repository.ts';
import type { ActivityDeps } from './deps.ts';

/** The batch workflow's steps: each one idempotent statement on the batch's rows. */
export function batchActivities(deps: ActivityDeps) {
  return {
    claimBatchItems: (args: { batchId: string; afterIndex: number; limit: number }) => claimPendingItems(deps.db, args),
    finishBatchItem: (args: { batchId: string; index: number; outcome: { credits: number } | { code: string; message: string } }) => finishItem(deps.db, args),
    completeBatch: (args: { batchId: string }) => completeBatch(deps.db, args.batchId),
    setBatchStatus: (args: { batchId: string; status: BatchStatus; pauseReason?: PauseReason }) => setBatchStatus(deps.db, args),
  };
}
