-- Up Migration

-- One writer per upload across every API and console process (uploads/locker.ts): tus's own lock
-- lives in one process's memory, so a client that resumed on another replica while the first was
-- still writing its cut PATCH could interleave two writers on one upload (an S3-backed upload then
-- held the right size and the wrong bytes). The lock is a lease on the upload's row: a token, when
-- it runs out (a holder that died), and whether another request is waiting for it.
ALTER TABLE uploads ADD COLUMN lock_token text;
ALTER TABLE uploads ADD COLUMN lock_until timestamptz;
ALTER TABLE uploads ADD COLUMN release_wanted boolean NOT NULL DEFAULT false;

-- Down Migration
ALTER TABLE uploads DROP COLUMN release_wanted;
ALTER TABLE uploads DROP COLUMN lock_until;
ALTER TABLE uploads DROP COLUMN lock_token;
