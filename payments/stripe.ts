import type { IncomingHttpHeaders } from 'node:http';
import Stripe from 'stripe';
import type { Config } from '../core/config.ts';
import { PACKS } from '../credits/price-book.ts';
import type { Db } from '../db/pool.ts';
import { WebhookSignatureError, type PaymentEvent, type PaymentGateway, type PaymentRequest, type PaymentStart } from './gateway.ts';

/**
 * Stripe, the card processor, as the implementation of the payments interface
 * (payments/gateway.ts), through its official SDK: Checkout Sessions for packs (payment mode) and
 * for cards on file (setup mode), and verified webhook events. The only file that imports
 * `stripe`. STRIPE_API_URL points the SDK elsewhere (stripe-mock in tests).
 */
export class StripeGateway implements PaymentGateway {
  readonly name = 'stripe' as const;

  constructor(
    private readonly stripe: Stripe,
    private readonly db: Db,
    private readonly webhookSecret: string,
  ) {}

  static fromConfig(config: Pick<Config, 'STRIPE_SECRET_KEY' | 'STRIPE_WEBHOOK_SECRET' | 'STRIPE_API_URL'>, db: Db): StripeGateway | null {
    if (!config.STRIPE_SECRET_KEY) return null;
    // loadConfig refuses a secret key without a webhook secret; a hand-made config is refused here.
    if (!config.STRIPE_WEBHOOK_SECRET) throw new Error('STRIPE_WEBHOOK_SECRET is required with STRIPE_SECRET_KEY');
    const api = new URL(config.STRIPE_API_URL);
    const stripe = new Stripe(config.STRIPE_SECRET_KEY, {
      host: api.hostname,
      port: Number(api.port || (api.protocol === 'https:' ? 443 : 80)),
      protocol: api.protocol === 'http:' ? 'http' : 'https',
      maxNetworkRetries: 2,
      timeout: 20_000,
      appInfo: { name: 'lenstack' },
    });
    return new StripeGateway(stripe, db, config.STRIPE_WEBHOOK_SECRET);
  }

  /**
   * A hosted Checkout page for one pack. The purchase id rides in client_reference_id (and the
   * account in the metadata): the webhook finds the pending purchase by it and checks the amount
   * against our own price, so nothing the browser sent decides what is granted. Stripe's
   * idempotency key is the purchase id too: a retry opens the same session.
   */
  async startPayment(req: PaymentRequest): Promise<PaymentStart> {
    const p = PACKS[req.pack];
    const session = await this.stripe.checkout.sessions.create(
      {
        mode: 'payment',
        client_reference_id: req.purchaseId,
        customer_email: req.email,
        line_items: [{ quantity: 1, price_data: { currency: 'usd', unit_amount: req.amountCents, product_data: { name: req.description } } }],
        metadata: { purchaseId: req.purchaseId, pack: p.name, userId: req.accountId },
        success_url: req.successUrl,
        cancel_url: req.cancelUrl,
      },
      { idempotencyKey: `checkout:${req.purchaseId}` },
    );
    if (!session.url) throw new Error('Stripe returned a Checkout Session without a URL');
    return { kind: 'checkout', checkoutId: session.id, url: session.url };
  }

  /**
   * A hosted Checkout page in setup mode: it stores a card through a SetupIntent and charges
   * nothing. The SetupIntent carries the workspace in its metadata, under the Stripe customer made
   * once for that workspace; the `setup_intent.succeeded` event grants.
   */
  async startCardSetup(args: { workspaceId: string; email: string; successUrl: string; cancelUrl: string }): Promise<{ url: string }> {
    const customerId = await this.ensureCustomer(args);
    const session = await this.stripe.checkout.sessions.create({
      mode: 'setup',
      currency: 'usd',
      customer: customerId,
      client_reference_id: args.workspaceId,
      setup_intent_data: { metadata: { purpose: CARD_ON_FILE, workspaceId: args.workspaceId }, description: 'Lenstack: card on file (never charged automatically)' },
      success_url: args.successUrl,
      cancel_url: args.cancelUrl,
    });
    if (!session.url) throw new Error('Stripe returned a Checkout Session without a URL');
    return { url: session.url };
  }

