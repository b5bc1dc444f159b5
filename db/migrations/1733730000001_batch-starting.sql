-- Up Migration

-- A batch is `starting` from the moment it is stored until its workflow started
-- (batches/submit.ts): a resend of its submission then answers 503 "still starting" instead of
-- 202 for a batch a failed start is about to take back, and the API shows no starting batch.
-- Batches stored before this are running (their workflows started).
ALTER TABLE batches DROP CONSTRAINT batches_status_check;
ALTER TABLE batches ADD CONSTRAINT batches_status_check CHECK (status IN ('starting', 'running', 'paused', 'cancelled', 'completed'));
CREATE INDEX batches_starting ON batches (created_at) WHERE status = 'starting';

-- Down Migration
UPDATE batches SET status = 'running' WHERE status = 'starting';
DROP INDEX batches_starting;
ALTER TABLE batches DROP CONSTRAINT batches_status_check;
ALTER TABLE batches ADD CONSTRAINT batches_status_check CHECK (status IN ('running', 'paused', 'cancelled', 'completed'));
