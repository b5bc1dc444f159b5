import type { DbClient } from '../db/pool.ts';
import { grantIn } from './ledger.ts';

/**
 * A new user's free credits (SPEC "What the service does" 6): 1,000 for verifying an e-mail address
 * and 4,000 for adding a card on file, into the community pool, each once ever. The idempotency key
 * is the same for every attempt by a user, so the ledger's UNIQUE (user_id, idempotency_key) makes
 * a second grant impossible however many attempts race.
 */
export const SIGNUP_GRANTS = {
  emailVerified: { amount: 1_000, idempotencyKey: 'signup:email-verified', note: 'signup: e-mail verified' },
  cardOnFile: { amount: 4_000, idempotencyKey: 'signup:card-on-file', note: 'signup: card on file' },
} as const;

export type SignupStep = keyof typeof SIGNUP_GRANTS;

/** Grant one signup step inside the caller's transaction; returns the credits granted now (0 if earlier). */
export async function grantSignupCredits(c: DbClient, userId: string, step: SignupStep): Promise<number> {
  const g = SIGNUP_GRANTS[step];
  const applied = await grantIn(c, { userId, pool: 'community', amount: g.amount, idempotencyKey: g.idempotencyKey, note: g.note });
  return applied ? g.amount : 0;
}
