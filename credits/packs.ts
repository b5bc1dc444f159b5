import { newId } from '../auth/repository.ts';
import { AppError, validationFailed } from '../core/errors.ts';
import { inTransaction, type Db, type DbClient } from '../db/pool.ts';
import { grantIn } from './ledger.ts';
import { isPackName, PACK_NAMES, packGrant, PACKS, type Pack, type PackName } from './price-book.ts';

/**
 * The purchase side of credit packs: the rows of credit_purchases and the grant that completes
 * one (docs/decisions.md "Accounts, packs and signup grants"). Prices come from the price book
 * (credits/price-book.ts); paying goes through the payments interface (payments/purchase.ts).
 */

/**
 * Ledger idempotency key of the first-pack bonus. One key per account for every purchase, so the
 * ledger's UNIQUE (user_id, idempotency_key) admits exactly one bonus row, whatever races.
 */
export const FIRST_PACK_BONUS_KEY = 'pack:first-pack-bonus';
export const purchaseLedgerKey = (purchaseId: string) => `pack:purchase:${purchaseId}`;
export const purchaseCaptureKey = (purchaseId: string) => `lenstack:purchase:${purchaseId}`;

export type PurchaseStatus = 'pending' | 'granted' | 'failed';

export interface Purchase {
  purchaseId: string;
  userId: string;
  idempotencyKey: string;
  pack: PackName;
  credits: number;
  bonusCredits: number;
  amountCents: number;
  currency: 'usd';
  status: PurchaseStatus;
  paymentId: string | null;
  failure: string | null;
  createdAt: string;
  completedAt: string | null;
}

interface PurchaseRow {
  id: string;
  user_id: string;
  idempotency_key: string;
  pack: PackName;
  credits: number;
  bonus_credits: number;
  amount_cents: number;
  status: PurchaseStatus;
  payment_id: string | null;
  failure: string | null;
  created_at: Date;
  completed_at: Date | null;
}

const COLUMNS = 'id, user_id, idempotency_key, pack, credits, bonus_credits, amount_cents, status, payment_id, failure, created_at, completed_at';

const toPurchase = (r: PurchaseRow): Purchase => ({
  purchaseId: r.id,
  userId: r.user_id,
  idempotencyKey: r.idempotency_key,
  pack: r.pack,
  credits: r.credits,
  bonusCredits: r.bonus_credits,
  amountCents: r.amount_cents,
  currency: 'usd',
  status: r.status,
  paymentId: r.payment_id,
  failure: r.failure,
  createdAt: r.created_at.toISOString(),
  completedAt: r.completed_at?.toISOString() ?? null,
});

async function loadPurchase(db: Db, accountId: string, idempotencyKey: string): Promise<Purchase> {
  const r = await db.query<PurchaseRow>(`SELECT ${COLUMNS} FROM credit_purchases WHERE user_id = $1 AND idempotency_key = $2`, [accountId, idempotencyKey]);
  return toPurchase(r.rows[0]!);
}

/**
 * The mailbox of the person a workspace belongs to (`users.email`: a personal workspace's owner, a
 * team workspace's creator), normalised like the signup grants' (db's `mailbox_key`). The
 * first-pack bonus is once per person: once per this mailbox, whatever number of workspaces it
 * makes (docs/decisions.md "Free credits once per mailbox").
 */
const BONUS_MAILBOX = `coalesce((SELECT mailbox_key(email) FROM users WHERE id = $1), 'account:' || $1)`;

/** Whether the account's next pack would still carry the first-pack bonus: not taken here, nor by another workspace of the same person. */
export async function firstPackBonusAvailable(db: Db, accountId: string): Promise<boolean> {
  const r = await db.query(
    `SELECT 1 FROM credit_ledger WHERE user_id = $1 AND idempotency_key = $2
     UNION ALL SELECT 1 FROM first_pack_bonus_claims WHERE mailbox = ${BONUS_MAILBOX} AND user_id <> $1`,
    [accountId, FIRST_PACK_BONUS_KEY],
  );
  return (r.rowCount ?? 0) === 0;
}

/** Claim the person's one first-pack bonus for workspace `accountId` inside the grant's transaction; false when another workspace of theirs has it. */
async function claimFirstPackBonus(c: DbClient, accountId: string): Promise<boolean> {
  const claimed = await c.query(`INSERT INTO first_pack_bonus_claims (mailbox, user_id) VALUES (${BONUS_MAILBOX}, $1) ON CONFLICT (mailbox) DO NOTHING`, [accountId]);
  if (claimed.rowCount === 1) return true;
  // Claimed before, or by a racing purchase now committed (this statement sees it).
  const holder = await c.query<{ user_id: string }>(`SELECT user_id FROM first_pack_bonus_claims WHERE mailbox = ${BONUS_MAILBOX}`, [accountId]);
  return holder.rows[0]?.user_id === accountId;
}

/** 404 unless the account has credits to buy for (every account has its credit row from creation). */
async function requireAccount(db: Db, accountId: string): Promise<void> {
  const r = await db.query('SELECT 1 FROM credit_accounts WHERE user_id = $1', [accountId]);
  if (!r.rowCount) throw new AppError('NOT_FOUND', `No user ${accountId}`);
}

export async function listPurchases(db: Db, accountId: string): Promise<Purchase[]> {
  await requireAccount(db, accountId);
  const r = await db.query<PurchaseRow>(`SELECT ${COLUMNS} FROM credit_purchases WHERE user_id = $1 ORDER BY created_at, id`, [accountId]);
  return r.rows.map(toPurchase);
}

