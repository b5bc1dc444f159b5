import { grantSignupCredits } from '../credits/signup.ts';
import { inTransaction, type Db } from '../db/pool.ts';
import { userNotFound } from './users.ts';

/**
 * Record that the user added a card on file (the dashboard calls this after its payment processor
 * stored the card) and grant the signup's 4,000 community credits, in one transaction. The flag is
 * set once; calling again changes nothing and grants 0. The card is never charged automatically.
 */
export async function setCardOnFile(
  db: Db,
  args: { userId: string; now?: Date },
): Promise<{ userId: string; cardOnFileAt: string; granted: number }> {
  return inTransaction(db, async (c) => {
    const r = await c.query<{ card_on_file_at: Date }>(
      'UPDATE users SET card_on_file_at = coalesce(card_on_file_at, $2) WHERE id = $1 RETURNING card_on_file_at',
      [args.userId, args.now ?? new Date()],
    );
    const row = r.rows[0];
    if (!row) throw userNotFound(args.userId);
    const granted = await grantSignupCredits(c, args.userId, 'cardOnFile');
    return { userId: args.userId, cardOnFileAt: row.card_on_file_at.toISOString(), granted };
  });
}
