-- Up Migration

-- Erasure and retention (docs/privacy.md). A deleted workspace keeps its `users` row as a tombstone:
-- the ledger (append-only, kept for accounting), its reservations and the once-per-mailbox claims
-- reference it. Its e-mail and name are replaced when it is erased, and every route treats it as gone.
ALTER TABLE users ADD COLUMN deleted_at timestamptz;
-- Days the original bytes of a photo are kept after the workspace last sent it; NULL = kept while
-- the registry holds the photo (the default). Lens records stay either way.
ALTER TABLE users ADD COLUMN retention_days integer CHECK (retention_days BETWEEN 1 AND 3650);

-- Bytes a request is using (from its intake until its run ended), so that a photo erased meanwhile
-- keeps them for that run (registry/photos.ts). A use its request never ended (a crash) stops
-- counting after BLOB_GC_GRACE_MS, longer than any run.
CREATE TABLE blob_uses (
  id       text PRIMARY KEY,
  sha256   text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  used_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX blob_uses_sha256 ON blob_uses (sha256);
CREATE INDEX blob_uses_used_at ON blob_uses (used_at);

-- A batch item whose photo was erased: its results are gone and the export says so.
ALTER TABLE batch_items ADD COLUMN erased_at timestamptz;

-- The ledger stays append-only for amounts, kinds and keys. The one change it accepts is erasing a
-- row's note (free text that may name people or photos) to '[erased]' when its workspace is erased.
CREATE OR REPLACE FUNCTION credit_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.note = '[erased]'
     AND (to_jsonb(NEW) - 'note') = (to_jsonb(OLD) - 'note') THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'credit_ledger is append-only: % refused', TG_OP;
END $$;

-- Down Migration
CREATE OR REPLACE FUNCTION credit_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'credit_ledger is append-only: % refused', TG_OP;
END $$;
ALTER TABLE batch_items DROP COLUMN erased_at;
DROP TABLE blob_uses;
ALTER TABLE users DROP COLUMN retention_days;
ALTER TABLE users DROP COLUMN deleted_at;
