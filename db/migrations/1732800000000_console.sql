-- Up Migration

-- The web console's people and their sign-in, in better-auth's schema (web/auth.ts maps its
-- fields to these snake_case columns; generated with better-auth's getMigrations, then kept here
-- so one migration tool owns the database). A console user is a person; the account the API knows
-- (users.id: credits, keys, registry) is a workspace they are a member of.
CREATE TABLE console_users (
  id              text PRIMARY KEY,
  name            text NOT NULL,
  email           text NOT NULL UNIQUE,
  email_verified  boolean NOT NULL,
  image           text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Sessions: the cookie carries a signed token; revoking a row signs that browser out.
CREATE TABLE console_sessions (
  id          text PRIMARY KEY,
  expires_at  timestamptz NOT NULL,
  token       text NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL,
  ip_address  text,
  user_agent  text,
  user_id     text NOT NULL REFERENCES console_users (id) ON DELETE CASCADE
);
CREATE INDEX console_sessions_user_id_idx ON console_sessions (user_id);

-- How a person signs in: a password (argon2id hash in `password`) or an identity provider.
CREATE TABLE console_identities (
  id                        text PRIMARY KEY,
  account_id                text NOT NULL,
  provider_id               text NOT NULL,
  user_id                   text NOT NULL REFERENCES console_users (id) ON DELETE CASCADE,
  access_token              text,
  refresh_token             text,
  id_token                  text,
  access_token_expires_at   timestamptz,
  refresh_token_expires_at  timestamptz,
  scope                     text,
  password                  text,
  created_at                timestamptz NOT NULL DEFAULT now(),
  updated_at                timestamptz NOT NULL
);
CREATE INDEX console_identities_user_id_idx ON console_identities (user_id);

-- Short-lived tokens: e-mail verification, magic links, OAuth state.
CREATE TABLE console_verifications (
  id          text PRIMARY KEY,
  identifier  text NOT NULL,
  value       text NOT NULL,
  expires_at  timestamptz NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_verifications_identifier_idx ON console_verifications (identifier);

-- Who may act for a workspace (an API account), and how.
CREATE TABLE workspace_members (
  workspace_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  console_user_id  text NOT NULL REFERENCES console_users (id) ON DELETE CASCADE,
  role             text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, console_user_id)
);
CREATE INDEX workspace_members_person ON workspace_members (console_user_id);

-- Down Migration
DROP TABLE workspace_members;
DROP TABLE console_verifications;
DROP TABLE console_identities;
DROP TABLE console_sessions;
DROP TABLE console_users;
