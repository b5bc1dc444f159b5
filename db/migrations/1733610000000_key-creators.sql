-- Up Migration

-- Who made a key in the console: when a person is removed from a workspace, the keys they created
-- are kept or revoked as the removal request says (web/members.ts). Keys made with `npm run admin`
-- or before this column have none.
ALTER TABLE api_keys ADD COLUMN created_by text REFERENCES console_users (id) ON DELETE SET NULL;
CREATE INDEX api_keys_created_by ON api_keys (created_by) WHERE created_by IS NOT NULL;

-- Down Migration
DROP INDEX api_keys_created_by;
ALTER TABLE api_keys DROP COLUMN created_by;
