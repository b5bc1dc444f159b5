-- Up Migration

-- An upload refused when it finished (not an image we take) loses its row and bytes at once; a
-- vehicle batch that awaits the upload (docs/decisions.md, "The fleet's analysis overlaps its
-- uploads") must still learn why it will never finish, rather than wait for its deadline.
CREATE TABLE refused_uploads (
  id text PRIMARY KEY,
  user_id text NOT NULL,
  code text NOT NULL,
  message text NOT NULL,
  refused_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refused_uploads_refused_at ON refused_uploads (refused_at);

-- Down Migration
DROP TABLE refused_uploads;
