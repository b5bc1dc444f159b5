-- Up Migration

-- The Stripe customer a workspace's card is kept under (made the first time the owner adds one).
ALTER TABLE users ADD COLUMN stripe_customer_id text UNIQUE;

-- Every card that earned the card-on-file credits, by the processor's card fingerprint (the same
-- number gives the same fingerprint whoever adds it): one card earns the 4,000 credits for one
-- workspace only, however many accounts it is added to.
CREATE TABLE card_fingerprints (
  fingerprint  text PRIMARY KEY,
  user_id      text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at   timestamptz NOT NULL DEFAULT now()
);

-- Down Migration
DROP TABLE card_fingerprints;
ALTER TABLE users DROP COLUMN stripe_customer_id;
