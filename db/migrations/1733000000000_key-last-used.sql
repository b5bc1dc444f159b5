-- Up Migration

-- When a key was last used, at minute resolution (auth/key-usage.ts writes it at most once a minute
-- per key and process), for the console's key list. NULL: never used.
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;

-- Down Migration
ALTER TABLE api_keys DROP COLUMN last_used_at;
