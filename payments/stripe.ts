import Stripe from 'stripe';
import type { Config } from '../core/config.ts';
import { PACKS, type PackName } from '../credits/packs.ts';

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
