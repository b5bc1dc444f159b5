-- Up Migration

-- A vehicle of an awaitUploads batch waiting for uploads still arriving (docs/decisions.md, "The
-- fleet's analysis overlaps its uploads"): its batch workflow waits, holding no worker slot, until
-- one of them finishes or is refused. The upload service finds the waiting batches here and
-- signals them; a row is made by the worker before it looks at the uploads, and dropped when the
-- signal is sent or the wait ends.
CREATE TABLE upload_waits (
  upload_id text NOT NULL,
  batch_id text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  item_index integer NOT NULL,
  user_id text NOT NULL,
  since timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (upload_id, batch_id, item_index)
);
CREATE INDEX upload_waits_item ON upload_waits (batch_id, item_index);

-- Down Migration
DROP TABLE upload_waits;
