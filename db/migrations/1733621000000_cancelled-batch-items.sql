-- Up Migration

-- A cancelled batch never runs its pending items: they fail as the workflow now fails them when
-- it cancels (batches/repository.ts setBatchStatus), so their bytes stop counting as kept (the
-- blob collector keeps pending items' images only). Batches cancelled before this kept them.
UPDATE batch_items i SET status = 'failed', error_code = 'BATCH_FINISHED',
       error = 'Not run: the batch was cancelled; its bytes are not kept. Send it again in a new batch', finished_at = now()
  FROM batches b
 WHERE b.id = i.batch_id AND b.status = 'cancelled' AND i.status = 'pending';

-- Down Migration
-- Nothing to undo: the items stay failed (their bytes may already be gone).
