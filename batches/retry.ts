import type { Client } from '@temporalio/client';
import type { AnalyzeDeps } from '../analysis/service.ts';
import { AppError } from '../core/errors.ts';
import { batchSummary, getBatch, itemSha256s, retryItem, setBatchStatus, type BatchSummary } from './repository.ts';
import { startBatchWorkflow } from './submit.ts';

/**
 * A failed item of the caller's batch back to pending (POST /v1/batches/{id}/items/{index}/retry
 * and the console's retry button): only a failed item whose bytes are kept runs again; a completed
 * batch starts a new run for it. 404 for another account's batch.
 */
export async function retryBatchItem(deps: Pick<AnalyzeDeps, 'db' | 'blobs' | 'config'> & { temporal: Client }, accountId: string, batchId: string, index: number): Promise<BatchSummary> {
  const batch = await getBatch(deps.db, accountId, batchId);
  if (batch.status === 'cancelled') throw new AppError('BATCH_FINISHED', 'The batch is cancelled; its photos do not run again');
  for (const sha256 of await itemSha256s(deps.db, { batchId: batch.id, index })) {
    if (!(await deps.blobs.has(sha256))) throw new AppError('ITEM_NOT_RETRYABLE', 'This photo’s bytes are no longer kept; send it again in a new batch');
  }
  const outcome = await retryItem(deps.db, { batchId: batch.id, index });
  if (outcome === 'not-failed') throw new AppError('ITEM_NOT_RETRYABLE', 'Only a failed photo runs again');
  if (outcome === 'no-image') throw new AppError('ITEM_NOT_RETRYABLE', 'This photo was refused when the batch was submitted (nothing was stored); send a corrected one in a new batch');
  // A completed batch has no workflow to pick the photo up: a new run starts for it.
  const now = await getBatch(deps.db, accountId, batch.id);
  if (now.status === 'completed') {
    await setBatchStatus(deps.db, { batchId: batch.id, status: 'running' });
    const total = (await batchSummary(deps.db, accountId, batch.id)).counts.total;
    await startBatchWorkflow(deps, { batchId: batch.id, accountId, kind: batch.kind, spec: batch.spec, itemCount: total });
  }
  return batchSummary(deps.db, accountId, batch.id);
}
