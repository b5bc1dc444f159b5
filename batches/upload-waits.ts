import type { Client } from '@temporalio/client';
import type { Db } from '../db/pool.ts';
import { uploadsSettled } from '../workflows/batch.ts';
import { batchWorkflowId } from './submit.ts';

/**
 * What the upload service calls once uploads finished or were refused (uploads/service.ts
 * `onSettled`): the batches with a vehicle waiting for one of them (upload_waits, registered by the
 * worker, activities/batch.ts vehicleUploadsArriving) are signalled, so the vehicle looks at its
 * uploads again at once. Each wait row is taken as it is signalled. A signal that cannot be sent
 * (Temporal away, the run ended) is let go: the waiting vehicle looks again on its own every
 * UPLOAD_RECHECK_MS, so this only makes it prompt. Never throws: the upload's answer does not
 * depend on it.
 */
export function signalUploadWaiters(deps: { db: Db; temporal: Client }): (accountId: string, uploadIds: string[]) => Promise<void> {
  return async (accountId, uploadIds) => {
    try {
      // Only the uploading account's waits: another account awaiting the same id (ids may be chosen
      // by the client) is neither woken nor unregistered by it; its own look finds the id not its own.
      const waits = await deps.db.query<{ batch_id: string; user_id: string }>('DELETE FROM upload_waits WHERE upload_id = ANY($1) AND user_id = $2 RETURNING batch_id, user_id', [uploadIds, accountId]);
      const batches = new Map(waits.rows.map((w) => [w.batch_id, w.user_id]));
      await Promise.all([...batches].map(([batchId, accountId]) => deps.temporal.workflow.getHandle(batchWorkflowId(accountId, batchId)).signal(uploadsSettled).catch(() => undefined)));
    } catch {
      // The database away: the backstop look finds the upload.
    }
  };
}
