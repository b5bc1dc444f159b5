-- Up Migration

-- Files a person uploads from the console for a batch (resumable, tus: web/uploads.ts) until the
-- batch takes them or they expire. The declared size counts against the person's upload quota
-- from the moment the upload is created, so unfinished uploads cannot fill the disk either.
CREATE TABLE console_uploads (
  id            text PRIMARY KEY,
  workspace_id  text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  person_id     text NOT NULL REFERENCES console_users (id) ON DELETE CASCADE,
  size          bigint NOT NULL CHECK (size >= 0),
  -- Set when a batch submission claims it: a second submission cannot take it too.
  taken_at      timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_uploads_person ON console_uploads (person_id);
CREATE INDEX console_uploads_created ON console_uploads (created_at);

-- Down Migration
DROP TABLE console_uploads;
