-- Up Migration

-- Photos uploaded over the API by the tus protocol (uploads/service.ts), one row per upload, scoped
-- to the account that made it. The declared size counts against the account's upload quota from
-- creation; a finished upload carries the SHA-256 of its bytes (stored once in the blob store under
-- it) and what the header probe read. Expired when unused for UPLOAD_TTL_MS (the collector).
CREATE TABLE uploads (
  id            text PRIMARY KEY,
  user_id       text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  size          bigint NOT NULL CHECK (size >= 0),
  sha256        text CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  format        text,
  width         integer,
  height        integer,
  finished_at   timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz NOT NULL DEFAULT now(),
  -- Set when the collector expires it: its bytes are gone, the row stays a while so the id answers
  -- "expired: upload the photo again" rather than "no such upload".
  expired_at    timestamptz
);
CREATE INDEX uploads_user ON uploads (user_id);
CREATE INDEX uploads_last_used ON uploads (last_used_at);
CREATE INDEX uploads_sha256 ON uploads (sha256) WHERE sha256 IS NOT NULL;

-- Down Migration
DROP TABLE uploads;
