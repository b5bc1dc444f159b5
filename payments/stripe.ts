import Stripe from 'stripe';
import type { Config } from '../core/config.ts';
import { PACKS, type PackName } from '../credits/packs.ts';
import type { Db } from '../db/pool.ts';

/**
 * Stripe through its official SDK: Checkout Sessions for pack purchases and verified webhook
 * events for fulfilment. STRIPE_API_URL points the SDK elsewhere (stripe-mock in tests).
 */
export function stripeFromConfig(config: Pick<Config, 'STRIPE_SECRET_KEY' | 'STRIPE_API_URL'>): Stripe | null {
  if (!config.STRIPE_SECRET_KEY) return null;
  const api = new URL(config.STRIPE_API_URL);
  return new Stripe(config.STRIPE_SECRET_KEY, {
    host: api.hostname,
    port: Number(api.port || (api.protocol === 'https:' ? 443 : 80)),
    protocol: api.protocol === 'http:' ? 'http' : 'https',
    maxNetworkRetries: 2,
    timeout: 20_000,
    appInfo: { name: 'lenstack-console' },
  });
}

/**
 * A hosted Checkout page for one pack. The purchase id rides in client_reference_id: the webhook
 * finds the pending purchase by it and checks the amount against our own price, so nothing the
 * browser sent decides what is granted. Stripe's idempotency key is the purchase id too.
 */
export async function createPackCheckout(
  stripe: Stripe,
  args: { purchaseId: string; pack: PackName; email: string; successUrl: string; cancelUrl: string },
): Promise<{ id: string; url: string }> {
  const p = PACKS[args.pack];
  const session = await stripe.checkout.sessions.create(
    {
      mode: 'payment',
      client_reference_id: args.purchaseId,
      customer_email: args.email,
      line_items: [{ quantity: 1, price_data: { currency: 'usd', unit_amount: p.priceCents, product_data: { name: `Lenstack ${p.label} pack: ${p.credits.toLocaleString('en-US')} credits` } } }],
      metadata: { purchaseId: args.purchaseId, pack: p.name },
      success_url: args.successUrl,
      cancel_url: args.cancelUrl,
    },
    { idempotencyKey: `checkout:${args.purchaseId}` },
  );
  if (!session.url) throw new Error('Stripe returned a Checkout Session without a URL');
  return { id: session.id, url: session.url };
}

/**
 * The Stripe customer a workspace's card is kept under: made once (Stripe's idempotency key is the
 * workspace id, and the id is stored only if none was stored yet, so two tabs agree on one).
 */
export async function ensureCustomer(stripe: Stripe, db: Db, args: { workspaceId: string; email: string }): Promise<string> {
  const known = await db.query<{ stripe_customer_id: string | null }>('SELECT stripe_customer_id FROM users WHERE id = $1', [args.workspaceId]);
  const existing = known.rows[0]?.stripe_customer_id;
  if (existing) return existing;
  const customer = await stripe.customers.create({ email: args.email, metadata: { workspaceId: args.workspaceId } }, { idempotencyKey: `customer:${args.workspaceId}` });
  const stored = await db.query<{ stripe_customer_id: string }>(
    `UPDATE users SET stripe_customer_id = coalesce(stripe_customer_id, $2) WHERE id = $1 RETURNING stripe_customer_id`,
    [args.workspaceId, customer.id],
  );
  return stored.rows[0]!.stripe_customer_id;
}

/**
 * A hosted Checkout page in setup mode: it stores a card through a SetupIntent and charges nothing.
 * The SetupIntent carries the workspace in its metadata; the `setup_intent.succeeded` event grants.
 */
export async function createCardSetupCheckout(
  stripe: Stripe,
  args: { workspaceId: string; customerId: string; successUrl: string; cancelUrl: string },
): Promise<{ id: string; url: string }> {
  const session = await stripe.checkout.sessions.create({
    mode: 'setup',
    currency: 'usd',
    customer: args.customerId,
    client_reference_id: args.workspaceId,
    setup_intent_data: { metadata: { purpose: CARD_ON_FILE, workspaceId: args.workspaceId }, description: 'Lenstack: card on file (never charged automatically)' },
    success_url: args.successUrl,
    cancel_url: args.cancelUrl,
  });
  if (!session.url) throw new Error('Stripe returned a Checkout Session without a URL');
  return { id: session.id, url: session.url };
}

export const CARD_ON_FILE = 'card-on-file';

/**
 * What a succeeded SetupIntent stored: the workspace it was for, checked against the customer we
 * made for that workspace, and the card's fingerprint (read from Stripe, not from the event).
 * `{ skip }` with the reason when it is not ours to act on.
 */
export async function storedCard(stripe: Stripe, db: Db, intent: Stripe.SetupIntent): Promise<{ workspaceId: string; fingerprint: string } | { skip: string }> {
  if (intent.metadata?.purpose !== CARD_ON_FILE || !intent.metadata.workspaceId) return { skip: 'not a card-on-file setup' };
  if (intent.status !== 'succeeded') return { skip: `status ${intent.status}` };
  const workspaceId = intent.metadata.workspaceId;
  const customerId = typeof intent.customer === 'string' ? intent.customer : intent.customer?.id;
  const known = await db.query<{ stripe_customer_id: string | null }>('SELECT stripe_customer_id FROM users WHERE id = $1', [workspaceId]);
  if (!known.rows[0]?.stripe_customer_id || known.rows[0].stripe_customer_id !== customerId) return { skip: 'customer is not the workspace’s' };
  const pmId = typeof intent.payment_method === 'string' ? intent.payment_method : intent.payment_method?.id;
  if (!pmId) return { skip: 'no payment method' };
  const pm = await stripe.paymentMethods.retrieve(pmId);
  if (pm.type !== 'card' || !pm.card?.fingerprint) return { skip: `payment method is ${pm.type}, not a card` };
  return { workspaceId, fingerprint: pm.card.fingerprint };
}
