import { newId } from '../auth/repository.ts';
import { inTransaction, type Db, type DbClient } from '../db/pool.ts';

/**
 * The one writer of billing accounts (docs/architecture.md, "Who owns accounts"): a `users` row
 * (the account a key, a registry and a ledger belong to: a person's personal workspace, a team
 * workspace, or an account made by the admin CLI) and its `credit_accounts` row, always together.
 */
export interface NewBillingAccount {
  email: string;
  kind?: 'personal' | 'team';
  /** A team workspace's name. */
  name?: string;
  /** The address was proved (console sign-up, or a team made by a signed-in person). */
  verified?: boolean;
}

/** Inside the caller's transaction (a workspace is made with its first member). Returns the id. */
export async function createBillingAccountIn(c: DbClient, account: NewBillingAccount): Promise<string> {
  const id = newId('usr');
  await c.query(
    `INSERT INTO users (id, email, kind, name, email_verified_at) VALUES ($1, $2, $3, $4, CASE WHEN $5 THEN now() END)`,
    [id, account.email.trim(), account.kind ?? 'personal', account.name ?? null, account.verified ?? false],
  );
  await c.query('INSERT INTO credit_accounts (user_id) VALUES ($1)', [id]);
  return id;
}

/** A billing account and its credit account, together or not at all. */
export async function createBillingAccount(db: Db, email: string): Promise<{ accountId: string }> {
  return { accountId: await inTransaction(db, (c) => createBillingAccountIn(c, { email })) };
}
