import type { DbClient } from '../db/pool.ts';
import { grantIn } from './ledger.ts';

/**
 * A new account's free credits (docs/contract.md "What the service does" 5): 1,000 for verifying an e-mail address
 * and 4,000 for adding a card on file, into the community pool, each once ever. The idempotency key
 * is the same for every attempt by an account, so the ledger's UNIQUE (user_id, idempotency_key) makes
 * a second grant impossible however many attempts race.
 */
export const SIGNUP_GRANTS = {
  emailVerified: { amount: 1_000, idempotencyKey: 'signup:email-verified', note: 'signup: e-mail verified' },
  cardOnFile: { amount: 4_000, idempotencyKey: 'signup:card-on-file', note: 'signup: card on file' },
} as const;

export type SignupStep = keyof typeof SIGNUP_GRANTS;

/**
 * Grant one signup step inside the caller's transaction; returns the credits granted now (0 if
 * earlier). Once per mailbox too, not only per account: the step is claimed for the mailbox of the
 * account's address (db's `mailbox_key`: lowercased, +tag dropped, Gmail's dots dropped), so
 * `ada+1@…`, `ada+2@…` and `ADA@…` earn it once between them (docs/decisions.md "Free credits once
 * per mailbox"). The claim commits with the grant; another account of the mailbox gets 0.
 */
export async function grantSignupCredits(c: DbClient, accountId: string, step: SignupStep): Promise<number> {
  const g = SIGNUP_GRANTS[step];
  const mailbox = `coalesce((SELECT mailbox_key(email) FROM users WHERE id = $1), 'account:' || $1)`;
  const claimed = await c.query(
    `INSERT INTO signup_grant_claims (mailbox, step, user_id) VALUES (${mailbox}, $2, $1) ON CONFLICT (mailbox, step) DO NOTHING`,
    [accountId, step],
  );
  if (claimed.rowCount === 0) {
    // Claimed before (or by a racing transaction, now committed: this statement sees it).
    const holder = await c.query<{ user_id: string }>(`SELECT user_id FROM signup_grant_claims WHERE mailbox = ${mailbox} AND step = $2`, [accountId, step]);
    if (holder.rows[0]?.user_id !== accountId) return 0;
  }
  const applied = await grantIn(c, { accountId, pool: 'community', amount: g.amount, idempotencyKey: g.idempotencyKey, note: g.note });
  return applied ? g.amount : 0;
}
