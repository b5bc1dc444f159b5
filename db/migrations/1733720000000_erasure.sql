-- Up Migration

-- Erasure and retention (docs/privacy.md). A deleted workspace keeps its `users` row as a tombstone:
-- the ledger (append-only, kept for accounting), its reservations and the once-per-mailbox claims
-- reference it. Its e-mail and name are replaced when it is erased, and every route treats it as gone.
ALTER TABLE users ADD COLUMN deleted_at timestamptz;
-- Days the original bytes of a photo are kept after the workspace last sent it; NULL = kept while
-- the registry holds the photo (the default). Lens records stay either way.
ALTER TABLE users ADD COLUMN retention_days integer CHECK (retention_days BETWEEN 1 AND 3650);

-- A photo erased while a request is using its bytes keeps them for that run through the request's
-- intake lease (blob_leases, 1733730000000_blob-leases.sql; registry/blob-leases.ts): no table here.

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
ALTER TABLE users DROP COLUMN retention_days;
ALTER TABLE users DROP COLUMN deleted_at;
