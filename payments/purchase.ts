import { completePurchase, failPurchase, purchaseCaptureKey, recordPurchase, type Purchase } from '../credits/packs.ts';
import { packDescription, PACKS } from '../credits/price-book.ts';
import type { Db } from '../db/pool.ts';
import { PaymentDeclinedError, type PaymentGateway } from './gateway.ts';

/**
 * The one purchase path, the API's (POST /v1/internal/accounts/{userId}/purchases) and the
 * console's (POST /api/v1/workspaces/{id}/purchases) alike, whichever gateway is configured:
 *
 * 1. record the purchase, pending, at the price book's price, under the caller's idempotency key
 *    (a retry or a double click is the same purchase; the same key for another pack is 400);
 * 2. a purchase no longer pending is answered as it stands: never paid or granted again;
 * 3. start its payment, keyed by the purchase id (a retry never charges twice):
 *    - paid at once (the recording gateway): granted now, in one transaction keyed by the
 *      purchase (the pack's credits, and the first-pack bonus if the person has not had it);
 *    - a hosted page (Stripe Checkout): the purchase stays pending and the buyer is sent to
 *      `checkoutUrl`; the processor's signed event grants it (payments/webhook.ts);
 *    - declined: the purchase fails for good and grants nothing; any other fault is thrown and
 *      leaves it pending for a retry with the same key.
 *
 * `created` is false when this idempotency key had been seen before.
 */
export async function purchasePack(
  deps: { db: Db; payments: PaymentGateway },
  args: {
    accountId: string;
    pack: string;
    idempotencyKey: string;
    /** The buyer's address for the receipt; absent = the account's own. */
    email?: string;
    /** Where a hosted page sends the buyer back (absent: the recording gateway needs none). */
    returnTo?: { success: (purchaseId: string) => string; cancel: string };
  },
): Promise<{ purchase: Purchase; created: boolean; checkoutUrl?: string }> {
  const { db, payments } = deps;
  const { purchase, created } = await recordPurchase(db, args);
  if (purchase.status !== 'pending') return { purchase, created };
  const p = PACKS[purchase.pack];
  let start;
  try {
    start = await payments.startPayment({
      purchaseId: purchase.purchaseId,
      accountId: purchase.userId,
      pack: purchase.pack,
      amountCents: purchase.amountCents,
      idempotencyKey: purchaseCaptureKey(purchase.purchaseId),
      description: packDescription(p),
      email: args.email ?? (await accountEmail(db, purchase.userId)),
      successUrl: args.returnTo?.success(purchase.purchaseId) ?? '',
      cancelUrl: args.returnTo?.cancel ?? '',
    });
  } catch (err) {
    if (!(err instanceof PaymentDeclinedError)) throw err;
    return { purchase: await failPurchase(db, purchase, err.reason), created };
  }
  if (start.kind === 'checkout') return { purchase, created, checkoutUrl: start.url };
  return { purchase: await completePurchase(db, purchase, start.paymentId), created };
}

/** The address on the account (a personal workspace's owner, a team workspace's creator). */
async function accountEmail(db: Db, accountId: string): Promise<string> {
  const r = await db.query<{ email: string }>('SELECT email FROM users WHERE id = $1', [accountId]);
  return r.rows[0]!.email;
}
