-- Up Migration

-- Workspaces beyond a person's own: a team workspace is an account like any other (credits, keys,
-- registry) with a name; its e-mail is its creator's, for billing mail. The address stays unique
-- among personal accounts only (those the API and `npm run admin` know by address).
ALTER TABLE users ADD COLUMN kind text NOT NULL DEFAULT 'personal' CHECK (kind IN ('personal', 'team'));
ALTER TABLE users ADD COLUMN name text;
DROP INDEX users_email_lower;
CREATE UNIQUE INDEX users_email_lower ON users (lower(email)) WHERE kind = 'personal';
-- findUserByEmail and the console's lookups by address still use an index.
CREATE INDEX users_email_lower_all ON users (lower(email));

-- Invitations by e-mail: the link's token is stored as its SHA-256 only; accepted once, by a person
-- signed in with that very address (verified), before it expires.
CREATE TABLE workspace_invitations (
  id            text PRIMARY KEY,
  workspace_id  text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  email         text NOT NULL,
  role          text NOT NULL CHECK (role IN ('admin', 'member')),
  token_hash    text NOT NULL UNIQUE,
  invited_by    text NOT NULL REFERENCES console_users (id) ON DELETE CASCADE,
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL,
  accepted_at   timestamptz,
  accepted_by   text REFERENCES console_users (id) ON DELETE SET NULL
);
CREATE INDEX workspace_invitations_workspace ON workspace_invitations (workspace_id, created_at);

-- Down Migration
DROP TABLE workspace_invitations;
DROP INDEX users_email_lower_all;
DROP INDEX users_email_lower;
CREATE UNIQUE INDEX users_email_lower ON users (lower(email));
ALTER TABLE users DROP COLUMN name;
ALTER TABLE users DROP COLUMN kind;
