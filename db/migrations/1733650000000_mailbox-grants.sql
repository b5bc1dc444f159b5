-- Up Migration

-- The mailbox an address delivers to, for free credits that are once per person (docs/decisions.md
-- "Free credits once per mailbox"): lowercased, the +tag of the local part dropped, and for Gmail
-- (gmail.com, googlemail.com: one mailbox under both names) the dots of the local part dropped too.
-- NULL for something that is not an address. The one definition, used by the grants and this backfill.
CREATE FUNCTION mailbox_key(address text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
           WHEN p.local IS NULL OR p.domain IS NULL OR p.domain = '' THEN NULL
           WHEN p.domain IN ('gmail.com', 'googlemail.com') THEN replace(regexp_replace(p.local, '\+.*$', ''), '.', '') || '@gmail.com'
           ELSE regexp_replace(p.local, '\+.*$', '') || '@' || p.domain
         END
    FROM (SELECT substring(s FROM '^(.*)@[^@]*$') AS local, substring(s FROM '@([^@]*)$') AS domain
            FROM (SELECT lower(btrim(address)) AS s) a) p
$$;

-- Which workspace took a signup step's credits (credits/signup.ts) for a mailbox: one per mailbox
-- and step, whatever number of +tagged or dotted addresses deliver there.
CREATE TABLE signup_grant_claims (
  mailbox     text NOT NULL,
  step        text NOT NULL,
  user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (mailbox, step)
);

-- Which workspace took the first-pack bonus (credits/packs.ts) for the mailbox of the person who
-- made it (users.email: a personal workspace's owner, a team workspace's creator).
CREATE TABLE first_pack_bonus_claims (
  mailbox     text PRIMARY KEY,
  user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- What was granted before: the earliest grant per mailbox holds the claim. Credits already granted
-- twice stay granted (nothing is taken back from a balance); only new grants are refused.
INSERT INTO signup_grant_claims (mailbox, step, user_id, created_at)
SELECT DISTINCT ON (mailbox_key(u.email), l.idempotency_key)
       mailbox_key(u.email),
       CASE l.idempotency_key WHEN 'signup:email-verified' THEN 'emailVerified' ELSE 'cardOnFile' END,
       l.user_id, l.created_at
  FROM credit_ledger l JOIN users u ON u.id = l.user_id
 WHERE l.idempotency_key IN ('signup:email-verified', 'signup:card-on-file') AND mailbox_key(u.email) IS NOT NULL
 ORDER BY mailbox_key(u.email), l.idempotency_key, l.created_at, l.id;

INSERT INTO first_pack_bonus_claims (mailbox, user_id, created_at)
SELECT DISTINCT ON (mailbox_key(u.email)) mailbox_key(u.email), l.user_id, l.created_at
  FROM credit_ledger l JOIN users u ON u.id = l.user_id
 WHERE l.idempotency_key = 'pack:first-pack-bonus' AND mailbox_key(u.email) IS NOT NULL
 ORDER BY mailbox_key(u.email), l.created_at, l.id;

-- Down Migration
DROP TABLE first_pack_bonus_claims;
DROP TABLE signup_grant_claims;
DROP FUNCTION mailbox_key(text);
