-- Up Migration

-- E-mail verification tokens: only the SHA-256 of the token is stored; a token is used at most
-- once (used_at is set by one conditional UPDATE) and only before it expires.
CREATE TABLE email_verification_tokens (
  id          text PRIMARY KEY,
  user_id     text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  token_hash  text NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  email       text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz,
  CHECK (expires_at > created_at)
);
CREATE INDEX email_verification_tokens_user ON email_verification_tokens (user_id);

-- Credit pack purchases. The caller's idempotency key makes a retried purchase the same purchase;
-- the purchase id keys both the payment capture and the ledger grant.
CREATE TABLE credit_purchases (
  id               text PRIMARY KEY,
  user_id          text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  idempotency_key  text NOT NULL,
  pack             text NOT NULL CHECK (pack IN ('starter', 'pro', 'business')),
  credits          bigint NOT NULL CHECK (credits > 0),
  amount_cents     bigint NOT NULL CHECK (amount_cents > 0),
  currency         text NOT NULL DEFAULT 'usd',
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'granted', 'failed')),
  payment_id       text,
  bonus_credits    bigint NOT NULL DEFAULT 0 CHECK (bonus_credits >= 0),
  failure          text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  completed_at     timestamptz,
  UNIQUE (user_id, idempotency_key),
  CHECK ((status = 'granted') = (payment_id IS NOT NULL AND completed_at IS NOT NULL)),
  CHECK ((status = 'failed') = (failure IS NOT NULL)),
  CHECK (bonus_credits = 0 OR (status = 'granted' AND bonus_credits = credits))
);
CREATE INDEX credit_purchases_user ON credit_purchases (user_id, created_at);
-- The first-pack bonus (2×) exists at most once per user, whatever races above it.
CREATE UNIQUE INDEX credit_purchases_one_first_pack_bonus ON credit_purchases (user_id) WHERE bonus_credits > 0;

-- Captures recorded by the development/test payment gateway (payments/recording-gateway.ts).
-- A real gateway keeps this state on its side; this table stands in for it.
CREATE TABLE recorded_payments (
  id               text PRIMARY KEY,
  user_id          text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  idempotency_key  text NOT NULL UNIQUE,
  amount_cents     bigint NOT NULL CHECK (amount_cents > 0),
  description      text NOT NULL,
  status           text NOT NULL CHECK (status IN ('captured', 'declined')),
  decline_reason   text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  CHECK ((status = 'declined') = (decline_reason IS NOT NULL))
);
CREATE INDEX recorded_payments_user ON recorded_payments (user_id);

-- Down Migration
DROP TABLE recorded_payments;
DROP TABLE credit_purchases;
DROP TABLE email_verification_tokens;
