-- Up Migration

-- An intake's hold on a blob it is about to store or found stored (docs/reliability.md "Intake
-- leases"): no delete (a failed request's clean-up, the collector) takes a leased blob. A lease
-- ends when its request does, or at `expires_at` (BLOB_GC_GRACE_MS) if its holder died.
CREATE TABLE blob_leases (
  sha256     text NOT NULL,
  holder     text NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (sha256, holder)
);
CREATE INDEX blob_leases_holder ON blob_leases (holder);
CREATE INDEX blob_leases_expires_at ON blob_leases (expires_at);

-- Down Migration
DROP TABLE blob_leases;
