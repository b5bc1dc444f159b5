-- Up Migration

-- One x-request-id is one batch, as it is one analysis: a submission resent under the same id (its
-- answer was lost) gets the batch the first one made, not a second batch; another body under the
-- id is refused. request_hash is the fingerprint of the parsed body (analysis/request-binding.ts).
-- Batches made before this, and the console's (no x-request-id from a caller), have neither.
ALTER TABLE batches ADD COLUMN request_id text, ADD COLUMN request_hash text;
CREATE UNIQUE INDEX batches_user_request ON batches (user_id, request_id) WHERE request_id IS NOT NULL;

-- Down Migration
DROP INDEX batches_user_request;
ALTER TABLE batches DROP COLUMN request_id, DROP COLUMN request_hash;
