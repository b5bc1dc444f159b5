-- Up Migration

-- A request that names uploads is bound by the SHA-256 of their bytes (request_hash), which needs
-- the uploads. This second fingerprint is of the body as sent (upload ids as ids): an idempotent
-- resend of an answered request finds its stored answer by it before any upload is resolved, so
-- an upload deleted or expired since does not turn the resend into a 404 (analysis/service.ts).
-- NULL when the request named no upload.
ALTER TABLE analysis_requests ADD COLUMN request_hash_by_id text;

-- Down Migration
ALTER TABLE analysis_requests DROP COLUMN request_hash_by_id;
