import { grantSignupCredits, SIGNUP_GRANTS } from '../credits/signup.ts';
import { inTransaction, type Db } from '../db/pool.ts';
import { accountNotFound } from './users.ts';

/**
 * Record that the account's owner added a card on file (the dashboard calls this after its payment processor
 * stored the card) and grant the signup's 4,000 community credits, in one transaction. The flag is
 * set once; calling again changes nothing and grants 0. The card is never charged automatically.
 */
export async function setCardOnFile(
  db: Db,
  args: { accountId: string; now?: Date },
): Promise<{ userId: string; cardOnFileAt: string; granted: number }> {
  return inTransaction(db, async (c) => {
    const r = await c.query<{ card_on_file_at: Date }>(
      'UPDATE users SET card_on_file_at = coalesce(card_on_file_at, $2) WHERE id = $1 RETURNING card_on_file_at',
      [args.accountId, args.now ?? new Date()],
    );
    const row = r.rows[0];
    if (!row) throw accountNotFound(args.accountId);
    const granted = await grantSignupCredits(c, args.accountId, 'cardOnFile');
    return { userId: args.accountId, cardOnFileAt: row.card_on_file_at.toISOString(), granted };
  });
}

export type CardOutcome = 'granted' | 'already-on-file' | 'card-used-elsewhere' | 'not-personal';

/**
 * The payment processor confirmed that a card was stored for workspace `accountId` (a SetupIntent
 * succeeded). The workspace is marked as having a card on file; the 4,000 credits are granted
 * once ever per workspace, only to a person's own workspace (they are signup credits), and only
 * for a card that has not earned them elsewhere: the card's fingerprint is recorded in the same
 * transaction, so one card cannot be added to account after account for 4,000 credits each.
 */
export async function recordCardOnFile(db: Db, args: { accountId: string; fingerprint: string; now?: Date }): Promise<{ outcome: CardOutcome; granted: number }> {
  return inTransaction(db, async (c) => {
    const u = await c.query<{ kind: string }>('SELECT kind FROM users WHERE id = $1 FOR UPDATE', [args.accountId]);
    const kind = u.rows[0]?.kind;
    if (!kind) throw accountNotFound(args.accountId);
    await c.query('UPDATE users SET card_on_file_at = coalesce(card_on_file_at, $2) WHERE id = $1', [args.accountId, args.now ?? new Date()]);
    if (kind !== 'personal') return { outcome: 'not-personal' as const, granted: 0 };
    // The card is claimed in the grant's transaction, and only by the grant: a card that earned
    // nothing here (this workspace had its credits already) stays free to earn them elsewhere.
    const claimed = await c.query('INSERT INTO card_fingerprints (fingerprint, user_id) VALUES ($1, $2) ON CONFLICT (fingerprint) DO NOTHING', [args.fingerprint, args.accountId]);
    if (claimed.rowCount === 0) {
      const owner = await c.query<{ user_id: string }>('SELECT user_id FROM card_fingerprints WHERE fingerprint = $1', [args.fingerprint]);
      if (owner.rows[0]?.user_id !== args.accountId) return { outcome: 'card-used-elsewhere' as const, granted: 0 };
      return { outcome: 'already-on-file' as const, granted: 0 };
    }
    const granted = await grantSignupCredits(c, args.accountId, 'cardOnFile');
    if (granted === 0) await c.query('DELETE FROM card_fingerprints WHERE fingerprint = $1 AND user_id = $2', [args.fingerprint, args.accountId]);
    return { outcome: granted > 0 ? ('granted' as const) : ('already-on-file' as const), granted };
  });
}

/** Whether the workspace has a card on file, and whether adding one would still earn the credits. */
export async function cardOnFileStatus(db: Db, accountId: string): Promise<{ at: string | null; creditsAvailable: boolean }> {
  const r = await db.query<{ card_on_file_at: Date | null; kind: string; granted: boolean }>(
    `SELECT u.card_on_file_at, u.kind,
            EXISTS (SELECT 1 FROM credit_ledger l WHERE l.user_id = u.id AND l.idempotency_key = $2) AS granted
       FROM users u WHERE u.id = $1`,
    [accountId, SIGNUP_GRANTS.cardOnFile.idempotencyKey],
  );
  const row = r.rows[0];
  if (!row) throw accountNotFound(accountId);
  return { at: row.card_on_file_at?.toISOString() ?? null, creditsAvailable: row.kind === 'personal' && !row.granted };
}
