import { findAccountByEmail } from '../auth/repository.ts';
import { createBillingAccount } from './billing-accounts.ts';
import { AppError, validationFailed } from '../core/errors.ts';
import type { Db } from '../db/pool.ts';

export interface Account {
  userId: string;
  email: string;
  emailVerifiedAt: string | null;
  cardOnFileAt: string | null;
  createdAt: string;
  packsPurchased: number;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** The message keeps the wire's word, "user" (docs/architecture.md, "Vocabulary"). */
export const accountNotFound = (accountId: string) => new AppError('NOT_FOUND', `No user ${accountId}`);

/** Throws 404 NOT_FOUND unless the billing account exists. */
export async function requireAccount(db: Db, accountId: string): Promise<void> {
  const r = await db.query('SELECT 1 FROM users WHERE id = $1', [accountId]);
  if (!r.rowCount) throw accountNotFound(accountId);
}

/** A new billing account with an empty credit account; credits come from signup steps and packs. */
export async function createAccount(db: Db, email: string): Promise<Account> {
  const address = email.trim();
  if (!EMAIL.test(address) || address.length > 320) throw validationFailed(`email: not an e-mail address: "${email}"`);
  if (await findAccountByEmail(db, address)) throw validationFailed('email: a user with this e-mail address exists');
  let accountId: string;
  try {
    ({ accountId } = await createBillingAccount(db, address));
  } catch (err) {
    // Two sign-ups with one address raced past the check: the unique index decides.
    if ((err as { code?: string }).code === '23505') throw validationFailed('email: a user with this e-mail address exists');
    throw err;
  }
  return getAccount(db, accountId);
}

export async function getAccount(db: Db, accountId: string): Promise<Account> {
  const r = await db.query<{
    id: string; email: string; email_verified_at: Date | null; card_on_file_at: Date | null; created_at: Date; packs_purchased: number | null;
  }>(
    `SELECT u.id, u.email, u.email_verified_at, u.card_on_file_at, u.created_at, a.packs_purchased
       FROM users u LEFT JOIN credit_accounts a ON a.user_id = u.id WHERE u.id = $1`,
    [accountId],
  );
  const u = r.rows[0];
  if (!u) throw accountNotFound(accountId);
  return {
    userId: u.id,
    email: u.email,
    emailVerifiedAt: u.email_verified_at?.toISOString() ?? null,
    cardOnFileAt: u.card_on_file_at?.toISOString() ?? null,
    createdAt: u.created_at.toISOString(),
    packsPurchased: u.packs_purchased ?? 0,
  };
}