/**
 * Grant a pending purchase in one transaction keyed by its id: the credits recorded on it (what
 * the buyer was shown and paid for, even if the price book changed since) and, if no purchase has
 * taken it yet, the first-pack bonus. A concurrent or repeated grant of the same purchase finds it
 * no longer pending and grants nothing.
 */
async function grantPending(db: Db, purchase: Purchase, p: Pack, paymentId: string): Promise<void> {
  await inTransaction(db, async (c) => {
    const locked = await c.query<{ status: PurchaseStatus }>('SELECT status FROM credit_purchases WHERE id = $1 FOR UPDATE', [purchase.purchaseId]);
    if (locked.rows[0]!.status !== 'pending') return;
    await grantIn(c, {
      accountId: purchase.userId,
      pool: 'purchased',
      amount: purchase.credits,
      kind: 'purchase',
      idempotencyKey: purchaseLedgerKey(purchase.purchaseId),
      note: `${p.label} pack, ${purchase.purchaseId}, payment ${paymentId}`,
    });
    const firstPackBonus = packGrant({ ...p, credits: purchase.credits, priceCents: purchase.amountCents }, true).bonusCredits;
    const bonus = (await claimFirstPackBonus(c, purchase.userId)) && await grantIn(c, {
      accountId: purchase.userId,
      pool: 'purchased',
      amount: firstPackBonus,
      idempotencyKey: FIRST_PACK_BONUS_KEY,
      note: `first pack 2x: ${purchase.purchaseId}`,
    });
    await c.query(
      `UPDATE credit_purchases SET status = 'granted', payment_id = $2, bonus_credits = $3, completed_at = now() WHERE id = $1`,
      [purchase.purchaseId, paymentId, bonus ? firstPackBonus : 0],
    );
  });
}

/**
 * Record a pending purchase of a pack (the caller's idempotency key makes a retry, or a double
 * click, the same purchase) at the price book's price; nothing is paid or granted yet. The same
 * key for another pack is 400. `created` is false when this key had been seen before.
 */
export async function recordPurchase(db: Db, args: { accountId: string; pack: string; idempotencyKey: string }): Promise<{ purchase: Purchase; created: boolean }> {
  if (!isPackName(args.pack)) throw validationFailed(`pack: must be one of ${PACK_NAMES.join(', ')}, got "${args.pack}"`);
  if (args.idempotencyKey.length < 1 || args.idempotencyKey.length > 200) throw validationFailed('idempotencyKey: 1 to 200 characters');
  await requireAccount(db, args.accountId);
  const p = PACKS[args.pack];
  const ins = await db.query(
    `INSERT INTO credit_purchases (id, user_id, idempotency_key, pack, credits, amount_cents)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (user_id, idempotency_key) DO NOTHING`,
    [newId('pur'), args.accountId, args.idempotencyKey, p.name, p.credits, p.priceCents],
  );
  const purchase = await loadPurchase(db, args.accountId, args.idempotencyKey);
  if (purchase.pack !== p.name) throw validationFailed(`idempotencyKey: already used for a ${purchase.pack} purchase (${purchase.purchaseId})`);
  return { purchase, created: (ins.rowCount ?? 0) === 1 };
}

/** The payment was refused for good: the purchase fails, grants nothing, and never will. */
export async function failPurchase(db: Db, purchase: Purchase, reason: string): Promise<Purchase> {
  await db.query(`UPDATE credit_purchases SET status = 'failed', failure = $2, completed_at = now() WHERE id = $1 AND status = 'pending'`, [purchase.purchaseId, reason]);
  return loadPurchase(db, purchase.userId, purchase.idempotencyKey);
}

/** Grant a pending purchase paid by `paymentId` (once, whatever races); the purchase as it now stands. */
export async function completePurchase(db: Db, purchase: Purchase, paymentId: string): Promise<Purchase> {
  await grantPending(db, purchase, PACKS[purchase.pack], paymentId);
  return loadPurchase(db, purchase.userId, purchase.idempotencyKey);
}

/**
 * The processor says purchase `purchaseId` was paid `amountCents`: grant it, once, whatever how
 * many times the event arrives. An amount other than the pack's price grants nothing and marks the
 * purchase failed (someone changed the price on the way). An event that names another account
 * than the purchase's (`accountId`, when the event carries one) grants nothing and leaves the purchase
 * as it was. Unknown purchases are reported, not invented.
 */
export async function fulfilPaidPurchase(
  db: Db,
  args: { purchaseId: string; amountCents: number; paymentId: string; accountId?: string | null },
): Promise<{ outcome: 'granted' | 'already-granted' | 'amount-mismatch' | 'account-mismatch' | 'unknown'; purchase?: Purchase }> {
  const r = await db.query<PurchaseRow>(`SELECT ${COLUMNS} FROM credit_purchases WHERE id = $1`, [args.purchaseId]);
  const row = r.rows[0];
  if (!row) return { outcome: 'unknown' };
  const purchase = toPurchase(row);
  if (args.accountId != null && args.accountId !== purchase.userId) return { outcome: 'account-mismatch' };
  if (purchase.status === 'granted') return { outcome: 'already-granted', purchase };
  if (purchase.status !== 'pending') return { outcome: 'amount-mismatch', purchase };
  if (args.amountCents !== purchase.amountCents) {
    return { outcome: 'amount-mismatch', purchase: await failPurchase(db, purchase, `paid ${args.amountCents} cents, the pack costs ${purchase.amountCents}`) };
  }
  return { outcome: 'granted', purchase: await completePurchase(db, purchase, args.paymentId) };
}
