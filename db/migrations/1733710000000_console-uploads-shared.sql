-- Up Migration

-- The console's batch uploads go through the API's upload service (uploads/service.ts): the same
-- tus server, the same datastore and the same blob store, so any console process continues any
-- upload and the bytes are stored once, under their SHA-256 (docs/decisions.md "Console uploads in
-- the shared upload service"). An upload made from the console names the person who made it (only
-- they may resume it or start a batch with it) and is claimed by the one batch that takes it.
ALTER TABLE uploads
  ADD COLUMN person_id text REFERENCES console_users (id) ON DELETE CASCADE,
  ADD COLUMN taken_at  timestamptz;
CREATE INDEX uploads_person ON uploads (person_id) WHERE person_id IS NOT NULL;

-- The console's own disk store is retired. Its rows name files on one console host's disk, which
-- no process reads any more: an upload under way when this runs is started again by the browser
-- (tus-js-client finds no upload at the stored URL and creates a new one).
DROP TABLE console_uploads;

-- Small previews of batch photos for the console's batch page (images/thumbnail.ts): made once
-- per photo from its bytes, 256 px WebP, shared by every workspace holding the same photo (the
-- console serves one only to members of a workspace whose batch or registry holds its SHA-256).
CREATE TABLE thumbnails (
  sha256      text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  webp        bytea NOT NULL,
  width       integer NOT NULL,
  height      integer NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- Down Migration
DROP TABLE thumbnails;
CREATE TABLE console_uploads (
  id            text PRIMARY KEY,
  workspace_id  text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  person_id     text NOT NULL REFERENCES console_users (id) ON DELETE CASCADE,
  size          bigint NOT NULL CHECK (size >= 0),
  taken_at      timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_uploads_person ON console_uploads (person_id);
CREATE INDEX console_uploads_created ON console_uploads (created_at);
DROP INDEX uploads_person;
ALTER TABLE uploads DROP COLUMN taken_at, DROP COLUMN person_id;