  /**
   * Stripe's signature over the exact bytes it sent, checked with STRIPE_WEBHOOK_SECRET; then what
   * the event means to us. Paid Checkout sessions are pack payments; a succeeded SetupIntent is a
   * card stored; anything else is acknowledged and ignored (Stripe retries only what we refuse).
   */
  async readWebhook(body: string, headers: IncomingHttpHeaders): Promise<PaymentEvent> {
    const signature = headers['stripe-signature'];
    let event: Stripe.Event;
    try {
      event = this.stripe.webhooks.constructEvent(body, typeof signature === 'string' ? signature : '', this.webhookSecret);
    } catch {
      throw new WebhookSignatureError('stripe-signature: not a valid signature of this body');
    }
    if (event.type === 'checkout.session.completed' || event.type === 'checkout.session.async_payment_succeeded') {
      const session = event.data.object;
      if (session.payment_status !== 'paid') return { type: 'ignored', eventId: event.id, reason: `payment status ${session.payment_status}` };
      if (!session.client_reference_id) return { type: 'ignored', eventId: event.id, reason: 'no purchase named' };
      return {
        type: 'pack-paid',
        eventId: event.id,
        purchaseId: session.client_reference_id,
        amountCents: session.amount_total ?? -1,
        paymentId: typeof session.payment_intent === 'string' ? session.payment_intent : session.id,
        accountId: session.metadata?.userId ?? null,
      };
    }
    if (event.type === 'setup_intent.succeeded') {
      const found = await this.storedCard(event.data.object);
      return 'skip' in found ? { type: 'ignored', eventId: event.id, reason: found.skip } : { type: 'card-stored', eventId: event.id, ...found };
    }
    return { type: 'ignored', eventId: event.id, reason: `event type ${event.type}` };
  }

  /**
   * The Stripe customer a workspace's card is kept under: made once (Stripe's idempotency key is
   * the workspace id, and the id is stored only if none was stored yet, so two tabs agree on one).
   */
  private async ensureCustomer(args: { workspaceId: string; email: string }): Promise<string> {
    const known = await this.db.query<{ stripe_customer_id: string | null }>('SELECT stripe_customer_id FROM users WHERE id = $1', [args.workspaceId]);
    const existing = known.rows[0]?.stripe_customer_id;
    if (existing) return existing;
    const customer = await this.stripe.customers.create({ email: args.email, metadata: { workspaceId: args.workspaceId } }, { idempotencyKey: `customer:${args.workspaceId}` });
    const stored = await this.db.query<{ stripe_customer_id: string }>(
      `UPDATE users SET stripe_customer_id = coalesce(stripe_customer_id, $2) WHERE id = $1 RETURNING stripe_customer_id`,
      [args.workspaceId, customer.id],
    );
    return stored.rows[0]!.stripe_customer_id;
  }

  /**
   * What a succeeded SetupIntent stored: the workspace it was for, checked against the customer
   * we made for that workspace, and the card's fingerprint (read from Stripe, not from the event).
   * `{ skip }` with the reason when it is not ours to act on.
   */
  private async storedCard(intent: Stripe.SetupIntent): Promise<{ workspaceId: string; fingerprint: string } | { skip: string }> {
    if (intent.metadata?.purpose !== CARD_ON_FILE || !intent.metadata.workspaceId) return { skip: 'not a card-on-file setup' };
    if (intent.status !== 'succeeded') return { skip: `status ${intent.status}` };
    const workspaceId = intent.metadata.workspaceId;
    const customerId = typeof intent.customer === 'string' ? intent.customer : intent.customer?.id;
    const known = await this.db.query<{ stripe_customer_id: string | null }>('SELECT stripe_customer_id FROM users WHERE id = $1', [workspaceId]);
    if (!known.rows[0]?.stripe_customer_id || known.rows[0].stripe_customer_id !== customerId) return { skip: 'customer is not the workspace’s' };
    const pmId = typeof intent.payment_method === 'string' ? intent.payment_method : intent.payment_method?.id;
    if (!pmId) return { skip: 'no payment method' };
    const pm = await this.stripe.paymentMethods.retrieve(pmId);
    if (pm.type !== 'card' || !pm.card?.fingerprint) return { skip: `payment method is ${pm.type}, not a card` };
    return { workspaceId, fingerprint: pm.card.fingerprint };
  }
}

export const CARD_ON_FILE = 'card-on-file';
