-- Up Migration

-- The console submission that claimed an upload for its batch, by its x-request-id (docs/decisions.md,
-- "Console batches: one request id, one batch"): the same submission sent again after its answer
-- was lost, or after the process holding the claim died, may take the upload again; any other
-- submission is still refused. NULL for a claim made without a request id.
ALTER TABLE uploads ADD COLUMN taken_by text;

-- Down Migration
ALTER TABLE uploads DROP COLUMN taken_by;
