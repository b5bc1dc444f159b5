-- Up Migration

-- A batch: many photos through the same lenses, run by one durable workflow (workflows/batch.ts).
-- `spec` is what every photo runs with (lenses, billable lenses, stack, context, moduleOptions) and
-- the export columns chosen at submit time (null: the lenses' default columns).
CREATE TABLE batches (
  id              text PRIMARY KEY,
  user_id         text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  status          text NOT NULL CHECK (status IN ('running', 'paused', 'cancelled', 'completed')),
  -- Why a paused batch waits: the caller asked, or the balance ran out (resume after buying).
  pause_reason    text CHECK (pause_reason IN ('requested', 'credits')),
  spec            jsonb NOT NULL,
  columns         jsonb,
  item_count      integer NOT NULL CHECK (item_count > 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  completed_at    timestamptz,
  CHECK ((status = 'paused') = (pause_reason IS NOT NULL))
);
CREATE INDEX batches_user ON batches (user_id, created_at DESC);

-- One row per submitted photo, in submission order. `ref` is the image as intake took it in
-- (sha256, format, size, perceptual hashes); a photo intake refused is failed from the start.
CREATE TABLE batch_items (
  batch_id     text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  index        integer NOT NULL CHECK (index >= 0),
  source       text NOT NULL,
  -- A photo given by URL is fetched by the worker when its turn comes (10,000 URLs are not
  -- fetched while the caller waits); `ref` is set then.
  url          text,
  ref          jsonb,
  status       text NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
  error_code   text,
  error        text,
  credits      integer NOT NULL DEFAULT 0,
  -- Each attempt runs the analysis under its own request id (a paused-for-credits photo runs again).
  attempts     integer NOT NULL DEFAULT 0,
  finished_at  timestamptz,
  PRIMARY KEY (batch_id, index),
  CHECK ((status = 'pending') = (finished_at IS NULL))
);
CREATE INDEX batch_items_pending ON batch_items (batch_id, index) WHERE status = 'pending';
-- A photo a batch has yet to analyze keeps its blob (registry/photos.ts referencedPhotos): a batch
-- paused for credits may wait longer than the blob collector's grace time.
CREATE INDEX batch_items_pending_sha256 ON batch_items ((ref->>'sha256')) WHERE status = 'pending';

-- Down Migration
DROP TABLE batch_items;
DROP TABLE batches;
