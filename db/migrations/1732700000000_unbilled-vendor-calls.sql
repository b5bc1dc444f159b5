-- Up Migration

-- Vendor calls an account made without paying for them, per UTC day: calls of requests that bill
-- nothing (the free moderation lens) and calls of runs that failed and were released. Capped per
-- day (FREE_VENDOR_CALLS_PER_DAY), so neither can make Lenstack spend vendor tokens in a loop.
CREATE TABLE unbilled_vendor_calls (
  user_id  text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  day      date NOT NULL,
  calls    integer NOT NULL CHECK (calls >= 0),
  PRIMARY KEY (user_id, day)
);

-- Down Migration
DROP TABLE unbilled_vendor_calls;
