-- Up Migration

-- Every API request a workspace's keys made, for the console's Requests section (issue 26 §3,
-- docs/decisions.md "The console's Requests log"). Written by the API in batches from a bounded
-- in-memory buffer (requestlog/buffer.ts), so a row may be lost when Postgres is away; kept 30
-- days (the blob collector sweeps older rows). No key material, no image bytes, no request
-- bodies: the key by id, and for a refused request only the error envelope it was answered with.
CREATE TABLE api_requests (
  id           bigserial PRIMARY KEY,
  user_id      text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  at           timestamptz NOT NULL,
  key_id       text NOT NULL,
  operation    text NOT NULL,
  method       text NOT NULL,
  status       smallint NOT NULL,
  error_code   text,
  credits      integer,
  latency_ms   integer NOT NULL CHECK (latency_ms >= 0),
  request_id   text NOT NULL,
  -- The stored analysis this request answered with (analysis_requests.response), if any.
  analysis_id  text,
  error        jsonb
);
-- The console's one query: a workspace's newest first, optionally narrowed, keyset by (at, id).
CREATE INDEX api_requests_workspace_time ON api_requests (user_id, at DESC, id DESC);
-- The collector's sweep of rows past 30 days.
CREATE INDEX api_requests_at ON api_requests (at);

-- Down Migration
DROP TABLE api_requests;
