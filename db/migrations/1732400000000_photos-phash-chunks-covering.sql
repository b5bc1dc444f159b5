-- Up Migration

-- Fuzzy lookup (registry/lookup.ts) probes the pHash chunk indexes and checks each candidate's full
-- pHash. With phash in the index that check is an index-only scan: no heap page per candidate
-- (bench/lookup.ts: threshold 5 on 1M photos, ~2x faster; threshold 10, ~4x). Same keys and
-- names as before; INCLUDE turns B-tree deduplication off, so each index is larger (~30 MB per
-- million photos instead of ~8 MB).
DROP INDEX photos_phash_c0;
DROP INDEX photos_phash_c1;
DROP INDEX photos_phash_c2;
DROP INDEX photos_phash_c3;
CREATE INDEX photos_phash_c0 ON photos (user_id, phash_c0) INCLUDE (phash);
CREATE INDEX photos_phash_c1 ON photos (user_id, phash_c1) INCLUDE (phash);
CREATE INDEX photos_phash_c2 ON photos (user_id, phash_c2) INCLUDE (phash);
CREATE INDEX photos_phash_c3 ON photos (user_id, phash_c3) INCLUDE (phash);

-- Down Migration
DROP INDEX photos_phash_c0;
DROP INDEX photos_phash_c1;
DROP INDEX photos_phash_c2;
DROP INDEX photos_phash_c3;
CREATE INDEX photos_phash_c0 ON photos (user_id, phash_c0);
CREATE INDEX photos_phash_c1 ON photos (user_id, phash_c1);
CREATE INDEX photos_phash_c2 ON photos (user_id, phash_c2);
CREATE INDEX photos_phash_c3 ON photos (user_id, phash_c3);
