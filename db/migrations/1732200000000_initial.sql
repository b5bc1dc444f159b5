-- Up Migration

-- Accounts. A user is the unit of credits and of the photo registry.
CREATE TABLE users (
  id                 text PRIMARY KEY,
  email              text NOT NULL,
  email_verified_at  timestamptz,
  card_on_file_at    timestamptz,
  created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_lower ON users (lower(email));

-- API keys are stored only as SHA-256 of the full key; prefix + last4 let a dashboard show them.
CREATE TABLE api_keys (
  id          text PRIMARY KEY,
  user_id     text REFERENCES users(id) ON DELETE CASCADE,
  key_hash    text NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
  kind        text NOT NULL CHECK (kind IN ('live', 'test')),
  prefix      text NOT NULL,
  last4       text NOT NULL CHECK (length(last4) = 4),
  name        text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz,
  -- A live key always belongs to a user; only a sandbox key may be anonymous.
  CHECK (kind = 'test' OR user_id IS NOT NULL)
);
CREATE INDEX api_keys_user ON api_keys (user_id);

-- One row per user; balances can never go negative, so a double spend fails at the database.
CREATE TABLE credit_accounts (
  user_id            text PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
  community_balance  bigint NOT NULL DEFAULT 0 CHECK (community_balance >= 0),
  purchased_balance  bigint NOT NULL DEFAULT 0 CHECK (purchased_balance >= 0),
  reserved           bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0),
  -- Running totals for the invariant granted + purchased = balances + reserved + charged.
  community_granted  bigint NOT NULL DEFAULT 0 CHECK (community_granted >= 0),
  purchased_granted  bigint NOT NULL DEFAULT 0 CHECK (purchased_granted >= 0),
  charged            bigint NOT NULL DEFAULT 0 CHECK (charged >= 0),
  referral_bonus     bigint NOT NULL DEFAULT 0 CHECK (referral_bonus >= 0),
  packs_purchased    integer NOT NULL DEFAULT 0 CHECK (packs_purchased >= 0),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  CHECK (community_granted + purchased_granted = community_balance + purchased_balance + reserved + charged)
);

-- A reservation holds credits for one in-flight call. It is closed exactly once.
CREATE TABLE reservations (
  id               text PRIMARY KEY,
  user_id          text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  amount           bigint NOT NULL CHECK (amount > 0),
  from_community   bigint NOT NULL CHECK (from_community >= 0),
  from_purchased   bigint NOT NULL CHECK (from_purchased >= 0),
  status           text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'settled', 'released')),
  settled_amount   bigint CHECK (settled_amount >= 0 AND settled_amount <= amount),
  workflow_id      text,
  reason           text,
  expires_at       timestamptz NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  closed_at        timestamptz,
  CHECK (from_community + from_purchased = amount),
  CHECK ((status = 'open') = (closed_at IS NULL)),
  CHECK ((status = 'settled') = (settled_amount IS NOT NULL))
);
CREATE INDEX reservations_open_expiry ON reservations (expires_at) WHERE status = 'open';
CREATE INDEX reservations_user ON reservations (user_id);

-- Append-only ledger: every grant, purchase, reservation, settlement and release.
CREATE TABLE credit_ledger (
  id               bigserial PRIMARY KEY,
  user_id          text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  kind             text NOT NULL CHECK (kind IN ('grant', 'purchase', 'reserve', 'settle', 'release')),
  idempotency_key  text NOT NULL,
  reservation_id   text REFERENCES reservations(id),
  community_delta  bigint NOT NULL DEFAULT 0,
  purchased_delta  bigint NOT NULL DEFAULT 0,
  reserved_delta   bigint NOT NULL DEFAULT 0,
  charged_delta    bigint NOT NULL DEFAULT 0,
  note             text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (user_id, idempotency_key)
);
-- Each reservation has at most one reserve row and one closing row.
CREATE UNIQUE INDEX credit_ledger_one_reserve ON credit_ledger (reservation_id) WHERE kind = 'reserve';
CREATE UNIQUE INDEX credit_ledger_one_close ON credit_ledger (reservation_id) WHERE kind IN ('settle', 'release');
CREATE INDEX credit_ledger_user ON credit_ledger (user_id, id);

CREATE FUNCTION credit_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'credit_ledger is append-only: % refused', TG_OP;
END $$;
CREATE TRIGGER credit_ledger_no_change BEFORE UPDATE OR DELETE ON credit_ledger
  FOR EACH ROW EXECUTE FUNCTION credit_ledger_append_only();
