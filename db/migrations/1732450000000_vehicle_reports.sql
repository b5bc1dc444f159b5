-- Up Migration

-- One multi-photo vehicle-condition report (SPEC stack vehicle-condition). Keyed for reuse by the
-- set of photos and the vehicle context it was written for (set_hash); one per workflow.
CREATE TABLE vehicle_reports (
  id             text PRIMARY KEY,
  user_id        text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  set_hash       text NOT NULL CHECK (set_hash ~ '^[0-9a-f]{64}$'),
  workflow_id    text NOT NULL UNIQUE,
  photo_sha256s  text[] NOT NULL,
  output         jsonb NOT NULL,
  version        text NOT NULL,
  provider       text NOT NULL,
  vendor         text NOT NULL,
  model          text NOT NULL,
  credits        integer NOT NULL CHECK (credits >= 0),
  produced_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX vehicle_reports_set ON vehicle_reports (user_id, set_hash, produced_at DESC);

-- Down Migration
DROP TABLE vehicle_reports;
