-- Up Migration

-- One row per (account, x-request-id): the fingerprint of the request it was first used for, and
-- the answer once the request succeeded. Postgres, not Temporal's retention, decides whether an id
-- was used: the same id with the same request gets the same answer, with another request a 409.
CREATE TABLE analysis_requests (
  user_id       text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  request_id    text NOT NULL,
  request_hash  text NOT NULL CHECK (request_hash ~ '^[0-9a-f]{64}$'),
  response      jsonb,
  created_at    timestamptz NOT NULL DEFAULT now(),
  answered_at   timestamptz,
  PRIMARY KEY (user_id, request_id)
);

-- Down Migration
DROP TABLE analysis_requests;