CREATE TRIGGER credit_ledger_no_truncate BEFORE TRUNCATE ON credit_ledger
  FOR EACH STATEMENT EXECUTE FUNCTION credit_ledger_append_only();

-- Photo registry: per (user, sha256). Hashes are 64-bit, stored as bigint; the four 16-bit
-- chunks of the pHash back multi-index hashing for fuzzy lookup.
CREATE TABLE photos (
  user_id              text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  sha256               text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  phash                bigint NOT NULL,
  dhash                bigint NOT NULL,
  phash_c0             integer NOT NULL,
  phash_c1             integer NOT NULL,
  phash_c2             integer NOT NULL,
  phash_c3             integer NOT NULL,
  first_analyzed_at    timestamptz NOT NULL DEFAULT now(),
  last_analyzed_at     timestamptz NOT NULL DEFAULT now(),
  total_credits_spent  bigint NOT NULL DEFAULT 0 CHECK (total_credits_spent >= 0),
  analyze_call_count   bigint NOT NULL DEFAULT 0 CHECK (analyze_call_count >= 0),
  PRIMARY KEY (user_id, sha256)
);
CREATE INDEX photos_phash_c0 ON photos (user_id, phash_c0);
CREATE INDEX photos_phash_c1 ON photos (user_id, phash_c1);
CREATE INDEX photos_phash_c2 ON photos (user_id, phash_c2);
CREATE INDEX photos_phash_c3 ON photos (user_id, phash_c3);

-- Every lens run is an event; lens_records is the latest per (user, sha256, lens).
CREATE TABLE lens_events (
  id            text PRIMARY KEY,
  user_id       text NOT NULL,
  sha256        text NOT NULL,
  lens          text NOT NULL,
  workflow_id   text NOT NULL,
  output        jsonb NOT NULL,
  version       text NOT NULL,
  co_run_hash   text NOT NULL,
  provider      text NOT NULL,
  vendor        text NOT NULL,
  model         text NOT NULL,
  credits       integer NOT NULL CHECK (credits >= 0),
  produced_at   timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (user_id, sha256) REFERENCES photos (user_id, sha256) ON DELETE CASCADE,
  -- A workflow (re)running its persist step never writes the same event twice.
  UNIQUE (workflow_id, sha256, lens)
);
CREATE INDEX lens_events_photo ON lens_events (user_id, sha256, produced_at);

CREATE TABLE lens_records (
  user_id       text NOT NULL,
  sha256        text NOT NULL,
  lens          text NOT NULL,
  event_id      text NOT NULL REFERENCES lens_events(id),
  output        jsonb NOT NULL,
  version       text NOT NULL,
  co_run_hash   text NOT NULL,
  provider      text NOT NULL,
  vendor        text NOT NULL,
  model         text NOT NULL,
  produced_at   timestamptz NOT NULL,
  PRIMARY KEY (user_id, sha256, lens),
  FOREIGN KEY (user_id, sha256) REFERENCES photos (user_id, sha256) ON DELETE CASCADE
);

-- One row per analysis whose results were persisted: makes the persist step exactly-once
-- per workflow even when Temporal runs the activity again.
CREATE TABLE analysis_runs (
  workflow_id     text PRIMARY KEY,
  user_id         text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  request_id      text NOT NULL,
  image_count     integer NOT NULL CHECK (image_count > 0),
  credits         bigint NOT NULL CHECK (credits >= 0),
  per_image       integer[] NOT NULL DEFAULT '{}',
  persisted_at    timestamptz NOT NULL DEFAULT now()
);

-- Saved bespoke extraction schemas (bsk_ + 32 hex), private to their user.
CREATE TABLE bespoke_schemas (
  id          text PRIMARY KEY CHECK (id ~ '^bsk_[0-9a-f]{32}$'),
  user_id     text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  schema      jsonb NOT NULL,
  schema_hash text NOT NULL,
  prompt      text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (user_id, schema_hash)
);

-- Down Migration
DROP TABLE bespoke_schemas;
DROP TABLE analysis_runs;
DROP TABLE lens_records;
DROP TABLE lens_events;
DROP TABLE photos;
DROP TABLE credit_ledger;
DROP FUNCTION credit_ledger_append_only();
DROP TABLE reservations;
DROP TABLE credit_accounts;
DROP TABLE api_keys;
DROP TABLE users;
